"""A LoRA-tuned query adapter for the embedder.

The base embedder stays frozen. A linear map over query vectors, initialised to the identity, gets a
low-rank LoRA update (peft) trained on (query, relevant memory) pairs with an in-batch contrastive loss.
Only queries pass through it, so stored event vectors never need re-embedding and any vector store
works unchanged. The trained adapter is saved versioned under ``data_dir/adapters/<version>/`` (the peft
adapter plus the merged matrix for torch-free inference); publishing a version flips one Redis key, and
every process embedding queries picks it up on its next query, without a restart.

Training needs the ``[train]`` extra (peft; torch comes with the base install).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
from pydantic import BaseModel

from memory.embedding import Embedder
from memory.errors import ConfigurationError, InvalidInput


class TrainingPair(BaseModel):
    query: str
    positive: str


class TrainReport(BaseModel):
    version: str
    pairs: int
    epochs: int
    rank: int
    loss_first: float
    loss_last: float
    seconds: float
    path: str


def read_pairs(path: Path) -> list[TrainingPair]:
    """JSON lines of ``{"query": ..., "positive": ...}``; a bad line is an error naming the line."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            pairs.append(TrainingPair.model_validate_json(line))
        except ValueError as exc:
            raise InvalidInput(f"{path}:{number}: expected {{\"query\": ..., \"positive\": ...}}: {exc}") from exc
    return pairs


def train(embedder: Embedder, pairs: Sequence[TrainingPair], out_dir: Path, *, rank: int = 8,
          epochs: int = 60, lr: float = 2e-3, temperature: float = 0.05, seed: int = 0) -> TrainReport:
    if len(pairs) < 4:
        raise InvalidInput(f"need at least 4 training pairs, got {len(pairs)}")
    try:
        import torch
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise ConfigurationError(f"training needs the [train] extra: pip install 'mneme[train]' ({exc})") from exc

    started = time.perf_counter()
    torch.manual_seed(seed)
    queries = torch.from_numpy(embedder.embed([p.query for p in pairs]))
    positives = torch.from_numpy(embedder.embed([p.positive for p in pairs]))
    dim = queries.shape[1]

    class QueryHead(torch.nn.Module):  # type: ignore[misc]  # torch is Any to mypy (pyproject: follow_imports)
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(dim, dim, bias=False)
            with torch.no_grad():
                self.proj.weight.copy_(torch.eye(dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.normalize(self.proj(x), dim=-1)

    model = get_peft_model(QueryHead(), LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["proj"],
                                                   lora_dropout=0.0))
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
    labels = torch.arange(len(pairs))
    losses = []
    for _ in range(epochs):  # full batch: the pairs of one tenant fit easily
        logits = model(queries) @ positives.T / temperature
        loss = torch.nn.functional.cross_entropy(logits, labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())

    version = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{len(pairs)}p-r{rank}"
    target = out_dir / version
    target.mkdir(parents=True, exist_ok=False)
    model.save_pretrained(str(target))
    head = cast(QueryHead, model.merge_and_unload())  # peft gives back the base model, typed as any Module
    merged = head.proj.weight.detach().numpy().astype(np.float32)
    np.save(target / "merged.npy", merged)
    report = TrainReport(version=version, pairs=len(pairs), epochs=epochs, rank=rank, loss_first=losses[0],
                         loss_last=losses[-1], seconds=time.perf_counter() - started, path=str(target))
    (target / "meta.json").write_text(json.dumps({**report.model_dump(), "embedder": embedder.name, "dim": dim}))
    return report


class QueryAdapter:
    """The merged adapter matrix applied to query vectors."""

    def __init__(self, version: str, matrix: np.ndarray) -> None:
        self.version = version
        self._matrix = matrix

    @classmethod
    def load(cls, adapters_dir: Path, version: str, dim: int) -> QueryAdapter:
        path = adapters_dir / version / "merged.npy"
        if not path.is_file():
            raise ConfigurationError(f"adapter {version!r} not found at {path}")
        matrix = np.load(path)
        if matrix.shape != (dim, dim):
            raise ConfigurationError(f"adapter {version!r} is {matrix.shape}, the embedder has dim {dim}")
        return cls(version, matrix)

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        out = vectors @ self._matrix.T
        normalised: np.ndarray = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return normalised


def adapters_dir(data_dir: Path) -> Path:
    path = data_dir / "adapters"
    path.mkdir(parents=True, exist_ok=True)
    return path
