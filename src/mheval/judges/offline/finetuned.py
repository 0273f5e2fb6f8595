"""Fine-tuned transformer judges: a folder written by `mheval train --finetune MODEL_DIR`.

The folder holds what transformers' `save_pretrained` writes for a sequence classifier and its
tokenizer, plus `mheval-judge.json`: format and version, protocol, labels, whether it judges the case
or a response, the text fields and the token budget it was trained with, the base model folder, the
training data hash, the command and the cross-validated figures. No training text is stored.

torch and transformers are the optional extra `mheval[finetune]`; they are imported only when such a
folder is loaded or trained, so the rest of mheval never pays their import time (several seconds).

What the model reads (the same function at training and at judging time, `encode`):
- a judge of the case (crisis triage): the user's turns (embed.user_text); when the token budget is
  short, the oldest tokens go first, because the newest turn says most about the present;
- a judge of a response: the pair (conversation, reply). The reply gets up to 60% of the budget from
  its start, the conversation the rest from its end (the turns next to the reply).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline import embed
from mheval.judges.offline.features import Item
from mheval.judges.offline.trained import FileJudge, label_judgment
from mheval.records import Judgment

if TYPE_CHECKING:
    pass

FORMAT = "mheval-finetuned-judge"
FORMAT_VERSION = 1
META_FILE = "mheval-judge.json"
INSTALL_HINT = "pip install 'mheval[finetune]'"
RESPONSE_SHARE = 0.6  # of the token budget, for the reply when a pair is too long


def require_torch() -> tuple[Any, Any]:
    """(torch, transformers), or an InputError that says how to install them."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise InputError(f"fine-tuned transformer judges need torch and transformers: {INSTALL_HINT}") from exc
    transformers.logging.set_verbosity_error()  # "newly initialised head" notices are expected here
    transformers.logging.disable_progress_bar()  # no bars for loading and saving a small folder
    return torch, transformers


def is_model_folder(path: str | Path) -> bool:
    """A folder that transformers can load a model from (its config.json is there)."""
    return (Path(path) / "config.json").is_file()


def load_base(path: str | Path, *, labels: Sequence[str] | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) from a local folder, never from a hub. With `labels`, the classification head
    is sized for them (a new head when the folder holds a bare encoder or a head of another size)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError("model folder not found", path=path)
    if not is_model_folder(path):
        raise InputError("not a transformers model folder (no config.json)", path=path)
    _, transformers = require_torch()
    extra: dict[str, Any] = {}
    if labels is not None:
        extra = {
            "num_labels": len(labels),
            "id2label": dict(enumerate(labels)),
            "label2id": {label: i for i, label in enumerate(labels)},
            "ignore_mismatched_sizes": True,
        }
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True, **extra)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot load the model or tokenizer from this folder ({exc})", path=path) from None
    model.eval()
    return model, tokenizer


def _offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    return tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]


def _cut(text: str, offsets: Sequence[tuple[int, int]], n: int, *, end: bool) -> str:
    """The part of `text` covering its first (or, with `end`, last) `n` tokens, cut at a token boundary."""
    if len(offsets) <= n:
        return text
    if n <= 0:
        return ""
    return text[offsets[-n][0] :] if end else text[: offsets[n - 1][1]]


def texts_of(item: Item, needs_response: bool) -> tuple[str, str | None]:
    """The text (and the reply, for a response judge) that the model reads for one unit."""
    if needs_response:
        return embed.context_text(item.case), embed.clip(item.response or "", embed.RESPONSE_BUDGET)
    return embed.user_text(item.case), None


