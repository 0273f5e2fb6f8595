"""`finetune_judge`: fine-tune a local transformer as a classifier judge (`mheval train --finetune DIR`).

    result = finetune_judge("labels.jsonl", model_dir="models/bert-base", text_fields=["text"],
                            label_field="label")
    print(result.figures)                 # same shape as train_judge's: out-of-fold over k folds
    result.judge.save("my-judge/")        # then: mheval run --judge my-judge/ ...

The recipe is the DialogueSafety paper's (Qiu et al.): a BERT-style encoder with a classification
head, class-weighted cross-entropy (rare labels are what a safety judge is for), AdamW at about 2e-5,
a few epochs, linear warm-up and decay. The base model is a folder on disk; nothing is downloaded.

Rows are read as `train_judge` reads them (training/data.py). The figures are out-of-fold: k models,
each trained on the other folds, then one model on all rows, which is saved. Training is deterministic
given the seed on a given machine and thread count (torch.manual_seed, a seeded shuffle).

Needs torch and transformers: `pip install 'mheval[finetune]'` (scikit-learn too, for the folds).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.features import Item
from mheval.judges.offline.finetuned import (
    FinetunedJudge,
    encode,
    folder_digest,
    is_model_folder,
    load_base,
    require_torch,
)
from mheval.labels import CRISIS_LABELS
from mheval.suites.papers import SAFETY_LABELS
from mheval.training import fit
from mheval.training.train import _infer_protocol, _roles, read_examples

DEFAULT_EPOCHS = 4
DEFAULT_LEARNING_RATE = 2e-5
DEFAULT_BATCH_SIZE = 16
DEFAULT_MAX_LENGTH = 256
WEIGHT_DECAY = 0.01
WARMUP_SHARE = 0.1
CLIP_NORM = 1.0


@dataclass
class FinetuneResult:
    """A fine-tuned judge (trained on all rows) and its out-of-fold figures."""

    judge: FinetunedJudge
    figures: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    oof: list[str] = field(default_factory=list)  # out-of-fold predicted labels, in row order

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.judge.name, "protocol": self.judge.protocol, "figures": self.figures, **self.params}


@dataclass
class Settings:
    """How each model is trained (the same for every fold and for the final model)."""

    epochs: int = DEFAULT_EPOCHS
    learning_rate: float = DEFAULT_LEARNING_RATE
    batch_size: int = DEFAULT_BATCH_SIZE
    max_length: int = DEFAULT_MAX_LENGTH
    seed: int = 0


def _label_order(targets: Sequence[str]) -> list[str]:
    """A known protocol's own label order when the labels are all its own, else sorted."""
    present = set(targets)
    for known in (CRISIS_LABELS, SAFETY_LABELS):
        if present <= set(known):
            return [label for label in known if label in present]
    return sorted(present)


def class_weights(y: np.ndarray, n_labels: int) -> np.ndarray:
    """Balanced weights n / (k * count) over the k labels present; 0 for a label absent from `y`."""
    counts = np.bincount(y, minlength=n_labels).astype(np.float64)
    present = counts > 0
    weights = np.zeros(n_labels)
    weights[present] = len(y) / (present.sum() * counts[present])
    return weights


