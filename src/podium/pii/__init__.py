"""PII pseudonymization before third-party calls (see ``docs/pii.md``).

- :mod:`podium.pii.vault` — typed, numbered placeholders per request and their restoration
  (also in streamed text); no dependencies.
- :mod:`podium.pii.protection` — the request's vault and per-step call log (context variables) and
  :class:`~podium.pii.protection.PIIProtection`, the pool's ``[pii]`` settings.
- :mod:`podium.pii.detect`, :mod:`podium.pii.recognizers`, :mod:`podium.pii.mask` — offline
  detection with Presidio (extra ``pii``) and pseudonymization; :mod:`podium.pii.known` (the
  vault's values found again in one pass);
  :mod:`podium.pii.numbers` (checksums, number shapes, splitting glued digit runs) and
  :mod:`podium.pii.segment` (the segmented view that separates glued values).
- :mod:`podium.pii.samples` — synthetic values, glued texts and a placeholder-mangling worker
  for tests and benchmarks.
- :class:`podium.workers.pii_guard.PIIGuard` — the worker wrapper that applies it per call.

This package imports nothing heavy: Presidio and spaCy load on first detection.
"""

from podium.pii.vault import ENTITY_TYPES, StreamRestorer, UnknownPlaceholder, Vault

__all__ = ["ENTITY_TYPES", "StreamRestorer", "UnknownPlaceholder", "Vault"]
