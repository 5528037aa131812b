"""Drift monitoring: ``podium drift``, a recent window of traffic against a reference window.

Both windows are read from the traces (:func:`~podium.traffic.source.read_traces`) and compared
**per slice**: ``all`` requests, and each tag (a use case ``use-case:NAME``, a client's tags).

**Input shift** — has what is asked changed?

* *embedding distribution*: the questions' vectors (an :class:`~podium.embed.Encoder`; by default
  the model-free :class:`~podium.traffic.features.HashingEncoder`) compared by the cosine distance
  of the two windows' mean vectors, and by the unbiased squared **maximum mean discrepancy**
  (MMD², Gretton et al. 2012, JMLR 13) with a Gaussian kernel whose width is the median pairwise
  distance of the pooled sample. Its p-value comes from a permutation test (the window labels
  shuffled ``permutations`` times, seeded; p = (1 + #{MMD²_perm ≥ MMD²}) / (1 + permutations)),
  Bonferroni-adjusted over the slices tested. Each window is subsampled to ``max_sample``
  questions (seeded) to bound the kernel matrix (and the unseen-terms test below).
* *unseen terms*: the share of the recent window's word occurrences
  (:func:`~podium.traffic.features.terms`) that never occur in the reference window, and the
  new terms most recent requests use. The raw share depends on the traffic's vocabulary and on
  the windows' sizes (GSM8K against other GSM8K questions: 0.43 with 20 questions a window,
  0.19 with 300), so it is tested like the embedding: the same share computed with the window
  labels permuted (same sizes) gives what to expect when nothing changed; the alert needs a
  significant (adjusted p) **excess** over that expectation. Windows of the same traffic give an
  excess about 0 (docs/loop.md; docs/eval/drift-calibration/, by bench/drift_calibration.py).
* *language mix* and *format mix* (:func:`~podium.traffic.features.language`,
  :func:`~podium.traffic.features.formats`): the total variation distance of the language
  distributions, and the largest change in the share of questions with a format (tables, code,
  JSON, lists, long texts).
* *new slices*: a tag with at least ``min_requests`` recent requests and fewer in the reference
  window — a use case that was not there before.

**Outcome shift** — does podium do worse on it? Mean cost per request (USD), p95 wall time
(seconds), the rate of requests the fallback pipeline answered, the rate of requests with at
least one conductor output that did not parse or validate, the error rate, and — where labels
exist (a labelled regression set, :mod:`podium.traffic.review`, whose tasks' ``origin`` names
the traces) — quality: the mean verifier score of podium's stored answers against human,
client or judge references (candidate references are podium's own answers and are not used).

Each metric is compared with a threshold (:data:`DEFAULT_THRESHOLDS`); a slice needs at least
``min_requests`` requests in both windows (``min_labels`` labelled ones for quality) before it can
raise an alert. :func:`exit_code` maps the alerts to the command's exit status.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.metrics import percentile
from podium.traffic.features import FORMATS, formats, language, terms
from podium.traffic.source import TrafficItem

if TYPE_CHECKING:
    from podium.eval.tasks import Task

__all__ = [
    "DEFAULT_THRESHOLDS",
    "EXIT_INPUT",
    "EXIT_OUTCOME",
    "INPUT_METRICS",
    "DriftOptions",
    "drift_report",
    "exit_code",
    "label_scores",
    "mmd_test",
    "parse_thresholds",
    "reference_scores",
    "report_markdown",
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
    """

    thresholds: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    min_requests: int = 10
    min_labels: int = 5
    max_sample: int = 300
    permutations: int = 500
    seed: int = 0
    slices: tuple[str, ...] = ()
    new_terms: int = 8


# --------------------------------------------------------------------------------- statistics


