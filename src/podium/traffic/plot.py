"""``podium drift --plot``: the drift metrics over time (PNG, matplotlib's Agg renderer).

Six panels share one time axis of buckets (minutes, hours, days or weeks) covering both windows: requests
per bucket, the embedding's mean-vector cosine distance from the reference window, the rate of
terms unseen in the reference window, the fallback rate, p95 wall time and mean cost per
request. One line per slice (``all`` and the busiest tags, six at most); the reference window is
shaded grey, the recent one orange. Each bucket is compared with the reference window — a bucket
inside it with the rest of it (leave one bucket out), so the grey band shows the level the
metric holds when nothing changed, and a shift shows as the line leaving it. Small buckets are
noisy: the cosine distance of a mean of few vectors, and the unseen-term share of few questions,
run high.

matplotlib is imported when a plot is drawn (the ``eval`` extra), never through ``pyplot``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from podium.errors import ConfigError
from podium.eval.metrics import percentile
from podium.extras import install_command
from podium.traffic.features import terms
from podium.traffic.source import TrafficItem

__all__ = ["BUCKETS", "drift_plot"]

BUCKETS = ("minute", "hour", "day", "week")
_MAX_LINES = 6


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _bucket_start(moment: datetime, bucket: str) -> datetime:
    if bucket == "minute":
        return moment.replace(second=0, microsecond=0)
    if bucket == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday()) if bucket == "week" else day


def _series(
    items: Sequence[TrafficItem],
    reference: Sequence[TrafficItem],
    starts: Sequence[datetime],
    bucket: str,
    vectors: Mapping[str, npt.NDArray[np.float32]],
) -> dict[str, list[float]]:
    by_bucket: dict[datetime, list[TrafficItem]] = {s: [] for s in starts}
    for item in items:
        by_bucket.setdefault(_bucket_start(_moment(item.at), bucket), []).append(item)
    ref_terms = {i.origin: set(terms(i.question)) for i in reference}
    out: dict[str, list[float]] = {k: [] for k in ("requests", "cosine", "unseen", "fallback", "p95", "cost")}
    nan = float("nan")
    for start in starts:
        group = by_bucket.get(start, [])
        out["requests"].append(float(len(group)))
        if not group:
            for key in ("cosine", "unseen", "fallback", "p95", "cost"):
                out[key].append(nan)
            continue
        inside = {i.origin for i in group}
        others = [i for i in reference if i.origin not in inside]  # a reference bucket is compared with the rest
        vocabulary = {t for i in others for t in ref_terms[i.origin]}
        ref_mean = np.stack([vectors[i.question] for i in others]).mean(axis=0) if vectors and others else None
        if ref_mean is not None:
            mean = np.stack([vectors[i.question] for i in group]).mean(axis=0)
            denom = float(np.linalg.norm(mean) * np.linalg.norm(ref_mean))
            out["cosine"].append(1.0 - float(mean @ ref_mean) / denom if denom > 0 else nan)
        else:
            out["cosine"].append(nan)
        words = [t for i in group for t in terms(i.question)]
        out["unseen"].append(sum(t not in vocabulary for t in words) / len(words) if words else nan)
        out["fallback"].append(sum(i.fallback for i in group) / len(group))
        walls = [i.latency_s for i in group if i.latency_s is not None]
        out["p95"].append(percentile(walls, 95) if walls else nan)
        costs = [i.cost_usd for i in group if i.cost_usd is not None]
        out["cost"].append(sum(costs) / len(costs) if costs else nan)
    return out


def drift_plot(
    path: Path,
    reference: Sequence[TrafficItem],
    recent: Sequence[TrafficItem],
    *,
    windows: Mapping[str, Sequence[str]],
    vectors: Mapping[str, npt.NDArray[np.float32]],
    slices: Sequence[str] = (),
    bucket: str = "day",
) -> Path:
    """Draw the panels (module docstring) for ``all`` and ``slices`` (default: the busiest
    tags) and save a PNG at ``path`` (parent folders created). ``vectors`` maps each question
    to its embedding (empty: the cosine panel stays blank).

    Raises ConfigError for an unknown bucket, or matplotlib missing (``pip install
    'podium[eval]'``)."""
    if bucket not in BUCKETS:
        raise ConfigError(f"--bucket {bucket!r}: use one of {', '.join(BUCKETS)}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError(f"--plot needs matplotlib: {install_command('eval')}") from None
    everything = [*reference, *recent]
    if not slices:
        counts = Counter(t for i in everything for t in i.tags)
        slices = [t for t, _ in counts.most_common(_MAX_LINES - 1)]
    names = ["all", *slices][:_MAX_LINES]
    first = _bucket_start(_moment(windows["reference"][0]), bucket)
    last = _moment(windows["recent"][1])
    step = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1),
            "week": timedelta(weeks=1)}[bucket]  # fmt: skip
    starts: list[datetime] = []
    current = first
    while current < last and len(starts) < 10_000:
        starts.append(current)
        current += step
    fig = Figure(figsize=(12, 8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(3, 2, sharex=True).flatten()
    panels = [
        ("requests", "requests per bucket"),
        ("cosine", "embedding: cosine distance of the mean"),
        ("unseen", "share of terms unseen in reference"),
        ("fallback", "fallback rate"),
        ("p95", "p95 wall time (s)"),
        ("cost", "mean cost per request (USD)"),
    ]
    for name in names:
        ref = reference if name == "all" else [i for i in reference if name in i.tags]
        items = everything if name == "all" else [i for i in everything if name in i.tags]
        series = _series(items, ref, starts, bucket, vectors)
        for ax, (key, _) in zip(axes, panels, strict=True):
            ax.plot(starts, series[key], marker=".", linewidth=1.2, label=name)
    for ax, (_, title) in zip(axes, panels, strict=True):
        ax.set_title(title, fontsize=10)
        ax.axvspan(_moment(windows["reference"][0]), _moment(windows["reference"][1]), color="grey", alpha=0.15)
        ax.axvspan(_moment(windows["recent"][0]), _moment(windows["recent"][1]), color="orange", alpha=0.12)
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(
        f"podium drift: reference {windows['reference'][0][:16]} → {windows['reference'][1][:16]} (grey), "
        f"recent {windows['recent'][0][:16]} → {windows['recent'][1][:16]} (orange), per {bucket}",
        fontsize=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, format="png")
    return path
