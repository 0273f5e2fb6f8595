"""`fit_mlp`: a classifier head with one hidden layer (judges/offline/trained.py's MlpHead), trained in torch.

The reply-harm detector's sentence head. A linear head adds up what each feature says; the same sentence
embedding can mean harm beside one user turn or one reply and care beside another, and a hidden layer lets
the head weigh one feature by another. Out of fold on the corpus's train and tune batches (writers held out),
it ranked harmful replies above the others better than the linear head (AUC 0.965 against 0.953) and
flagged fewer hard negatives at the threshold rule; the detector reads both (training/harm.py's `RECIPE`
gives the comparison).

The recipe: standardised features (fit.py's scaling), dropout on the input and the hidden layer, AdamW with
one-cycle learning rates, weighted cross-entropy (the corpus's sentence weights), a fixed number of epochs.
Deterministic given the seed on a given machine and thread count. Needs torch (`pip install
'mheval[finetune]'`); judging with the saved head needs only numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.finetuned import INSTALL_HINT
from mheval.judges.offline.trained import MlpHead
from mheval.training.fit import _scaling


@dataclass(frozen=True)
class MlpRecipe:
    hidden: int = 256
    epochs: int = 12
    batch: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 1e-2
    input_dropout: float = 0.1
    hidden_dropout: float = 0.3
    seed: int = 0


def fit_mlp(
    x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, n_labels: int, recipe: MlpRecipe = MlpRecipe()
) -> MlpHead:
    """An MlpHead fitted to rows `x` with labels `y` (0..n_labels-1) and weights `sample_weight`."""
    try:
        import torch
    except ImportError as exc:
        raise InputError(f"the reply-harm detector's head is trained in torch: {INSTALL_HINT}") from exc
    mean, scale = _scaling(x)
    inputs = torch.tensor((x - mean) / scale, dtype=torch.float32)
    labels = torch.tensor(np.asarray(y), dtype=torch.long)
    weights = torch.tensor(np.asarray(sample_weight), dtype=torch.float32)
    torch.manual_seed(recipe.seed)
    hidden = torch.nn.Linear(inputs.shape[1], recipe.hidden)
    out = torch.nn.Linear(recipe.hidden, n_labels)
    net = torch.nn.Sequential(
        torch.nn.Dropout(recipe.input_dropout), hidden, torch.nn.ReLU(), torch.nn.Dropout(recipe.hidden_dropout), out
    )
    optimiser = torch.optim.AdamW(net.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    n = len(inputs)
    steps_per_epoch = (n + recipe.batch - 1) // recipe.batch
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, recipe.learning_rate, total_steps=recipe.epochs * steps_per_epoch
    )
    order = torch.Generator().manual_seed(recipe.seed)
    net.train()
    for _ in range(recipe.epochs):
        perm = torch.randperm(n, generator=order)
        for start in range(0, n, recipe.batch):
            idx = perm[start : start + recipe.batch]
            loss = torch.nn.functional.cross_entropy(net(inputs[idx]), labels[idx], reduction="none")
            loss = (loss * weights[idx]).sum() / weights[idx].sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()

    def array(t: torch.Tensor) -> np.ndarray:  # float32 now, so the head judges the same before and after saving
        return t.detach().numpy().astype(np.float32).astype(np.float64)

    return MlpHead(
        mean=mean,
        scale=scale,
        hidden_weight=array(hidden.weight),
        hidden_bias=array(hidden.bias),
        coef=array(out.weight),
        intercept=array(out.bias),
    )