def mmd_test(
    x: npt.NDArray[np.float32], y: npt.NDArray[np.float32], *, permutations: int, seed: int
) -> tuple[float, float]:
    """(unbiased MMD², permutation p-value) of samples ``x`` (m × d) and ``y`` (n × d), m, n ≥ 2,
    with a Gaussian kernel of median-heuristic width (module docstring)."""
    pooled = np.concatenate([x, y]).astype(np.float64)
    m, total = len(x), len(pooled)
    sq = np.sum(pooled**2, axis=1)
    dist2 = np.maximum(sq[:, None] + sq[None, :] - 2 * pooled @ pooled.T, 0.0)
    off = dist2[~np.eye(total, dtype=bool)]
    median = float(np.median(off[off > 0])) if np.any(off > 0) else 1.0
    kernel = np.exp(-dist2 / median)  # exp(-d² / (2σ²)) with σ² = median(d²) / 2
    np.fill_diagonal(kernel, 0.0)  # the unbiased estimator leaves out k(x_i, x_i)
    rng = np.random.default_rng(seed)
    labels = np.zeros((total, permutations + 1))
    labels[:m, 0] = 1.0
    for k in range(1, permutations + 1):
        labels[rng.permutation(total)[:m], k] = 1.0
    n = total - m
    kx = kernel @ labels  # column k: row sums of the kernel over that labelling's x side
    xx = np.sum(labels * kx, axis=0)
    xy = np.sum((1.0 - labels) * kx, axis=0)
    yy = kernel.sum() - xx - 2 * xy
    stats = xx / (m * (m - 1)) + yy / (n * (n - 1)) - 2 * xy / (m * n)
    observed = float(stats[0])
    p = (1 + int(np.sum(stats[1:] >= observed - 1e-12))) / (1 + permutations)
    return observed, p


