"""The screen: the fast detector reads a long reply first; e5 reads it only when that reading is not clearly harmless.

The default reply-harm detector embeds every sentence of a reply with multilingual-e5 (harm.py), and e5 is
what judging costs: a real model's reply of 30 sentences (about 650 tokens) takes e5 a quarter of a second on
two cores. Most long replies are plainly harmless, and the fast detector (`reply-harm.fast.npz`, the Universal
Sentence Encoder's sentence rows, which the default detector embeds anyway) says so at a small fraction of the
cost. So for a reply of at least `from_sentences` sentences the fast detector reads first; when its harm
probability is below `below` and its dismissal head finds nothing, its finding is the reply's finding (marked
`screened`) and e5 never reads the reply. Every other reply, and every short one (blunt harm is short, and a
short reply costs e5 little), is read by the default detector as before.

`below` is chosen by `python -m mheval.training.screen` out of fold over the corpus's train and tune batches
(each writer held out in turn, the same folds as the detectors' calibration): the largest cut-off at which no
long harmful reply that the default detector catches would be cleared by the screen. The file
`weights/reply-screen.json` records it with the digests of the two detector files it was chosen for; beside
other detector files (a rebuilt one) it is not used, and every reply is read in full.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from mheval.errors import InputError
from mheval.judges.offline.harm import HarmModel, Screen
from mheval.judges.offline.trained import read_arrays

FORMAT = "mheval-reply-screen"
FORMAT_VERSION = 1
FILE_NAME = "reply-screen.json"
DEFAULT_FILE, FAST_FILE = "reply-harm.npz", "reply-harm.fast.npz"


def detector_digests(folder: Path) -> dict[str, str]:
    """file name -> SHA-256 of the two detector files in `folder`: what a screen was chosen for."""
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in (DEFAULT_FILE, FAST_FILE)}


def write_screen(folder: Path, below: float, from_sentences: int, meta: dict[str, Any]) -> Path:
    """The screen file for the two detector files now in `folder`."""
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "below": below,
        "from_sentences": from_sentences,
        "reads": detector_digests(folder),
        **meta,
    }
    path = folder / FILE_NAME
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


@functools.lru_cache(maxsize=4)
def screen_beside(detector_file: Path) -> Screen | None:
    """The screen for the default detector file `detector_file`, or None: no screen file beside it, a fast
    detector's file, or a screen chosen for other detector files."""
    path = detector_file.parent / FILE_NAME
    if detector_file.name != DEFAULT_FILE or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the reply screen: {exc}", path=path) from exc
    if not isinstance(record, dict) or (record.get("format"), record.get("format_version")) != (FORMAT, FORMAT_VERSION):
        raise InputError(f"not a reply screen of format version {FORMAT_VERSION}", path=path)
    fast_file = detector_file.parent / FAST_FILE
    if not fast_file.is_file() or record.get("reads") != detector_digests(detector_file.parent):
        return None
    arrays, meta = read_arrays(fast_file, "reply-harm model file")
    return Screen(HarmModel.restore(arrays, meta, fast_file), float(record["below"]), int(record["from_sentences"]))
