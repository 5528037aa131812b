"""The server's configuration file (TOML), reloaded while serving.

Example (every field optional; ``docs/serve.md`` has them all)::

    pool = "local"             # pool file or preset the server runs
    serving = "conductor"      # "fallback" = kill switch: every request runs the fallback pipeline
    default_model = "podium"

    [models.podium]            # each model is a conductor preset clients pick with "model"
    conductor = "pool"         # the pool file's conductor; or light:NAME, single:WORKER, fallback, ...
    rounds = 0

    [models.podium-fast]
    conductor = "pool"
    max_steps = 2
    rounds = 0

Editing and saving the file (or ``kill -HUP``) reloads it without a restart; a file that does
not validate is refused and the server keeps serving the previous configuration (``/healthz``
shows the error).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from podium.errors import ConfigError

__all__ = ["DEFAULT_MODELS", "ModelPreset", "ServeConfig", "load_serve_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelPreset(_Strict):
    """One model the server offers: a conductor and its settings.

    Attributes:
        conductor: ``pool`` (the pool file's LM conductor), ``fallback`` (the fallback
            pipeline only), or a name :func:`podium.named_conductors.named_conductor` knows:
            ``light:NAME`` (the promoted version of a trained conductor in the registry, see
            ``podium conductor list``; a rollback takes effect at once), ``light:NAME@vN``,
            ``lm:NAME[@vN]`` (a GRPO-trained LM conductor, in llama.cpp with its LoRA adapter),
            ``single:WORKER``, ``pipeline``, ``moa``, ...
        description: shown by ``GET /v1/models``.
        max_steps, rounds: workflow step limit and review rounds (default: the pool file's).
        deadline_s, cost_cap_usd: per-request limits, seconds and USD (default: the pool's);
            a request may lower them, never raise them.
        workers: the pool workers this model may use (default: all).
    """

    conductor: str = "pool"
    description: str = ""
    max_steps: int | None = Field(default=None, ge=1, le=10)
    rounds: int | None = Field(default=None, ge=0, le=5)
    deadline_s: float | None = Field(default=None, gt=0)
    cost_cap_usd: float | None = Field(default=None, gt=0)
    workers: tuple[str, ...] | None = None

    @field_validator("deadline_s", "cost_cap_usd")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


DEFAULT_MODELS: dict[str, ModelPreset] = {
    "podium": ModelPreset(description="the pool's conductor with the pool file's settings"),
    "podium-fast": ModelPreset(
        description="the pool's conductor, at most 2 steps, no review rounds", max_steps=2, rounds=0
    ),
}
"""The models offered when the configuration names none."""


class ServeConfig(_Strict):
    """The whole file.

    Attributes:
        pool: pool file or preset name (default: the embedded local pool).
        serving: ``conductor`` (normal) or ``fallback`` (kill switch: every model answers with
            the pool's fallback pipeline, no conductor call).
        default_model: used when a request's ``model`` is empty.
        models: the presets, by the name clients send as ``model``.
        max_in_flight: requests answered at once; more wait for a slot (first come, first
            served), up to ``max_queued`` of them for at most ``queue_timeout_s`` each, then get
            HTTP 503 with Retry-After — traced (status error, ``ServerBusy``) and counted.
        max_queued: requests that may wait for a slot at once; beyond that, 503 at once.
        queue_timeout_s: seconds a request may wait for a slot (0: no waiting, 503 at once).
        graceful_shutdown_s: on SIGTERM/SIGINT, seconds in-flight requests may still take
            before they are cancelled (their traces are written either way).
        max_body_bytes: larger request bodies are refused with HTTP 413 before they are read.
    """

    pool: str | None = None
    serving: Literal["conductor", "fallback"] = "conductor"
    default_model: str = "podium"
    models: dict[str, ModelPreset] = Field(default_factory=lambda: dict(DEFAULT_MODELS))
    max_in_flight: int = Field(default=256, ge=1)
    max_queued: int = Field(default=1024, ge=0)
    queue_timeout_s: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    graceful_shutdown_s: float = Field(default=120.0, gt=0)
    max_body_bytes: int = Field(default=4 << 20, ge=1024, description="larger bodies get 413")

    @field_validator("models")
    @classmethod
    def _some(cls, value: dict[str, ModelPreset]) -> dict[str, ModelPreset]:
        if not value:
            raise ValueError("name at least one model, or leave [models] out for the defaults")
        return value


def load_serve_config(path: Path | None) -> ServeConfig:
    """The configuration in ``path`` (None: the defaults).

    Raises ConfigError naming the file, the field and the problem.
    """
    if path is None:
        return ServeConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no server configuration at {path}; create it or leave --config out") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read server configuration {path}: {exc}") from None
    try:
        config = ServeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise ConfigError(f"{path}: {where}: {first['msg']}") from None
    if config.default_model not in config.models:
        raise ConfigError(
            f"{path}: default_model {config.default_model!r} is not among the models ({', '.join(config.models)})"
        )
    return config