def _cosine_distance(x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> float:
    a, b = x.mean(axis=0), y.mean(axis=0)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 1.0 - float(a @ b) / denom if denom > 0 else 0.0


def _shares(labels: Sequence[str]) -> dict[str, float]:
    counts = Counter(labels)
    return {k: round(v / len(labels), 4) for k, v in counts.most_common()} if labels else {}


def _tvd(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def _format_shares(items: Sequence[TrafficItem]) -> dict[str, float]:
    flags = [formats(i.question) for i in items]
    return {f: round(sum(f in s for s in flags) / len(items), 4) if items else 0.0 for f in FORMATS}


def _unseen_rate(words: Sequence[str], vocabulary: set[str]) -> float | None:
    return sum(1 for t in words if t not in vocabulary) / len(words) if words else None


def _unseen(
    reference: Sequence[TrafficItem], recent: Sequence[TrafficItem], opts: DriftOptions, enough: bool
) -> dict[str, Any]:
    """The unseen-term rate of ``recent`` against ``reference`` (module docstring): ``rate`` on
    the whole windows, the ``new_terms`` most recent requests use, and (with ``enough``
    requests) the permutation test on the subsampled windows: ``expected`` (the mean rate over
    permuted labellings), ``excess`` (observed − expected) and ``p_value``."""
    ref_terms = [terms(i.question) for i in reference]
    rec_terms = [terms(i.question) for i in recent]
    vocabulary = {t for words in ref_terms for t in words}
    rate = _unseen_rate([t for words in rec_terms for t in words], vocabulary)
    spread = Counter(t for words in rec_terms for t in set(words) if t not in vocabulary)
    new = [[t, n] for t, n in sorted(spread.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2][: opts.new_terms]
    out: dict[str, Any] = {"rate": _round(rate), "expected": None, "excess": None, "p_value": None, "p_adjusted": None}
    out["new_terms"] = new
    if not enough or rate is None:
        return out
    rng = np.random.default_rng(opts.seed + 1)
    x = [ref_terms[k] for k in _sample(len(ref_terms), opts.max_sample, rng)]
    y = [rec_terms[k] for k in _sample(len(rec_terms), opts.max_sample, rng)]
    pooled, m = [*x, *y], len(x)

    def rate_of(order: Sequence[int]) -> float:
        vocab = {t for k in order[:m] for t in pooled[k]}
        return _unseen_rate([t for k in order[m:] for t in pooled[k]], vocab) or 0.0

    observed = rate_of(range(len(pooled)))
    permuted = [rate_of(rng.permutation(len(pooled)).tolist()) for _ in range(opts.permutations)]
    expected = sum(permuted) / len(permuted)
    p = (1 + sum(1 for r in permuted if r >= observed - 1e-12)) / (1 + len(permuted))
    out.update(expected=_round(expected), excess=_round(observed - expected), p_value=_round(p, 5))
    return out


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _outcomes(items: Sequence[TrafficItem], scores: Mapping[str, float]) -> dict[str, Any]:
    costs = [i.cost_usd for i in items if i.cost_usd is not None]
    walls = [i.latency_s for i in items if i.latency_s is not None]
    labelled = [scores[i.origin] for i in items if i.origin in scores]
    n = len(items)
    return {
        "requests": n,
        "quality": round(sum(labelled) / len(labelled), 4) if labelled else None,
        "labelled": len(labelled),
        "cost_usd": sum(costs) / len(costs) if costs else None,
        "p95_s": round(percentile(walls, 95), 3) if walls else None,
        "fallback_rate": round(sum(i.fallback for i in items) / n, 4) if n else None,
        "parse_failure_rate": round(sum(i.parse_failures > 0 for i in items) / n, 4) if n else None,
        "error_rate": round(sum(i.status == "error" for i in items) / n, 4) if n else None,
    }


# -------------------------------------------------------------------------------------- report


def _slice_items(items: Sequence[TrafficItem], name: str) -> list[TrafficItem]:
    return list(items) if name == "all" else [i for i in items if name in i.tags]


def _sample(n: int, cap: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    return np.sort(rng.choice(n, size=cap, replace=False)) if n > cap else np.arange(n)


def drift_report(
    reference: Sequence[TrafficItem],
    recent: Sequence[TrafficItem],
    *,
    windows: Mapping[str, Sequence[str]],
    embedder: Embedder | None,
    options: DriftOptions | None = None,
    scores: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The drift report of ``recent`` against ``reference`` (see the module docstring).

    Args:
        reference, recent: the two windows' requests.
        windows: ``{"reference": (since, until), "recent": (since, until)}``, UTC, for the report.
        embedder: embeds the questions; None leaves the embedding comparison out.
        options: thresholds, minimum sizes, test settings, slices.
        scores: verifier score in [0, 1] per labelled request (``origin`` → score), for quality.

    Returns a JSON-ready dict: ``windows``, ``encoder``, ``thresholds``, ``slices`` (name →
    requests, input and outcome metrics and the slice's ``alerts``), ``alerts`` (all of them,
    each with ``slice``, ``metric``, ``kind`` input/outcome, ``value``, ``threshold``) and
    ``exit_code``.

    Raises ConfigError when a window is empty or a requested slice has no request in a window.
    """
    opts = options or DriftOptions()
    for name, items in (("reference", reference), ("recent", recent)):
        if not items:
            since, until = windows[name]
            flag = "--reference-since/--reference-until" if name == "reference" else "--since/--until"
            raise ConfigError(
                f"the {name} window {since} → {until} has no request (after the filters); "
                f"widen it with {flag}, or check --traces"
            )
    tags = sorted({t for i in (*reference, *recent) for t in i.tags})
    for wanted in opts.slices:
        for name, items in (("reference", reference), ("recent", recent)):
            if not any(wanted in i.tags for i in items):
                raise ConfigError(
                    f"tag {wanted!r}: no request in the {name} window carries it; tags in the windows: "
                    f"{', '.join(tags) or 'none'}"
                )
    names = ["all", *(opts.slices or tags)]
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    if embedder is not None:
        questions = sorted({i.question for i in (*reference, *recent)})
        vectors = dict(zip(questions, embedder.embed(questions), strict=True))
    slices: dict[str, dict[str, Any]] = {}
    for name in names:
        ref, rec = _slice_items(reference, name), _slice_items(recent, name)
        slices[name] = _slice(ref, rec, vectors, opts, dict(scores or {}))
    for key in ("embedding", "unseen_terms"):  # Bonferroni over the slices each test ran on
        tests = [e["input"][key] for e in slices.values() if e["input"][key] and e["input"][key]["p_value"] is not None]
        for test in tests:
            test["p_adjusted"] = round(min(1.0, test["p_value"] * len(tests)), 5)
    alerts: list[dict[str, Any]] = []
    for name, entry in slices.items():
        entry["alerts"] = _alerts(name, entry, opts)
        alerts.extend(entry["alerts"])
    report: dict[str, Any] = {
        "windows": {k: list(v) for k, v in windows.items()},
        "encoder": embedder.name if embedder is not None else None,
        "thresholds": dict(opts.thresholds),
        "min_requests": opts.min_requests,
        "slices": slices,
        "alerts": alerts,
    }
    report["exit_code"] = exit_code(alerts)
    return report


def _slice(
    ref: list[TrafficItem],
    rec: list[TrafficItem],
    vectors: Mapping[str, npt.NDArray[np.float32]],
    opts: DriftOptions,
    scores: dict[str, float],
) -> dict[str, Any]:
    enough = len(ref) >= opts.min_requests and len(rec) >= opts.min_requests
    embedding: dict[str, Any] | None = None
    if vectors and ref and rec:
        rng = np.random.default_rng(opts.seed)
        x = np.stack([vectors[i.question] for i in ref])[_sample(len(ref), opts.max_sample, rng)]
        y = np.stack([vectors[i.question] for i in rec])[_sample(len(rec), opts.max_sample, rng)]
        embedding = {"mean_cosine_distance": round(_cosine_distance(x, y), 5), "sampled": [len(x), len(y)]}
        if enough and len(x) >= 2 and len(y) >= 2:
            mmd2, p = mmd_test(x, y, permutations=opts.permutations, seed=opts.seed)
            embedding.update(mmd2=round(mmd2, 5), p_value=round(p, 5), p_adjusted=None)
        else:
            embedding.update(mmd2=None, p_value=None, p_adjusted=None)
    ref_lang = _shares([language(i.question) for i in ref])
    rec_lang = _shares([language(i.question) for i in rec])
    ref_fmt, rec_fmt = _format_shares(ref), _format_shares(rec)
    moved = max(FORMATS, key=lambda f: abs(rec_fmt[f] - ref_fmt[f])) if ref and rec else None
    change = round(abs(rec_fmt[moved] - ref_fmt[moved]), 4) if moved else None
    return {
        "requests": {"reference": len(ref), "recent": len(rec)},
        "enough": enough,
        "input": {
            "embedding": embedding,
            "unseen_terms": _unseen(ref, rec, opts, enough)
            if ref and rec
            else {"rate": None, "expected": None, "excess": None, "p_value": None, "p_adjusted": None, "new_terms": []},
            "language": {
                "reference": ref_lang,
                "recent": rec_lang,
                "tvd": round(_tvd(ref_lang, rec_lang), 4) if ref and rec else None,
            },
            "format": {
                "reference": ref_fmt,
                "recent": rec_fmt,
                "max_change": change,
                "moved": moved if change else None,
            },
            "median_chars": {
                "reference": percentile([len(i.question) for i in ref], 50) if ref else None,
                "recent": percentile([len(i.question) for i in rec], 50) if rec else None,
            },
        },
        "outcome": {"reference": _outcomes(ref, scores), "recent": _outcomes(rec, scores)},
    }


def _alerts(name: str, entry: Mapping[str, Any], opts: DriftOptions) -> list[dict[str, Any]]:
    t = opts.thresholds
    found: list[dict[str, Any]] = []

    def alert(metric: str, value: float, threshold: float, detail: str) -> None:
        kind = "input" if metric in INPUT_METRICS else "outcome"
        found.append(
            {"slice": name, "metric": metric, "kind": kind, "value": value, "threshold": threshold, "detail": detail}
        )

    n_ref, n_rec = entry["requests"]["reference"], entry["requests"]["recent"]
    if n_rec >= opts.min_requests and n_ref < opts.min_requests:
        if name != "all" and t.get("new_slice"):
            alert("new_slice", n_rec, opts.min_requests, f"{n_rec} recent requests, {n_ref} in the reference window")
        return found
    if not entry["enough"]:
        return found
    inp, out = entry["input"], entry["outcome"]
    emb = inp["embedding"]
    alpha = t.get("p")
    if emb is not None and emb.get("p_adjusted") is not None:
        mmd = t.get("mmd")
        if alpha is not None and emb["p_adjusted"] < alpha and (mmd is None or emb["mmd2"] >= mmd):
            alert("mmd", emb["mmd2"], mmd or 0.0, f"MMD² {emb['mmd2']:.4f}, adjusted p {emb['p_adjusted']:.4f}")
        if (c := t.get("mean_cosine")) is not None and emb["mean_cosine_distance"] >= c:
            alert("mean_cosine", emb["mean_cosine_distance"], c, "mean vectors' cosine distance")
    unseen = inp["unseen_terms"]
    u = t.get("unseen_terms")
    tested = alpha is not None and unseen["p_adjusted"] is not None
    if u is not None and tested and unseen["p_adjusted"] < alpha and unseen["excess"] >= u:
        new = ", ".join(term for term, _ in unseen["new_terms"][:5])
        detail = f"{unseen['rate']:.0%} of recent terms unseen, {unseen['expected']:.0%} expected"
        alert("unseen_terms", unseen["excess"], u, detail + (f"; new terms: {new}" if new else ""))
    if (
        (lang := t.get("language")) is not None
        and inp["language"]["tvd"] is not None
        and inp["language"]["tvd"] >= lang
    ):
        alert(
            "language",
            inp["language"]["tvd"],
            lang,
            f"{_mix(inp['language']['reference'])} → {_mix(inp['language']['recent'])}",
        )
    fmt = inp["format"]
    if (f := t.get("format")) is not None and fmt["max_change"] is not None and fmt["max_change"] >= f and fmt["moved"]:
        moved = fmt["moved"]
        alert("format", fmt["max_change"], f, f"{moved}: {fmt['reference'][moved]:.0%} → {fmt['recent'][moved]:.0%}")
    ref, rec = out["reference"], out["recent"]
    if (q := t.get("quality_drop")) is not None and min(ref["labelled"], rec["labelled"]) >= opts.min_labels:
        drop = ref["quality"] - rec["quality"]
        if drop >= q:
            alert("quality_drop", round(drop, 4), q, f"quality {ref['quality']:.3f} → {rec['quality']:.3f}")
    for metric, key in (("cost_rise", "cost_usd"), ("p95_rise", "p95_s")):
        limit = t.get(metric)
        before, after = ref[key], rec[key]
        if limit is not None and before is not None and after is not None and before > 0:
            rise = after / before - 1
            floor = t.get("p95_min_s") if metric == "p95_rise" else None
            if rise >= limit and (floor is None or after - before >= floor):
                alert(metric, round(rise, 4), limit, f"{key} {before:.6g} → {after:.6g}")
    for metric, key in (
        ("fallback_rise", "fallback_rate"),
        ("parse_failure_rise", "parse_failure_rate"),
        ("error_rise", "error_rate"),
    ):
        limit = t.get(metric)
        if limit is not None and ref[key] is not None and rec[key] is not None and rec[key] - ref[key] >= limit:
            alert(metric, round(rec[key] - ref[key], 4), limit, f"{key} {ref[key]:.3f} → {rec[key]:.3f}")
    return found


def _mix(shares: Mapping[str, float]) -> str:
    return " ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:3]) or "–"


def exit_code(alerts: Sequence[Mapping[str, Any]]) -> int:
    """0 without alerts, :data:`EXIT_OUTCOME` with any outcome alert, else :data:`EXIT_INPUT`."""
    if any(a["kind"] == "outcome" for a in alerts):
        return EXIT_OUTCOME
    return EXIT_INPUT if alerts else 0


# ---------------------------------------------------------------------------------- windows


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
        raise ConfigError(f"the recent window {form(start)} → {form(end)} is empty; --since must be before --until")
    if ref_start >= ref_end:
        raise ConfigError(
            f"the reference window {form(ref_start)} → {form(ref_end)} is empty; "
            "--reference-since must be before --reference-until"
        )
    if ref_start < end and start < ref_end:
        raise ConfigError(
            f"the windows overlap (reference {form(ref_start)} → {form(ref_end)}, recent {form(start)} → {form(end)}); "
            "a request in both would be compared with itself: move --reference-until to --since or earlier"
        )
    return {"reference": (form(ref_start), form(ref_end)), "recent": (form(start), form(end))}


# ---------------------------------------------------------------------------------- labels


def label_scores(items: Sequence[TrafficItem], tasks: Sequence[Task]) -> dict[str, float]:
    """Verifier scores (``origin`` → score in [0, 1]) of the stored answers of ``items`` whose
    request a labelled task names (``Task`` built from a regression set; candidate references
    and ``open`` tasks, which would need a judge, are left out)."""
    from podium.eval.verifiers import verify

    by_origin: dict[str, Task] = {}
    for task in tasks:
        origin = task.origin
        if origin and task.task_type != "open" and not (task.reference_source or "").startswith("candidate:"):
            by_origin[origin] = task
    pairs = [(i, by_origin[i.origin]) for i in items if i.origin in by_origin and i.answer is not None]

    async def score_all() -> dict[str, float]:
        out: dict[str, float] = {}
        for item, task in pairs:
            verdict = await verify(task, item.answer or "")
            out[item.origin] = verdict.score
        return out

    return asyncio.run(score_all()) if pairs else {}


def reference_scores(items: Sequence[TrafficItem]) -> dict[str, float]:
    """Scores (``origin`` → 1/0) of the podium answers of shadow rows whose client sent a
    reference (``X-Podium-Reference``) of a task type a rule can check, by the shadow report's
    own rule (:func:`podium.serve.shadow.correct`: the eval loop's verifiers), so drift's quality
    and ``podium shadow report``'s agree. Rows without a reference or an answer are left out.

    Raises ConfigError when math-verify (the ``eval`` extra) is missing."""
    from podium.serve.shadow import correct

    out: dict[str, float] = {}
    for item in items:
        if item.reference is None or item.answer is None:
            continue
        row = {"id": item.origin, "question": item.question, "reference": item.reference, "task_type": item.task_type}
        score = correct(item.answer, row)
        if score is not None:
            out[item.origin] = score
    return out


# --------------------------------------------------------------------------------- Markdown


def _f(value: Any, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def report_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: the windows, the alerts, one table of input shift and one of
    outcomes (a row per slice), then each slice's new terms, languages and formats."""
    ref_w, rec_w = report["windows"]["reference"], report["windows"]["recent"]
    code = report["exit_code"]
    verdict = {0: "no threshold crossed", EXIT_INPUT: "input shift", EXIT_OUTCOME: "outcome shift"}[code]
    lines = [
        "# Drift report",
        "",
        f"Recent window {rec_w[0]} → {rec_w[1]} against reference window {ref_w[0]} → {ref_w[1]}. "
        f"Embedding: {report['encoder'] or 'off'}. A slice needs {report['min_requests']} requests in each "
        "window to raise an alert.",
        "",
        f"**{len(report['alerts'])} alert(s): {verdict}** (exit {code}).",
        "",
    ]
    for a in report["alerts"]:
        lines.append(
            f"- `{a['slice']}` {a['kind']} · {a['metric']}: {a['value']:g} (threshold {a['threshold']:g}) {a['detail']}"
        )
    lines += [
        "",
        "## Input",
        "",
        "| slice | requests ref → recent | MMD² (adj. p) | mean-cos dist | unseen terms (excess) | language TVD | "
        "format Δ (which) | median chars |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["slices"].items():
        inp = s["input"]
        emb = inp["embedding"] or {}
        mmd = (
            f"{_f(emb.get('mmd2'), '.4f')} ({_f(emb.get('p_adjusted'), '.3f')})" if emb.get("mmd2") is not None else "–"
        )
        fmt = inp["format"]
        moved = _f(fmt["max_change"], ".2f") + (f" ({fmt['moved']})" if fmt["moved"] else "")
        chars = inp["median_chars"]
        cells = [
            f"`{name}`",
            f"{s['requests']['reference']} → {s['requests']['recent']}",
            mmd,
            _f(emb.get("mean_cosine_distance"), ".4f"),
            f"{_f(inp['unseen_terms']['rate'], '.3f')} ({_f(inp['unseen_terms']['excess'], '+.3f')})",
            _f(inp["language"]["tvd"], ".3f"),
            moved,
            f"{_f(chars['reference'], '.0f')} → {_f(chars['recent'], '.0f')}",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    lines += [
        "",
        "## Outcomes",
        "",
        "| slice | quality (labelled) | cost / request USD | p95 s | fallback rate | parse-failure rate | error rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in report["slices"].items():
        ref, rec = s["outcome"]["reference"], s["outcome"]["recent"]

        def pair(key: str, spec: str, ref: Mapping[str, Any] = ref, rec: Mapping[str, Any] = rec) -> str:
            return f"{_f(ref[key], spec)} → {_f(rec[key], spec)}"

        quality = f"{pair('quality', '.3f')} ({ref['labelled']}, {rec['labelled']})"
        cells = [
            f"`{name}`",
            quality,
            pair("cost_usd", ".6f"),
            pair("p95_s", ".2f"),
            pair("fallback_rate", ".3f"),
            pair("parse_failure_rate", ".3f"),
            pair("error_rate", ".3f"),
        ]
        lines.append(f"| {' | '.join(cells)} |")
    lines += ["", "## Per slice", ""]
    for name, s in report["slices"].items():
        inp = s["input"]
        new = ", ".join(f"{t} ({n})" for t, n in inp["unseen_terms"]["new_terms"]) or "–"
        fmt_ref = ", ".join(f"{k} {v:.0%}" for k, v in inp["format"]["reference"].items() if v) or "prose"
        fmt_rec = ", ".join(f"{k} {v:.0%}" for k, v in inp["format"]["recent"].items() if v) or "prose"
        lines += [
            f"- `{name}`: new terms (recent requests using them): {new}; languages "
            f"{_mix(inp['language']['reference'])} → {_mix(inp['language']['recent'])}; formats {fmt_ref} → {fmt_rec}",
        ]
    return "\n".join(lines) + "\n"
