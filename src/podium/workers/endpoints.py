"""Where the remote backends send their calls: each provider's API root, and the one rule for a
worker's endpoint (its ``base_url``, else its backend's default).

The backends, the data-flow register (:mod:`podium.builder`'s data policies) and the trace spans'
``server.address`` all read it from here. No provider SDK is imported, so the register works
without one installed.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ENDPOINTS", "endpoint"]

DEFAULT_ENDPOINTS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
"""The API root each remote backend calls when the pool file gives no ``base_url``."""


def endpoint(backend: str, base_url: str | None) -> str | None:
    """The API root a worker of ``backend`` calls: ``base_url`` without a trailing slash, else the
    backend's entry in :data:`DEFAULT_ENDPOINTS`; None for a backend that calls nothing remote
    (``llama_cpp``, the tools) and has no ``base_url``."""
    return (base_url or DEFAULT_ENDPOINTS.get(backend, "")).rstrip("/") or None
