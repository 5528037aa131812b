"""What ``podium drift`` compares and when it alerts: the thresholds (:data:`DEFAULT_THRESHOLDS`,
``--threshold NAME=VALUE``), the comparison's settings (:class:`DriftOptions`), the two windows
(:func:`windows_for`) and the exit status of the alerts (:func:`exit_code`). The method:
:mod:`podium.traffic.drift`, which re-exports every name here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from podium.errors import ConfigError

__all__ = [
    "DEFAULT_THRESHOLDS",
    "EXIT_INPUT",
    "EXIT_OUTCOME",
    "INPUT_METRICS",
    "DriftOptions",
    "exit_code",
    "parse_thresholds",
    "term_mask",
    "windows_for",
]

DEFAULT_THRESHOLDS: dict[str, float | None] = {
    "p": 0.01,
    "mmd": 0.005,
    "mean_cosine": None,
    "unseen_terms": 0.06,
    "language": 0.15,
    "format": 0.15,
    "new_slice": 1.0,
    "quality_drop": 0.05,
    "agreement_drop": 0.1,
    "cost_rise": 0.25,
    "p95_rise": 0.5,
    "p95_min_s": 1.0,
    "fallback_rise": 0.05,
    "parse_failure_rise": 0.05,
    "error_rise": 0.05,
}
"""When a slice raises an alert (None: never):

* ``p``: the significance of the two permutation tests (embedding MMD², unseen terms), their
  p-values Bonferroni-adjusted over the slices; neither alerts unless its adjusted p is below;
* ``mmd``: MMD² at least this (with ``p``: a tiny but significant difference in a large window
  is no alert);
* ``mean_cosine``: the mean vectors' cosine distance is at least this (off by default: its
  scale depends on the encoder);
* ``unseen_terms``: the *excess* unseen-term rate, observed minus its mean under permutation,
  at least this (with ``p``);
* ``language``: the language mix's total variation distance (0–1);
* ``format``: the largest absolute change of a format's share (0–1);
* ``new_slice``: 1 = alert for a tag that is new in the recent window (see the module
  docstring), 0 = do not;
* ``quality_drop``: mean score lower by this much (absolute);
* ``agreement_drop``: shadow traffic: podium's mean agreement with the upstream's answers lower
  by this much (absolute; needs ``min_labels`` compared rows in both windows);
* ``cost_rise``, ``p95_rise``: mean cost per request, p95 wall time higher by this share
  (0.25 = +25 %);
* ``p95_min_s``: and p95 wall time higher by at least this many seconds (a p95 of 3 ms
  becoming 5 ms on a busy machine is +67 % and no news; requests of seconds are what it is for);
