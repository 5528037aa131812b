"""The data-flow register: every third party that received data, and which data, from traces.

Derived only from stored traces: each step and conductor attempt records, per call to a worker
marked ``external``, the recipient as it was at call time (worker, provider, endpoint, region)
and the PII kinds pseudonymized or sent in clear (:class:`~podium.records.Disclosure`); the
step's access list says which other data went with it (earlier steps' outputs, the previous
round). ``podium dataflow`` prints it as a table, Markdown (``--md``) or JSON (``--json``).

Data categories:

=================================  ==============================================================
``question``                       the user's question (every worker and conductor call has it)
``subtask``                        the conductor's instruction for the step
``earlier step outputs``           outputs of earlier steps its access list granted
``previous round outputs``         outputs of the previous recursion round (access ``"all"``)
``system prompt``                  the worker's system message from the pool file
``worker descriptions``            the pool's capability notes (conductor calls)
``previous workflow and answer``   a recursion round's review (conductor calls)
=================================  ==============================================================
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from podium.errors import ConfigError
from podium.records import utc_now
from podium.trace.backend import TraceBackend
from podium.trace.rows import DisclosureRow

__all__ = ["Recipient", "Register", "build_register"]


@dataclass(frozen=True)
class Recipient:
    """One third-party recipient in the register.

    Attributes:
        recipient: the worker's name in the pool file; provider, endpoint, region: as recorded
            at call time (None when unknown / not configured).
        categories: data categories it received (see the module docstring), sorted.
        pii_pseudonymized: PII kind → placeholders sent (values never left podium).
        pii_in_clear: PII kind → values sent in clear (workers with ``allow_pii = true``).
        requests: distinct requests that sent it data; calls: steps/attempts that sent data.
        blocked: calls podium refused to send (fail closed); unscanned: calls sent without
            PII detection (protection off).
        first, last: first and last call, UTC ISO 8601.
    """

    recipient: str
    provider: str | None
    endpoint: str | None
    region: str | None
    categories: tuple[str, ...]
    pii_pseudonymized: dict[str, int]
    pii_in_clear: dict[str, int]
    requests: int
    calls: int
    blocked: int
    unscanned: int
    first: str
    last: str


@dataclass(frozen=True)
class Register:
    """The register for requests started in ``[since, until)`` (UTC ISO 8601)."""

    since: str
    until: str
    generated_at: str
    recipients: tuple[Recipient, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_markdown(self) -> str:
        """The register as a Markdown document (one table row per recipient)."""
        lines = [
            "# Data-flow register",
            "",
            f"Requests started from {self.since} until {self.until} (UTC); generated {self.generated_at} by "
            "`podium dataflow` from stored traces.",
            "",
        ]
        if not self.recipients:
            return "\n".join([*lines, "No data was sent to any third party in this period.", ""])
        lines += [
            "| recipient | provider | endpoint | region | data categories | PII pseudonymized | PII in clear "
            "| requests | calls | blocked | first | last |",
            "|---|---|---|---|---|---|---|---:|---:|---:|---|---|",
        ]
        for r in self.recipients:
            lines.append(
                "| "
                + " | ".join(
                    _md(x)
                    for x in (
                        r.recipient,
                        r.provider or "—",
                        r.endpoint or "—",
                        r.region or "not stated",
                        ", ".join(r.categories) or "—",
                        _kinds(r.pii_pseudonymized) + (f" ({r.unscanned} calls not scanned)" if r.unscanned else ""),
                        _kinds(r.pii_in_clear),
                        str(r.requests),
                        str(r.calls),
                        str(r.blocked),
                        r.first,
                        r.last,
                    )
                )
                + " |"
            )
        lines += [
            "",
            "PII columns count placeholders (pseudonymized) or values (in clear) per kind, never the values "
            "themselves. Blocked calls were refused by PII protection and sent nothing.",
            "",
        ]
        return "\n".join(lines)


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items())) or "none"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _categories(row: DisclosureRow) -> set[str]:
    found = {"question"}
    if row.source == "conductor":
        found.add("worker descriptions")
        if row.round > 0:
            found.add("previous workflow and answer")
    else:
        found.add("subtask")
        if row.visible:
            found.add("earlier step outputs")
        if row.visible_previous:
            found.add("previous round outputs")
    if row.system_prompt:
        found.add("system prompt")
    return found


@dataclass
class _Acc:
    provider: str | None
    endpoint: str | None
    region: str | None
    categories: set[str] = field(default_factory=set)
    masked: Counter[str] = field(default_factory=Counter)
    clear: Counter[str] = field(default_factory=Counter)
    requests: set[str] = field(default_factory=set)
    calls: int = 0
    blocked: int = 0
    unscanned: int = 0
    first: str = ""
    last: str = ""


def build_register(store: TraceBackend, since: str, until: str) -> Register:
    """The register of requests started in ``[since, until)`` (UTC ISO 8601, e.g. from
    :func:`podium.trace.query.parse_utc`). Recipients are keyed by worker, provider, endpoint and region, so a
    worker whose endpoint changed appears once per endpoint; sorted by recipient name."""
    if since >= until:
        raise ConfigError(f"--since ({since}) must be before --until ({until})")
    acc: dict[tuple[str, str | None, str | None, str | None], _Acc] = {}
    for row in store.disclosures(since, until):
        for d in row.disclosures:
            key = (d.recipient, d.provider, d.endpoint, d.region)
            a = acc.setdefault(key, _Acc(d.provider, d.endpoint, d.region))
            a.first = a.first or row.at
            a.last = max(a.last, row.at)
            if d.blocked is not None:
                a.blocked += 1
                continue
            a.calls += 1
            a.requests.add(row.request_id)
            a.categories |= _categories(row)
            a.masked.update(d.masked)
            a.clear.update(d.clear)
            a.unscanned += not d.scanned
    recipients = tuple(
        Recipient(
            recipient=name,
            provider=a.provider,
            endpoint=a.endpoint,
            region=a.region,
            categories=tuple(sorted(a.categories)),
            pii_pseudonymized=dict(sorted(a.masked.items())),
            pii_in_clear=dict(sorted(a.clear.items())),
            requests=len(a.requests),
            calls=a.calls,
            blocked=a.blocked,
            unscanned=a.unscanned,
            first=a.first,
            last=a.last,
        )
        for (name, *_), a in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
    )
    return Register(since, until, utc_now(), recipients)
