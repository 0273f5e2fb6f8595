"""The reply-harm detector's hidden-layer head (trained.MlpHead, training/mlp.py): it learns what a linear head
cannot, and a saved head judges exactly as the fitted one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mheval.errors import InputError
from mheval.judges.offline.trained import LinearHead, MlpHead, read_arrays, restore_head, write_head
from mheval.training.fit import fit_head


def _crossed(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two features whose labels depend on their product (XOR of signs) plus noise columns: the meaning of one
    feature flips with the other, as a sentence's words flip with what surrounds them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(int)
    return x, y


@pytest.fixture
def torch_one_thread() -> Iterator[None]:
    """These nets are tiny: a second thread only spins, and on a busy machine it cost four times the CPU."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("torch_one_thread")
def test_a_hidden_layer_learns_a_crossed_rule_a_linear_head_cannot() -> None:
    from mheval.training.mlp import MlpRecipe, fit_mlp

    x, y = _crossed(1000, 0)
    test_x, test_y = _crossed(1000, 1)
    mlp = fit_mlp(
        x, y, np.ones(len(y)), n_labels=2, recipe=MlpRecipe(hidden=32, epochs=25, batch=64, learning_rate=1e-2)
    )
    linear = fit_head(x, y, kind="classifier", n_labels=2, strength=1.0)
    assert (mlp.proba(test_x).argmax(axis=1) == test_y).mean() > 0.9
    assert (linear.proba(test_x).argmax(axis=1) == test_y).mean() < 0.65


@pytest.mark.usefixtures("torch_one_thread")
def test_the_same_seed_fits_the_same_head_and_weights_move_it() -> None:
    from mheval.training.mlp import MlpRecipe, fit_mlp

    x, y = _crossed(400, 2)
    recipe = MlpRecipe(hidden=8, epochs=10, batch=64, learning_rate=1e-2)
    first = fit_mlp(x, y, np.ones(len(y)), n_labels=2, recipe=recipe)
    again = fit_mlp(x, y, np.ones(len(y)), n_labels=2, recipe=recipe)
    np.testing.assert_allclose(first.proba(x), again.proba(x), rtol=0, atol=1e-6)
    # Rows of label 1 weighted up: the head leans to label 1.
    leaning = fit_mlp(x, y, np.where(y == 1, 20.0, 1.0), n_labels=2, recipe=recipe)
    assert leaning.proba(x)[:, 1].mean() > first.proba(x)[:, 1].mean() + 0.1


def test_a_saved_head_reads_back_as_the_kind_it_was(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    mlp = MlpHead(
        mean=rng.normal(size=5),
        scale=rng.uniform(0.5, 2, size=5),
        hidden_weight=rng.normal(size=(4, 5)),
        hidden_bias=rng.normal(size=4),
        coef=rng.normal(size=(3, 4)),
        intercept=rng.normal(size=3),
    )
    linear = LinearHead(mean=np.zeros(5), scale=np.ones(5), coef=rng.normal(size=(3, 5)), intercept=np.zeros(3))
    x = rng.normal(size=(7, 5))
    for head in (mlp, linear):
        path = write_head(tmp_path / f"{type(head).__name__}.npz", head, {"format": "test"})
        arrays, meta = read_arrays(path, "test file")
        back = restore_head(arrays, path, "test file")
        assert type(back) is type(head) and meta == {"format": "test"}
        # float32 on disk: equal to the head within float32 rounding
        np.testing.assert_allclose(back.proba(x), head.proba(x), rtol=0, atol=1e-5)
        assert np.allclose(back.proba(x).sum(axis=1), 1.0)
    arrays, _ = read_arrays(tmp_path / "MlpHead.npz", "test file")
    del arrays["coef"]
    with pytest.raises(InputError, match="no coef"):
        restore_head(arrays, tmp_path / "MlpHead.npz", "test file")


def test_several_heads_share_one_file_in_order(tmp_path: Path) -> None:
    from mheval.judges.offline.trained import restore_heads, write_heads

    rng = np.random.default_rng(4)
    linear = LinearHead(mean=np.zeros(3), scale=np.ones(3), coef=rng.normal(size=(2, 3)), intercept=np.zeros(2))
    mlp = MlpHead(
        mean=np.zeros(3),
        scale=np.ones(3),
        hidden_weight=rng.normal(size=(4, 3)),
        hidden_bias=np.zeros(4),
        coef=rng.normal(size=(2, 4)),
        intercept=np.zeros(2),
    )
    path = write_heads(tmp_path / "two.npz", (linear, mlp), {})
    arrays, _ = read_arrays(path, "test file")
    back = restore_heads(arrays, path, "test file")
    assert [type(h) for h in back] == [LinearHead, MlpHead]
    x = rng.normal(size=(5, 3))
    for a, b in zip(back, (linear, mlp), strict=True):
        np.testing.assert_allclose(a.proba(x), b.proba(x), rtol=0, atol=1e-5)
    single = write_head(tmp_path / "one.npz", mlp, {})
    assert [type(h) for h in restore_heads(read_arrays(single, "test file")[0], single, "test file")] == [MlpHead]
