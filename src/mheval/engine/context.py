"""The run's budgets and prices as the models' `RunContext`, made from the run's config.

Its own module because both the runner and each Ray worker make one (a worker holds a share of the
token budget), and the Ray executor must not import the runner that drives it."""

from __future__ import annotations

from mheval.config import RunConfig
from mheval.models.context import RunContext


def run_context(config: RunConfig, tpm_share: int = 1) -> RunContext:
    """The run's budgets and prices for its models (split `tpm_share` ways, for Ray workers that each hold
    a part); nothing is set process-wide, so runs in one process share nothing."""
    return RunContext.of(config.tpm, config.prices, tpm_share=tpm_share)