* ``fallback_rise``, ``parse_failure_rise``, ``error_rise``: the rate higher by this much
  (absolute)."""

INPUT_METRICS = frozenset({"p", "mmd", "mean_cosine", "unseen_terms", "language", "format", "new_slice"})
"""Thresholds on what is asked; the others are on how podium does."""

EXIT_INPUT = 3
"""Exit status when only input thresholds were crossed: the traffic changed (time to export,
label and retrain)."""
EXIT_OUTCOME = 4
"""Exit status when an outcome threshold was crossed (with or without input shift): podium does
worse on the recent traffic (look now)."""


def parse_thresholds(pairs: Sequence[str]) -> dict[str, float | None]:
    """:data:`DEFAULT_THRESHOLDS` with ``NAME=VALUE`` (or ``NAME=off``) pairs applied.

    Raises ConfigError for an unknown name or a value that is not a non-negative number."""
    thresholds = dict(DEFAULT_THRESHOLDS)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in thresholds:
            raise ConfigError(
                f"--threshold {pair!r}: write NAME=VALUE or NAME=off with NAME one of {', '.join(DEFAULT_THRESHOLDS)}"
            )
        if value.strip().lower() in ("off", "none"):
            thresholds[name] = None
            continue
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise ConfigError(f"--threshold {pair!r}: the value must be a non-negative number or off")
        thresholds[name] = number
    return thresholds


@dataclass(frozen=True)
class DriftOptions:
    """How :func:`drift_report` compares the windows.

    Attributes:
        thresholds: see :data:`DEFAULT_THRESHOLDS`.
        min_requests: requests a slice needs in each window before it can raise an alert.
        min_labels: labelled requests a slice needs in each window for a quality alert.
        max_sample: questions per window the permutation tests use at most (a seeded subsample).
        permutations: permutations of the MMD test.
        seed: seed of the subsample and the permutations.
        slices: the tags to report (besides ``all``); empty = every tag seen in either window.
        new_terms: how many new terms to list per slice.
        mask: pseudonymizes a question (:func:`term_mask`); a new term is listed only where the
            recent questions that use it still show it once masked, so a report never names a
            person or an address the detector finds. None lists terms as they are (``--allow-pii``).
    """

    thresholds: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    min_requests: int = 10
    min_labels: int = 5
    max_sample: int = 300
    permutations: int = 500
    seed: int = 0
    slices: tuple[str, ...] = ()
    new_terms: int = 8
    mask: Callable[[str], str] | None = None


def term_mask(allow_pii: bool, warn: Callable[[str], None]) -> Callable[[str], str] | None:
    """:attr:`DriftOptions.mask` for a report: None with ``allow_pii``; else one question masked
    by :func:`podium.traffic.options.pseudonymizer` (loaded on first use). Without the pii extra
    no new term is listed, and ``warn`` says so and how to list them."""
    if allow_pii:
        return None
    from podium.traffic.options import pseudonymizer

    try:
        masked = pseudonymizer()
    except ConfigError as exc:
        warn(f"new terms are not listed, since they may name people: {exc}")
        return lambda _text: ""
    return lambda text: masked([text])[0][0]


def exit_code(alerts: Sequence[Mapping[str, Any]]) -> int:
    """0 without alerts, :data:`EXIT_OUTCOME` with any outcome alert, else :data:`EXIT_INPUT`."""
    if any(a["kind"] == "outcome" for a in alerts):
        return EXIT_OUTCOME
    return EXIT_INPUT if alerts else 0


def windows_for(
    *,
    since: str | None,
    until: str | None,
    reference_since: str | None,
    reference_until: str | None,
    days: float,
    now: datetime | None = None,
) -> dict[str, tuple[str, str]]:
    """The two windows (store-form UTC strings): recent = [until − days, until), reference =
    the ``days`` before it, each bound overridable. Raises ConfigError when a window is empty
    or inverted, or the windows overlap."""
    from podium.trace.query import parse_utc

    if not days > 0:
        raise ConfigError(f"--days must be positive, got {days}")

    def moment(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    def form(moment_: datetime) -> str:
        return moment_.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    span = timedelta(days=days)
    end = moment(parse_utc(until, flag="--until", end_of_day=True)) if until else (now or datetime.now(UTC))
    start = moment(parse_utc(since, flag="--since")) if since else end - span
    ref_end = (
        moment(parse_utc(reference_until, flag="--reference-until", end_of_day=True)) if reference_until else start
    )
    ref_start = moment(parse_utc(reference_since, flag="--reference-since")) if reference_since else ref_end - span
    if start >= end:
        given = " ".join(f"{flag} {value}" for flag, value in (("--since", since), ("--until", until)) if value)
        raise ConfigError(
            f"the recent window {form(start)} → {form(end)} is empty ({given or f'--days {days:g}'}; a date alone "
            "as --until includes that day); --since must be before --until"
        )
    if ref_start >= ref_end:
        end_of = "--reference-until" if reference_until else "the recent window's start (no --reference-until given)"
        raise ConfigError(
            f"the reference window {form(ref_start)} → {form(ref_end)} is empty; "
            f"--reference-since must be before {end_of}"
        )
    if ref_start < end and start < ref_end:
        raise ConfigError(
            f"the windows overlap (reference {form(ref_start)} → {form(ref_end)}, recent {form(start)} → {form(end)}); "
            f"a request in both would be compared with itself: the reference must end by {form(start)}, the recent "
            "window's start (--reference-until, and --reference-since before it), or --since move after the reference"
        )
    return {"reference": (form(ref_start), form(ref_end)), "recent": (form(start), form(end))}
