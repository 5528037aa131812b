"""The workers a pool file describes: each entry's decoding settings, system prompt and backend.

:func:`build_pool_workers` gives the raw workers, in pool order, with no model loaded and no
connection opened; :func:`podium.builder.build_orchestrator` puts them under their wrappers.
"""

from __future__ import annotations

from typing import Any

from podium.errors import ConfigError
from podium.messages import DEFAULT_SYSTEM_PROMPT
from podium.pool import PoolConfig, PriceConfig, WorkerConfig
from podium.workers.base import Price, Worker, WorkerSettings

__all__ = ["build_pool_workers", "build_worker", "judge_index", "system_prompt", "worker_settings"]

_GRADERS = ("llama_cpp", "openai", "anthropic", "gemini")
"""Backends whose workers can be judges: models, which write their grade (``Score: N``)."""


def worker_settings(config: WorkerConfig) -> WorkerSettings:
    """The decoding settings a (merged) pool-file entry gives its worker."""
    return WorkerSettings(
        max_tokens=config.max_tokens or WorkerSettings.max_tokens,
        temperature=WorkerSettings.temperature if config.temperature is None else config.temperature,
        top_p=config.top_p or WorkerSettings.top_p,
        seed=config.seed or 0,
        reasoning_effort=config.reasoning_effort,
    )


def system_prompt(config: WorkerConfig) -> str | None:
    """The system message a model worker sends: its ``system_prompt``, podium's
    :data:`~podium.messages.DEFAULT_SYSTEM_PROMPT` when unset, none when set to ``""``."""
    if config.system_prompt is None:
        return DEFAULT_SYSTEM_PROMPT
    return config.system_prompt or None


def build_worker(config: WorkerConfig) -> Worker:
    """Construct the worker a (merged) pool-file entry describes. Loads no model yet."""
    settings = worker_settings(config)
    p = config.price or PriceConfig()
    price = Price(p.input, p.output, p.cached_input)
    if config.backend == "llama_cpp":
        from podium.workers.llama_cpp import LlamaCppWorker

        return LlamaCppWorker(
            config.name,
            config.model,
            settings=settings,
            price=price,
            n_ctx=config.n_ctx or 4096,
            description=config.description,
            system_prompt=system_prompt(config),
        )
    remote: dict[str, Any] = {  # every HTTP backend's fields (podium.workers._remote.RemoteWorker)
        "settings": settings,
        "price": price,
        "api_key_env": config.api_key_env,
        "timeout_s": config.timeout_s or 600.0,
        "description": config.description,
        "system_prompt": system_prompt(config),
        "extra_body": config.extra_body,
    }
    if config.backend == "openai":
        from podium.workers.openai_compat import OpenAICompatWorker

        return OpenAICompatWorker(config.name, config.model, base_url=config.base_url, stream=config.stream, **remote)
    if config.backend in ("anthropic", "gemini"):
        from podium.workers.native import AnthropicWorker, GeminiWorker

        cls = AnthropicWorker if config.backend == "anthropic" else GeminiWorker
        return cls(config.name, config.model, base_url=config.base_url, **remote)
    if config.backend == "python":
        from podium.workers.python_tool import PythonToolWorker

        return PythonToolWorker(
            config.name,
            description=config.description,
            timeout_s=config.timeout_s or 10.0,
            memory_mb=config.memory_mb,
            output_chars=config.output_chars,
            price=price,
        )
    if config.backend == "vote":
        from podium.workers.vote_tool import VoteToolWorker

        return VoteToolWorker(config.name, description=config.description)
    if config.backend == "conductor":
        from podium.workers.conductor_worker import ConductorWorker

        return ConductorWorker(config.name, description=config.description, max_depth=config.max_depth)
    raise AssertionError(f"unhandled backend {config.backend!r}")  # pool validation forbids this


def build_pool_workers(pool: PoolConfig) -> list[Worker]:
    """All workers of a pool, in pool order (index = ``Model i``)."""
    return [build_worker(pool.merged(w)) for w in pool.workers]


def judge_index(config: PoolConfig, name: str, flag: str = "--judge") -> int:
    """The pool index of worker ``name`` as a judge: a model worker (llama.cpp or a provider's
    API), since a judge writes its grade. Raises ConfigError naming ``flag`` and the pool's model
    workers when ``name`` is not a worker, or is a tool or a conductor."""
    names = [w.name for w in config.workers]
    models = [w.name for w in config.workers if w.backend in _GRADERS]
    if name not in names:
        raise ConfigError(f"{flag} {name!r} is not a worker of pool {config.name!r} ({', '.join(names)})")
    if name not in models:
        raise ConfigError(
            f"{flag} {name!r} is a {config.workers[names.index(name)].backend} worker, which cannot write a grade; "
            f"a judge is a model worker of pool {config.name!r}: {', '.join(models) or 'none'}"
        )
    return names.index(name)
