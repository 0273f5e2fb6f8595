"""Protocols as data: each rubric is one YAML file in `defs/`, loaded, rendered and parsed by code here."""

from mheval.protocols.parse import Verdict, parse_verdict
from mheval.protocols.render import RenderError, render_messages
from mheval.protocols.spec import ProtocolSpec, list_protocols, load_protocol

__all__ = [
    "ProtocolSpec",
    "RenderError",
    "Verdict",
    "list_protocols",
    "load_protocol",
    "parse_verdict",
    "render_messages",
]