@contextlib.contextmanager
def _threads(torch: Any, threads: int | None) -> Iterator[None]:
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_model(
    model_dir: Path,
    labels: Sequence[str],
    items: Sequence[Item],
    y: np.ndarray,
    *,
    needs_response: bool,
    settings: Settings,
    log: Callable[[str], None] | None = None,
) -> tuple[Any, Any]:
    """(model, tokenizer): the base folder's encoder with a new head, fine-tuned on (items, y)."""
    torch, _ = require_torch()
    torch.manual_seed(settings.seed)  # the new head's initial weights and dropout
    model, tokenizer = load_base(model_dir, labels=labels)
    weight = torch.tensor(class_weights(y, len(labels)), dtype=torch.float32)
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.learning_rate,
    )
    per_epoch = math.ceil(len(items) / settings.batch_size)
    total = max(1, settings.epochs * per_epoch)
    warmup = max(1, int(total * WARMUP_SHARE))

    def rate(step: int) -> float:  # linear warm-up, then linear decay to zero
        return (step + 1) / warmup if step < warmup else max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    order_rng = np.random.default_rng(settings.seed)
    targets = torch.tensor(y, dtype=torch.long)
    model.train()
    for epoch in range(settings.epochs):
        order = order_rng.permutation(len(items))
        running = 0.0
        for start in range(0, len(items), settings.batch_size):
            rows = order[start : start + settings.batch_size]
            batch = encode(
                tokenizer, [items[i] for i in rows], needs_response=needs_response, max_length=settings.max_length
            )
            logits = model(**batch).logits
            loss = torch.nn.functional.cross_entropy(logits, targets[rows], weight=weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            running += float(loss.detach()) * len(rows)
        if log:
            log(f"  epoch {epoch + 1}/{settings.epochs}: weighted loss {running / len(items):.4f}")
    model.eval()
    return model, tokenizer


def finetune_judge(
    path: str | Path,
    *,
    model_dir: str | Path,
    text_fields: Sequence[str],
    label_field: str | None,
    protocol: str | None = None,
    folds: int = 5,
    seed: int = 0,
    epochs: int = DEFAULT_EPOCHS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_length: int = DEFAULT_MAX_LENGTH,
    group_field: str | None = None,
    threads: int | None = None,
    name: str | None = None,
    command: str | None = None,
    log: Callable[[str], None] | None = None,
) -> FinetuneResult:
    """Cross-validate a fine-tuned classifier over `folds` stratified folds, then fine-tune on all rows.

    `model_dir` is a local transformers model folder (a BERT-style encoder with its tokenizer); with
    `threads`, torch uses that many threads while training (fewer threads, same results run to run).
    """
    path, model_dir = Path(path), Path(model_dir)
    if not model_dir.is_dir():
        raise InputError("model folder not found", path=model_dir, field="finetune")
    if not is_model_folder(model_dir):
        raise InputError("not a transformers model folder (no config.json)", path=model_dir, field="finetune")
    if not label_field:
        raise InputError("fine-tuning trains a classifier: give label_field", field="label_field")
    if folds < 2:
        raise InputError(f"folds must be at least 2, got {folds}", field="folds")
    for key, value in (("epochs", epochs), ("batch_size", batch_size), ("max_length", max_length)):
        if value < 1:
            raise InputError(f"{key} must be at least 1, got {value}", field=key)
    if not learning_rate > 0:
        raise InputError(f"learning_rate must be positive, got {learning_rate}", field="learning_rate")
    torch, transformers = require_torch()
    case_field, response_field = _roles(text_fields)
    items, targets, groups = read_examples(path, case_field, response_field, label_field, group_field)
    labels = _label_order(targets)
    if len(labels) < 2:
        raise InputError("a classifier needs at least two distinct labels", path=path, field=label_field)
    if len(items) < folds * 2:
        raise InputError(f"too few rows to cross-validate: {len(items)} rows for {folds} folds", field="folds")
    if group_field and len(set(groups)) < folds:
        raise InputError(f"{len(set(groups))} groups cannot make {folds} grouped folds", field="group_field")
    has_response = response_field is not None
    protocol = protocol or _infer_protocol("classifier", labels, has_response)
    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    positions = getattr(config, "max_position_embeddings", None)
    settings = Settings(epochs, learning_rate, batch_size, min(max_length, positions or max_length), seed)
    y = np.array([labels.index(t) for t in targets], dtype=np.int64)

    oof = np.zeros(len(y), dtype=np.int64)
    with _threads(torch, threads):
        splits = fit._splits(y.astype(float), "classifier", folds, seed, groups if group_field else None)
        for k, (train, test) in enumerate(splits, start=1):
            if log:
                log(f"fold {k}/{folds}: training on {len(train)} rows, testing on {len(test)}")
            model, tokenizer = train_model(
                model_dir, labels, [items[i] for i in train], y[train],
                needs_response=has_response, settings=settings, log=log,
            )  # fmt: skip
            fold_judge = FinetunedJudge(model, tokenizer, {"protocol": protocol, "labels": labels,
                                                           "target": "response" if has_response else "case",
                                                           "max_length": settings.max_length})  # fmt: skip
            oof[test] = fold_judge.predict_proba([items[i] for i in test]).argmax(axis=1)
        if log:
            log(f"final model: training on all {len(y)} rows")
        model, tokenizer = train_model(
            model_dir, labels, items, y, needs_response=has_response, settings=settings, log=log
        )

    figures = fit.classifier_figures([labels[i] for i in y], [labels[i] for i in oof], labels)
    params = {
        "folds": folds,
        "seed": seed,
        "epochs": settings.epochs,
        "learning_rate": settings.learning_rate,
        "batch_size": settings.batch_size,
        "max_length": settings.max_length,
        "weight_decay": WEIGHT_DECAY,
        "warmup_share": WARMUP_SHARE,
        "loss": "class-weighted cross-entropy (balanced weights)",
        "class_weights": dict(zip(labels, np.round(class_weights(y, len(labels)), 4).tolist(), strict=True)),
        "grouped": bool(group_field),
    }
    meta = {
        "protocol": protocol,
        "kind": "classifier",
        "labels": labels,
        "target": "response" if has_response else "case",
        "text_fields": {"case": case_field, "response": response_field},
        "target_field": label_field,
        "max_length": settings.max_length,
        "base_model": {
            "folder": model_dir.name,
            "model_type": getattr(config, "model_type", None),
            "sha256": folder_digest(model_dir),
        },
        "training": {
            "data": path.name,
            "data_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "rows": len(items),
            "command": command or _python_call(path, model_dir, text_fields, label_field, protocol, folds, seed),
            "torch": str(torch.__version__),
            "transformers": str(transformers.__version__),
            **params,
        },
        "figures": {"cross_validated": figures},
    }
    judge = FinetunedJudge(model, tokenizer, meta, name=name or f"finetuned:{path.stem}")
    return FinetuneResult(judge, figures, params, [labels[i] for i in oof])


def _python_call(
    path: Path, model_dir: Path, text_fields: Sequence[str], label_field: str, protocol: str, folds: int, seed: int
) -> str:
    return (
        f"finetune_judge({shlex.quote(str(path))!r}, model_dir={str(model_dir)!r}, "
        f"text_fields={list(text_fields)!r}, label_field={label_field!r}, protocol={protocol!r}, "
        f"folds={folds}, seed={seed})"
    )
