"""`mheval train`: a judge of your own from labelled data (embedding + linear head, or a fine-tuned
transformer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mheval.commands.console import err
from mheval.errors import InputError


def train(
    data: Annotated[Path, typer.Argument(help="Labelled JSONL or CSV.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The judge file to write (.npz; a folder with --finetune).")
    ],
    text_field: Annotated[list[str], typer.Option("--text-field", help="Text column(s) to embed (repeatable).")],
    label_field: Annotated[str | None, typer.Option(help="Label column (a classifier).")] = None,
    score_field: Annotated[str | None, typer.Option(help="Score column (a scorer).")] = None,
    kind: Annotated[str, typer.Option(help="classifier or scorer.")] = "classifier",
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="The protocol it judges.")] = None,
    folds: Annotated[int, typer.Option(help="Cross-validation folds for the printed figures.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed (training is deterministic given it).")] = 0,
    group_field: Annotated[str | None, typer.Option(help="Keep rows sharing this value in one fold.")] = None,
    features: Annotated[
        str,
        typer.Option(
            help="Feature set: use, e5 (as `offline`), fast (as `offline:fast`), "
            "ngram, or blocks joined by + (e.g. e5:user+ngram:user)."
        ),
    ] = "use",
    finetune: Annotated[
        Path | None,
        typer.Option(
            "--finetune",
            metavar="MODEL_DIR",
            help="Fine-tune this local transformer model folder as a classifier "
            "instead (needs mheval[finetune]; nothing is downloaded).",
        ),
    ] = None,
    epochs: Annotated[int, typer.Option(help="With --finetune: passes over the data.")] = 4,
    learning_rate: Annotated[float, typer.Option(help="With --finetune: AdamW learning rate.")] = 2e-5,
    batch_size: Annotated[int, typer.Option(help="With --finetune: rows per step.")] = 16,
    max_length: Annotated[int, typer.Option(help="With --finetune: tokens per unit.")] = 256,
) -> None:
    """Train an embedding + linear-head judge on your labels (or fine-tune a transformer with --finetune);
    use the file or folder as `--judge PATH`."""
    from mheval.training import train_judge

    if kind not in ("classifier", "scorer"):
        raise InputError(f"unknown kind {kind!r}", field="kind", choices=("classifier", "scorer"))
    command = "mheval " + " ".join(sys.argv[1:])
    if finetune is not None:
        from mheval.training.finetune import finetune_judge

        if kind != "classifier":
            raise InputError("--finetune trains a classifier: give --label-field", field="kind")
        result: Any = finetune_judge(
            data,
            model_dir=finetune,
            text_fields=text_field,
            label_field=label_field,
            protocol=protocol,
            folds=folds,
            seed=seed,
            epochs=epochs,
            learning_rate=learning_rate,
            batch_size=batch_size,
            max_length=max_length,
            group_field=group_field,
            command=command,
            log=lambda line: err.print(line, highlight=False, markup=False),
        )
    else:
        result = train_judge(
            data,
            text_fields=text_field,
            label_field=label_field,
            score_field=score_field,
            kind=kind,  # type: ignore[arg-type]
            protocol=protocol,
            folds=folds,
            seed=seed,
            group_field=group_field,
            command=command,
            features=features,
        )
    result.judge.save(output)
    print(json.dumps(result.to_dict(), indent=1, ensure_ascii=False, default=str))
    err.print(f"judge saved: {output.resolve()} (use it as --judge {output})", highlight=False, markup=False)
