"""Embeddings for memory that work offline: nothing here downloads anything.

The default is `HashingEmbedding`: signed feature hashing of word tokens and character n-grams into a
fixed number of dimensions, L2-normalised. It is deterministic across processes and machines (it uses
its own hash, not Python's salted `hash`), needs no model, and costs tens of microseconds per text.
It captures lexical overlap (op names, shapes, dtypes, error words, design names), which is what case
and rule retrieval match on.

A sentence-transformers model is used only when the user names one (`KERNELWRIGHT_EMBEDDING=st:<path or
name>`) and both the package and the model files are already on this machine; it is loaded with
`local_files_only=True`, so a missing model is a clear error, never a download.

Both are Chroma embedding functions (registered under their `name()`), so a collection reopened later
rebuilds the same function from its stored configuration instead of falling back to Chroma's default
(which would download an ONNX model).
"""

from __future__ import annotations

import os
import re
import zlib
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

DEFAULT_DIM = 256
ENV_EMBEDDING = "KERNELWRIGHT_EMBEDDING"

# Word tokens keep dotted and underscored names whole ("tl.dot", "BLOCK_M", "aten.mm").
_WORD_RE = re.compile(r"[a-z_][a-z0-9_.]*|[0-9]+")
_SPACE_RE = re.compile(r"\s+")
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
# Weights: a shared word says more than a shared 3-gram; n-grams keep near-misses (bf16 vs fp16) close.
_WORD_WEIGHT = 1.0
_GRAM_WEIGHT = 0.35
_GRAM_SIZES = (3, 4)
_MAX_CHARS = 4000


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads polynomial hashes over all 64 bits (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(30))
        h = h * np.uint64(0xBF58476D1CE4E5B9)
        h = h ^ (h >> np.uint64(27))
        h = h * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    return h


def _gram_hashes(data: np.ndarray, n: int) -> np.ndarray:
    """Hashes of every n-byte window of `data` (uint8), computed with whole-array operations."""
    if data.size < n:
        return np.empty(0, dtype=np.uint64)
    m = data.size - n + 1
    h = np.full(m, np.uint64(n * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * np.uint64(1099511628211) + data[k : k + m].astype(np.uint64)
    return _mix(h)


def _word_hashes(words: list[str]) -> np.ndarray:
    # crc32 is stable across runs; the offset keeps word features apart from n-gram features.
    raw = np.fromiter((zlib.crc32(w.encode()) for w in words), dtype=np.uint64, count=len(words))
    with np.errstate(over="ignore"):
        return _mix(raw + np.uint64(0x632BE59BD9B4E019))


def hash_embed(text: str, dim: int = DEFAULT_DIM) -> np.ndarray:
    """The hashing embedding of one text: float32 vector of length `dim`, unit norm (zero for empty)."""
    t = _SPACE_RE.sub(" ", text.lower()).strip()[:_MAX_CHARS]
    vec = np.zeros(dim, dtype=np.float64)
    if not t:
        return vec.astype(np.float32)
    words = _WORD_RE.findall(t)
    if words:
        wh = _word_hashes(words)
        signs = np.where((wh >> np.uint64(63)) == 1, -_WORD_WEIGHT, _WORD_WEIGHT)
        vec += np.bincount((wh % np.uint64(dim)).astype(np.int64), weights=signs, minlength=dim)
    data = np.frombuffer(f" {t} ".encode(), dtype=np.uint8)
    for n in _GRAM_SIZES:
        gh = _gram_hashes(data, n)
        if gh.size:
            signs = np.where((gh >> np.uint64(63)) == 1, -_GRAM_WEIGHT, _GRAM_WEIGHT)
            vec += np.bincount((gh % np.uint64(dim)).astype(np.int64), weights=signs, minlength=dim)
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return vec.astype(np.float32)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def text_similarity(a: str, b: str, dim: int = 1024) -> float:
    """Cosine similarity of two texts under the hashing embedding (wider, for fewer collisions)."""
    return cosine(hash_embed(a, dim), hash_embed(b, dim))


@register_embedding_function
class HashingEmbedding(EmbeddingFunction[Documents]):
    """Deterministic signed feature hashing of words and character 3/4-grams; see the module docstring."""

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        if dim < 16:
            raise ValueError(f"hashing embedding needs at least 16 dimensions, got {dim}")
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:
        return [hash_embed(t, self.dim) for t in input]

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """A (len(texts), dim) float32 matrix; what the batch writers pass to Chroma directly."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([hash_embed(t, self.dim) for t in texts])

    @staticmethod
    def name() -> str:
        return "kernelwright-hashing"

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashingEmbedding:
        return HashingEmbedding(int(config.get("dim", DEFAULT_DIM)))

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def describe(self) -> str:
        return f"hashing-{self.dim}"


@register_embedding_function
class LocalSentenceTransformer(EmbeddingFunction[Documents]):
    """A sentence-transformers model that is already on this machine (never downloaded)."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ValueError(
                f"embedding 'st:{model}' needs the sentence-transformers package, which is not installed"
            ) from exc
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            self._model = SentenceTransformer(model, local_files_only=True)
        except Exception as exc:  # the library raises several types for a model that is not local
            raise ValueError(
                f"sentence-transformers model {model!r} is not available locally: {exc}"
            ) from exc
        self.model = model
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.embed_many(list(input)))

    def embed_many(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    @staticmethod
    def name() -> str:
        return "kernelwright-sentence-transformer"

    def get_config(self) -> dict[str, Any]:
        return {"model": self.model}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LocalSentenceTransformer:
        return LocalSentenceTransformer(str(config["model"]))

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def describe(self) -> str:
        return f"st:{self.model}"


Embedder = HashingEmbedding | LocalSentenceTransformer


def make_embedder(spec: str | None = None) -> Embedder:
    """The embedding named by `spec` (else env KERNELWRIGHT_EMBEDDING, else hashing-256).

    Specs: "hashing" or "hashing-<dim>"; "st:<model name or path>" for a local sentence-transformers model.
    """
    spec = (spec or os.environ.get(ENV_EMBEDDING) or "hashing").strip()
    if spec == "hashing":
        return HashingEmbedding(DEFAULT_DIM)
    m = re.fullmatch(r"hashing-(\d+)", spec)
    if m:
        return HashingEmbedding(int(m.group(1)))
    if spec.startswith("st:"):
        return LocalSentenceTransformer(spec[3:])
    raise ValueError(f"unknown embedding {spec!r}; use 'hashing', 'hashing-<dim>' or 'st:<local model>'")
