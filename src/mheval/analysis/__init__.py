"""Analyses that read files: human labels, agreement reports, and the papers' reliability tables."""

from mheval.analysis.agree import AgreementReport, Block, agreement_report
from mheval.analysis.labels import load_human_labels
from mheval.analysis.reproduce import reproduce_help_harm, reproduce_mentalalign

__all__ = [
    "AgreementReport",
    "Block",
    "agreement_report",
    "load_human_labels",
    "reproduce_help_harm",
    "reproduce_mentalalign",
]