def encode(tokenizer: Any, items: Sequence[Item], *, needs_response: bool, max_length: int) -> dict[str, Any]:
    """Token ids, padded to the longest unit, as torch tensors (see the module doc for what is cut)."""
    budget = max_length - (3 if needs_response else 2)  # [CLS] text [SEP] (reply [SEP])
    firsts: list[str] = []
    replies: list[str] = []
    for item in items:
        text, reply = texts_of(item, needs_response)
        text_offsets = _offsets(tokenizer, text)
        if reply is None:
            firsts.append(_cut(text, text_offsets, budget, end=True))
            continue
        reply_offsets = _offsets(tokenizer, reply)
        keep_reply = min(len(reply_offsets), max(int(budget * RESPONSE_SHARE), budget - len(text_offsets)))
        replies.append(_cut(reply, reply_offsets, keep_reply, end=False))
        firsts.append(_cut(text, text_offsets, budget - keep_reply, end=True))
    # truncation stays on as a guard: a cut at a token boundary can re-tokenise a little longer.
    return tokenizer(firsts, replies or None, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def folder_digest(path: Path) -> str:
    """sha256 over the folder's files (names and bytes), to record which base model was fine-tuned."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


class FinetunedJudge(FileJudge):
    """A judge that is a fine-tuned classifier folder. Implements the Judge protocol (judges/base.py)."""

    def __init__(self, model: Any, tokenizer: Any, meta: dict[str, Any], *, name: str = "") -> None:
        for key in ("protocol", "labels", "target", "max_length"):
            if key not in meta:
                raise InputError("judge metadata lacks a required key", field=key)
        if int(model.config.num_labels) != len(meta["labels"]):
            raise InputError("the model's head does not fit its labels", field="labels")
        self.model = model
        self.tokenizer = tokenizer
        self.meta = meta
        self.name = name or str(meta.get("name") or "finetuned")

    @property
    def protocol(self) -> str:
        return str(self.meta["protocol"])

    @property
    def labels(self) -> list[str]:
        return list(self.meta["labels"])

    @property
    def needs_response(self) -> bool:
        return self.meta["target"] == "response"

    # -- predictions ------------------------------------------------------------------------------

    def predict_proba(self, items: Sequence[Item], *, batch_size: int = 16) -> np.ndarray:
        """(n, labels) probabilities, float64."""
        torch, _ = require_torch()
        self.model.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, len(items), batch_size):
                batch = encode(
                    self.tokenizer,
                    items[start : start + batch_size],
                    needs_response=self.needs_response,
                    max_length=int(self.meta["max_length"]),
                )
                out.append(torch.softmax(self.model(**batch).logits.double(), dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, len(self.labels)))

    def predict(self, items: Sequence[Item]) -> list[str]:
        return [self.labels[i] for i in self.predict_proba(items).argmax(axis=1)]

    # -- the Judge protocol ---------------------------------------------------------------------

    async def judge_item(self, item: Item, ids: dict[str, Any]) -> Judgment:
        """One unit per forward pass (no padding), so a verdict does not depend on what it was batched with."""
        proba = self.predict_proba([item])[0]
        return label_judgment(self.name, self.labels, proba, int(proba.argmax()), ids)

    # -- files -------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the folder: model weights (safetensors), tokenizer, and mheval-judge.json."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise InputError("exists and is not a folder", path=path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **self.meta, "name": self.name}
        (path / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return path


def read_meta(path: str | Path) -> dict[str, Any]:
    """The metadata of a fine-tuned judge folder, checked, without importing torch: cheap enough to check
    a run's plan (which protocol the folder judges) before anything is written."""
    path = Path(path)
    if not path.is_dir():
        raise InputError("fine-tuned judge folder not found", path=path)
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise InputError(
            f"not a fine-tuned mheval judge folder (no {META_FILE}; see `mheval train --finetune`)", path=path
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable judge metadata ({exc})", path=meta_path) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        found = meta if isinstance(meta, dict) else {}
        raise InputError(
            f"unsupported judge format {found.get('format')!r} v{found.get('format_version')!r}", path=meta_path
        )
    for key in ("protocol", "labels", "target", "max_length"):
        if key not in meta:
            raise InputError("judge metadata lacks a required key", path=meta_path, field=key)
    return meta


def load_finetuned_judge(path: str | Path, *, name: str | None = None) -> FinetunedJudge:
    """A judge from a folder written by `FinetunedJudge.save`; anything else is an InputError naming it."""
    path = Path(path)
    meta = read_meta(path)
    model, tokenizer = load_base(path)
    try:
        return FinetunedJudge(model, tokenizer, meta, name=name or meta.get("name") or f"finetuned:{path.name}")
    except InputError as exc:
        raise InputError(exc.message, path=path, field=exc.field) from None
