"""Which reply-harm detector reads a reply: the model files, and reading a whole conversation.

Two kinds of file share the name pattern `reply-harm[.fast].npz` and the same reading (`detect`,
`adetect` -> HarmFinding): the sentence model (harm.py; the shipped files, both speeds) and the harm
reader (harm_reader.py; built on demand into a folder of its own). The file's `format` says which it is.
The default sentence model reads long replies through its screen (screen.py) when one was chosen for it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from mheval.errors import InputError
from mheval.judges.offline import harm, harm_reader
from mheval.judges.offline.harm import HarmFinding, HarmModel, Unit
from mheval.judges.offline.harm_reader import ReaderModel
from mheval.judges.offline.screen import screen_beside
from mheval.judges.offline.trained import read_arrays

WEIGHTS = Path(__file__).resolve().parent / "weights"

HarmDetector = HarmModel | ReaderModel


@functools.lru_cache(maxsize=4)
def load_detector(path: Path) -> HarmDetector:
    arrays, meta = read_arrays(path, "reply-harm model file")
    kind = meta.get("format")
    if kind == harm_reader.FORMAT:
        return harm_reader.restore(arrays, meta, path)
    if kind == harm.FORMAT:
        model = HarmModel.restore(arrays, meta, path)
        model.screen = screen_beside(path)
        return model
    raise InputError(f"unsupported model format {kind!r}", path=path)


def detector_path(folder: Path, fast: bool = False) -> Path:
    return folder / f"reply-harm{'.fast' if fast else ''}.npz"


def shipped_detector(fast: bool = False) -> HarmDetector | None:
    """The detector that ships with mheval (the fast file for `offline:fast` when there is one), or None."""
    for path in ([detector_path(WEIGHTS, True)] if fast else []) + [detector_path(WEIGHTS)]:
        if path.is_file():
            return load_detector(path)
    return None


async def read_conversation(
    detector: HarmDetector, exchanges: Sequence[tuple[int, str, str | None]]
) -> dict[int, HarmFinding]:
    """turn -> the finding for that turn's reply, read against every user turn up to it; `exchanges` are
    (turn, user text, reply) in turn order. Turns without a reply are left out."""
    out: dict[int, HarmFinding] = {}
    users: list[str] = []
    for turn, user, reply in exchanges:
        users.append(user)
        if reply:
            out[turn] = await detector.adetect(Unit(tuple(users), reply))
    return out
