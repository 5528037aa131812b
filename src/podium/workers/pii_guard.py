"""PII protection as a worker wrapping a worker: pseudonymize what goes out, restore what comes back.

:class:`PIIGuard` sits directly around each backend (inside the budget guard, retries and
failover of :func:`~podium.workers.stack.stack`), so every attempt, retry and failover
target is checked under its own worker's data policy:

- a local worker (``external = false``) is called as it is; nothing is recorded;
- an external worker with ``allow_pii = false`` (the default) gets every message pseudonymized
  with the running request's vault (``<PERSON_1>``, ``<DK_CPR_1>``, ...) and its reply restored;
  if detection raises, nothing is sent and the call fails with PIIProtectionError; a reply that
  names a placeholder the vault never issued fails the same way (fail closed);
- an external worker with ``allow_pii = true`` gets the messages in clear; the PII kinds it
  received are recorded.

Each external call leaves a :class:`~podium.records.Disclosure` in the step's call log before
it is sent (kinds and counts; values only with ``record_values``), which the executor writes to
the trace and ``podium dataflow`` reads back.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from podium.errors import PIIProtectionError
from podium.pii.protection import CallLog, PIIProtection
from podium.pii.vault import StreamRestorer, UnknownPlaceholder, Vault
from podium.records import Disclosure
from podium.streaming import TextSink
from podium.workers.base import Call, Completion, Message, Worker
from podium.workers.wrapper import WorkerWrapper

__all__ = ["DataPolicy", "PIIGuard"]


@dataclass(frozen=True)
class DataPolicy:
    """A worker's data policy and recipient metadata, from the pool file.

    Attributes:
        external: whether calls leave podium's trust boundary (a third-party provider).
        allow_pii: whether PII may be sent to it in clear (default False: pseudonymized).
        provider: who runs it, for the data-flow register (None: the endpoint's host).
        region: where it processes data (e.g. ``"EU"``), None if not stated.
        endpoint: the API root from the pool file (None: the backend's own ``base_url``).
    """

    external: bool
    allow_pii: bool = False
    provider: str | None = None
    region: str | None = None
    endpoint: str | None = None


class _RestoringSink:
    """Passes an external worker's streamed text on with its placeholders restored; text that
    may still be part of a placeholder is held back until it is complete. Stops passing text on
    at a placeholder the vault never issued (the reply then fails closed at the end) or when a
    retry writes a different text."""

    def __init__(self, outer: TextSink, vault: Vault) -> None:
        self.outer = outer
        self.restorer = StreamRestorer(vault)
        self.seen = ""
        self.restored = ""
        self.stopped = False

    def update(self, text: str) -> None:
        if self.stopped or not text.startswith(self.seen):
            self.stopped = True
            return
        delta, self.seen = text[len(self.seen) :], text
        try:
            self.restored += self.restorer.feed(delta)
        except UnknownPlaceholder:
            self.stopped = True
            return
        self.outer.update(self.restored)


class PIIGuard(WorkerWrapper):
    """Applies ``policy`` (and, when not None, ``protection``) to every call of ``inner``.

    Args:
        inner: the backend worker.
        policy: its data policy.
        protection: the pool's PII protection; None when ``[pii]`` is off (external calls are
            then recorded as unscanned disclosures and sent unchanged).
    """

    def __init__(self, inner: Worker, policy: DataPolicy, protection: PIIProtection | None) -> None:
        super().__init__(inner)
        self.policy = policy
        self.protection = protection
        self.endpoint: str | None = inner.info.endpoint or policy.endpoint
        self.provider = policy.provider or (urlparse(self.endpoint).hostname if self.endpoint else None)

    def _disclosure(self, **fields: Any) -> Disclosure:
        return Disclosure(
            recipient=self.info.name,
            provider=self.provider,
            endpoint=self.endpoint,
            region=self.policy.region,
            **fields,
        )

    async def complete(self, call: Call) -> Completion:
        if not self.policy.external:
            return await super().complete(call)
        log = call.context.calls
        messages = call.messages
        if self.protection is None or self.policy.allow_pii:
            disclosure = await self._clear_disclosure(messages, call.prefix or "")
            if log is not None:
                log.add(disclosure)
            return self._uncount_cached(await super().complete(call), log)
        vault = call.context.vault
        if vault is None:  # a call outside any request: a vault for this call only
            vault = Vault()
        prefix = call.prefix
        try:
            masked, masked_prefix, counts = await asyncio.to_thread(
                self._mask, self.protection, messages, prefix, vault
            )
        except Exception as exc:  # any failure of detection: send nothing
            if log is not None:
                log.add(self._disclosure(scanned=False, blocked=f"detection_failed: {type(exc).__name__}"))
            raise PIIProtectionError(
                f"PII detection failed ({type(exc).__name__}: {exc}); nothing was sent to {self.info.name!r}",
                worker=self.info.name,
                reason="detection_failed",
            ) from exc
        values: dict[str, str] = {}
        if self.protection.record_values:
            sent = "\n".join([m["content"] for m in masked] + [masked_prefix or ""])
            values = {e.token: e.value for e in vault if e.token in sent}
        if log is not None:
            log.add(self._disclosure(masked=dict(counts), scanned=True, values=values), masked)
        outer = call.context.stream  # the answering step of a streamed request: restore as it streams
        outgoing = call.with_messages(masked, masked_prefix).with_context(
            stream=_RestoringSink(outer, vault) if outer is not None else None
        )
        result = self._uncount_cached(await super().complete(outgoing), log)
        try:
            text = vault.restore(result.text)
        except UnknownPlaceholder as exc:
            raise PIIProtectionError(
                f"the reply of {self.info.name!r} refers to {exc.placeholder!r}, which this request never issued; "
                "the reply is not used",
                worker=self.info.name,
                reason="unknown_placeholder",
            ) from None
        return dataclasses.replace(result, text=text)

    @staticmethod
    def _mask(
        protection: PIIProtection, messages: Sequence[Message], prefix: str | None, vault: Vault
    ) -> tuple[list[Message], str | None, Counter[str]]:
        """Pseudonymized messages (and assistant prefix), and placeholders per kind."""
        pseudonymizer = protection.pseudonymizer()
        masked: list[Message] = []
        counts: Counter[str] = Counter()
        for m in messages:
            text, found = pseudonymizer.mask(m["content"], vault)
            masked.append({"role": m["role"], "content": text})
            counts += found
        if prefix:
            prefix, found = pseudonymizer.mask(prefix, vault)
            counts += found
        return masked, prefix, counts

    async def _clear_disclosure(self, messages: Sequence[Message], prefix: str) -> Disclosure:
        """The disclosure of a call sent in clear: PII kinds counted when protection is on."""
        if self.protection is None:
            return self._disclosure(scanned=False)
        protection = self.protection
        texts = [m["content"] for m in messages] + ([prefix] if prefix else [])

        def kinds() -> list[str]:
            detector = protection.pseudonymizer().detector
            return [d.kind for t in texts for d in detector.detect(t)]

        try:
            found = await asyncio.to_thread(kinds)
        except Exception:  # allowed in clear anyway: record that it was not scanned
            return self._disclosure(scanned=False)
        return self._disclosure(clear=dict(Counter(found)), scanned=True)

    def _uncount_cached(self, result: Completion, log: CallLog | None) -> Completion:
        """A request cache answered: nothing left the machine, so the call is not a disclosure."""
        if result.cached and log is not None:
            log.drop(self.info.name)
        return result
