"""The one content hash of mheval: a short, stable digest of any JSON-able value.

It sits on the lowest floor because everything that stores or reuses a result keys it with this hash:
the engine's units (engine/identity.py), the multi-turn expectations and the flow judgment.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def digest(value: Any) -> str:
    """A short, stable hash of any JSON-able value (keys sorted, so a dict's order does not matter)."""
    payload = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
