"""The common shape of workers that call a provider over the network."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from podium.budget import prompt_token_bound
from podium.errors import ConfigError
from podium.unicode import utf8_length
from podium.workers.base import Completion, Message, Price, Usage, WorkerInfo, WorkerSettings
from podium.workers.endpoints import endpoint

__all__ = ["RemoteWorker"]


class RemoteWorker:
    """Fields and helpers shared by the HTTP backends.

    Args:
        name: the worker's name in the pool.
        model: the model name the provider expects.
        settings: default decoding settings; price: USD per 1M tokens.
        api_key_env: environment variable holding the API key (None: no auth).
        base_url: the API root (default: the backend's, :func:`podium.workers.endpoints.endpoint`).
        timeout_s: transport timeout per call, seconds (the request deadline may cut it shorter).
        description, system_prompt: as for every worker.
        extra_body: provider-specific request fields merged into the request body.
    """

    backend = ""
    """The backend's name in pool files; set by each backend (part of the request-cache key)."""

    info: WorkerInfo

    def __init__(
        self,
        name: str,
        model: str,
        *,
        settings: WorkerSettings,
        price: Price,
        api_key_env: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        description: str = "",
        system_prompt: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.api_key_env = api_key_env
        self.base_url = endpoint(self.backend, base_url) or ""
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.info = WorkerInfo(
            name,
            description,
            price,
            settings,
            system_prompt,
            backend=self.backend,
            model=model,
            endpoint=self.base_url,
        )

    def api_key(self) -> str | None:
        """The key from ``api_key_env`` (None when the worker needs none).

        Raises ConfigError naming the variable when it is unset or empty.
        """
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(
                f"worker {self.info.name!r} needs an API key in the environment variable {self.api_key_env}"
            )
        return key

    def completion(self, text: str, usage: Usage, finish: str, started: float) -> Completion:
        """A Completion priced with this worker's table; ``started`` is a perf_counter time. An
        estimated ``usage`` (``Usage.estimated``) is marked unreported."""
        latency = time.perf_counter() - started
        cost = self.info.price.cost(usage)
        return Completion(text, usage, cost, latency, finish, usage_reported=not usage.estimated)

    def _answered(
        self, text: str, usage: Usage | None, finish: str, started: float, messages: Sequence[Message]
    ) -> Completion:
        """:meth:`completion` for what the provider reported; with no usage it can believe
        (None), the call is counted from the bytes sent and received (an upper bound: a token is
        at least one byte) and marked unreported, so the budget keeps its worst case."""
        if usage is None:
            usage = Usage(prompt_token_bound(messages), utf8_length(text) + 1, estimated=True)
        return self.completion(text, usage, finish, started)
