"""Request scope of PII protection: the per-call disclosure log, and the pool's protection.

Both the request's vault and the log travel with each call (``Call.context.vault`` and
``.calls``, :class:`podium.workers.base.CallContext`):

- the orchestrator gives each request a :class:`~podium.pii.vault.Vault`; a nested request (a
  conductor worker's) shares the enclosing request's, so a person keeps one placeholder across
  the whole request tree. The vault is memory only and goes when the request ends; it is never
  written anywhere.
- a :class:`CallLog` collects what the worker calls of one step (or one conductor attempt)
  disclosed to third parties, and the exact messages they were sent, for the trace.

:class:`PIIProtection` is the pool's ``[pii]`` configuration with its analyzer, built on first
use and shared by every worker of the pool.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from podium.errors import ConfigError
from podium.extras import install_command
from podium.pii.vault import ENTITY_TYPES
from podium.records import Disclosure
from podium.workers.base import Message

if TYPE_CHECKING:
    from podium.pii.mask import Pseudonymizer

__all__ = ["CallLog", "PIIProtection"]


@dataclass
class CallLog:
    """What one step's (or conductor attempt's) worker calls sent to third parties.

    Attributes:
        disclosures: per recipient worker, its latest call's disclosure (a retry re-sends the
            same payload; a failover adds the equivalent worker as a second recipient).
        sent: the exact messages of the latest call that went out pseudonymized, else None.
    """

    disclosures: dict[str, Disclosure] = field(default_factory=dict)
    sent: tuple[Message, ...] | None = None

    def add(self, disclosure: Disclosure, sent: Sequence[Message] | None = None) -> None:
        self.disclosures[disclosure.recipient] = disclosure
        if sent is not None:
            self.sent = tuple(sent)

    def drop(self, recipient: str) -> None:
        """Forget a recipient's call (a request cache answered it: nothing left the machine)."""
        self.disclosures.pop(recipient, None)


class PIIProtection:
    """The pool's ``[pii]`` settings and the shared analyzer.

    Args:
        entities: entity types to mask (default: all of ``ENTITY_TYPES``).
        languages: spaCy language codes each text is analysed in.
        score_threshold: minimum detection score, in [0, 1].
        record_values: store placeholder → value in the trace's disclosures (off by default:
            the trace records kinds and counts only).

    Raises ConfigError when Presidio is not installed (``pip install 'podium[pii]'``) or an
    entity type is unknown.
    """

    def __init__(
        self,
        entities: Sequence[str] = ENTITY_TYPES,
        languages: Sequence[str] = ("da", "en"),
        score_threshold: float = 0.5,
        record_values: bool = False,
    ) -> None:
        missing = [m for m in ("presidio_analyzer", "spacy") if not importlib.util.find_spec(m)]
        if missing:
            raise ConfigError(
                f"PII protection is on but {', '.join(missing)} is not installed: {install_command('pii')} "
                "(or set [pii] enabled = false in the pool file)"
            )
        unknown = sorted(set(entities) - set(ENTITY_TYPES))
        if unknown:
            raise ConfigError(f"unknown PII entity type(s) {', '.join(unknown)}; known: {', '.join(ENTITY_TYPES)}")
        self.entities = tuple(entities)
        self.languages = tuple(languages)
        self.score_threshold = score_threshold
        self.record_values = record_values
        self._pseudonymizer: Pseudonymizer | None = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Import Presidio and build the analyzer now (about 2 s on 2 CPU cores) rather than in
        the first request that sends data to a third party, where it would count against that
        request's deadline."""
        self.pseudonymizer().detector.warm_up()

    def pseudonymizer(self) -> Pseudonymizer:
        """The shared pseudonymizer (imports Presidio and builds the analyzer on first use)."""
        with self._lock:
            if self._pseudonymizer is None:
                from podium.pii.detect import Detector
                from podium.pii.mask import Pseudonymizer

                detector = Detector(self.entities, self.languages, self.score_threshold)
                self._pseudonymizer = Pseudonymizer(detector)
            return self._pseudonymizer
