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
the traces) — quality: the mean verifier score of podium's stored answers against human or
client references (candidate references are podium's own answers and are not used, nor are the
candidates a judge confirmed: its rejections stay candidates, so they would count only passes).
Where nobody labelled the traffic, a **judge** worker (``podium drift --judge WORKER``) grades a
seeded sample of each window's stored answers per slice (:func:`judge_sample`,
:func:`podium.traffic.label.judge_answers`): its pass rate is ``judged_quality``. The same judge
grades both windows, so the two rates compare; they are not comparable with the labelled
quality and are never mixed with it. A slice's quality alert uses the labels when both windows
have ``min_labels`` of them, else the judge's verdicts when both windows have that many.

Each metric is compared with a threshold (:data:`DEFAULT_THRESHOLDS`); a slice needs at least
``min_requests`` requests in both windows (``min_labels`` labelled ones for quality) before it can
raise an alert. :func:`exit_code` maps the alerts to the command's exit status.

The thresholds, options, windows and exit codes are in :mod:`podium.traffic.drift_options`, the
statistics in :mod:`podium.traffic.drift_stats`, the Markdown rendering in
:mod:`podium.traffic.drift_markdown`; every public name is importable from here.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.metrics import percentile
from podium.traffic.drift_markdown import mix as _mix
from podium.traffic.drift_markdown import report_markdown
from podium.traffic.drift_options import (
    DEFAULT_THRESHOLDS,
    EXIT_INPUT,
    EXIT_OUTCOME,
    INPUT_METRICS,
    DriftOptions,
    exit_code,
    parse_thresholds,
    windows_for,
)
from podium.traffic.drift_stats import cosine_distance as _cosine_distance
from podium.traffic.drift_stats import format_shares as _format_shares
from podium.traffic.drift_stats import mmd_test
from podium.traffic.drift_stats import outcomes as _outcomes
from podium.traffic.drift_stats import sample as _sample
from podium.traffic.drift_stats import shares as _shares
from podium.traffic.drift_stats import tvd as _tvd
from podium.traffic.drift_stats import unseen_terms as _unseen
from podium.traffic.features import FORMATS, language, normalise
from podium.traffic.source import TrafficItem

if TYPE_CHECKING:
    from podium.eval.tasks import Task
    from podium.workers.base import Worker

__all__ = [
    "DEFAULT_THRESHOLDS",
    "EXIT_INPUT",
    "EXIT_OUTCOME",
    "INPUT_METRICS",
    "DriftOptions",
    "check_windows",
    "drift_report",
    "exit_code",
    "judge_sample",
    "label_scores",
    "mmd_test",
    "parse_thresholds",
    "reference_scores",
    "report_markdown",
    "windows_for",
]


def _slice_items(items: Sequence[TrafficItem], name: str) -> list[TrafficItem]:
    return list(items) if name == "all" else [i for i in items if name in i.tags]


def drift_report(
    reference: Sequence[TrafficItem],
    recent: Sequence[TrafficItem],
    *,
    windows: Mapping[str, Sequence[str]],
    embedder: Embedder | None,
    options: DriftOptions | None = None,
    scores: Mapping[str, float] | None = None,
    judged: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The drift report of ``recent`` against ``reference`` (see the module docstring).

    Args:
        reference, recent: the two windows' requests.
        windows: ``{"reference": (since, until), "recent": (since, until)}``, UTC, for the report.
        embedder: embeds the questions; None leaves the embedding comparison out.
        options: thresholds, minimum sizes, test settings, slices.
        scores: verifier score in [0, 1] per labelled request (``origin`` → score), for quality.
        judged: the judge's verdict, 1.0 pass or 0.0 fail, per judged request (``origin`` →
            verdict), for ``judged_quality``.

    Returns a JSON-ready dict: ``windows``, ``encoder``, ``thresholds``, ``slices`` (name →
    requests, input and outcome metrics and the slice's ``alerts``), ``alerts`` (all of them,
    each with ``slice``, ``metric``, ``kind`` input/outcome, ``value``, ``threshold``) and
    ``exit_code``.

    Raises ConfigError when a window is empty or a requested slice has no request in a window.
    """
    opts = options or DriftOptions()
    tags = check_windows(reference, recent, windows, opts)
    names = ["all", *(opts.slices or tags)]
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    if embedder is not None:
        questions = sorted({i.question for i in (*reference, *recent)})
        vectors = dict(zip(questions, embedder.embed(questions), strict=True))
    slices: dict[str, dict[str, Any]] = {}
    for name in names:
        ref, rec = _slice_items(reference, name), _slice_items(recent, name)
        slices[name] = _slice(ref, rec, vectors, opts, dict(scores or {}), dict(judged or {}))
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
    judged: dict[str, float],
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
        "outcome": {"reference": _outcomes(ref, scores, judged), "recent": _outcomes(rec, scores, judged)},
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
    if (q := t.get("quality_drop")) is not None:
        for key, count, what in (("quality", "labelled", "quality"), ("judged_quality", "judged", "judge's pass rate")):
            if min(ref[count], rec[count]) >= opts.min_labels:  # the labels when there are enough, else the judge
                drop = ref[key] - rec[key]
                if drop >= q:
                    alert("quality_drop", round(drop, 4), q, f"{what} {ref[key]:.3f} → {rec[key]:.3f}")
                break
    limit = t.get("agreement_drop")
    compared = min(ref["compared"], rec["compared"]) >= opts.min_labels
    if limit is not None and compared and (drop := ref["agreement"] - rec["agreement"]) >= limit:
        detail = f"agreement with the upstream {ref['agreement']:.3f} → {rec['agreement']:.3f}"
        alert("agreement_drop", round(drop, 4), limit, detail)
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


def _tags(reference: Sequence[TrafficItem], recent: Sequence[TrafficItem]) -> list[str]:
    return sorted({t for i in (*reference, *recent) for t in i.tags})


def check_windows(
    reference: Sequence[TrafficItem],
    recent: Sequence[TrafficItem],
    windows: Mapping[str, Sequence[str]],
    options: DriftOptions,
    store_flag: str = "--traces",
) -> list[str]:
    """The tags seen in the two windows, once both windows can be compared: ConfigError when a
    window is empty (naming ``store_flag``, the option that names where the traffic is) or a
    slice of ``options.slices`` has no request in either window (checked before any judge is
    called, so bad input costs no call). A slice in one window only is compared as such: new
    in the recent one, it is a ``new_slice``."""
    for name, items in (("reference", reference), ("recent", recent)):
        if not items:
            since, until = windows[name]
            flag = "--reference-since/--reference-until" if name == "reference" else "--since/--until"
            raise ConfigError(
                f"the {name} window {since} → {until} has no request (after the filters); "
                f"widen it with {flag}, or check {store_flag}"
            )
    tags = _tags(reference, recent)
    for wanted in options.slices:  # a tag new in the recent window is a new slice, reported as one
        if wanted not in tags:
            raise ConfigError(
                f"tag {wanted!r}: no request in either window carries it; "
                f"tags in the windows: {', '.join(tags) or 'none'}"
            )
    return tags


def judge_sample(
    reference: Sequence[TrafficItem],
    recent: Sequence[TrafficItem],
    *,
    per_slice: int,
    options: DriftOptions | None = None,
    skip: Collection[str] = (),
) -> list[TrafficItem]:
    """The requests a judge grades: in each window and each slice the report has (``all`` and
    ``options.slices``, or every tag), up to ``per_slice`` of those with an answer, drawn by
    ``options.seed`` and the slice's name alone: the same requests give the same draw whichever
    window they are, so a request cache answers a repeated report, and next week's reference
    window (this week's recent one) costs no call. ``skip``: origins not to draw (already
    labelled). Each request once, in window order."""
    opts = options or DriftOptions()
    names = ["all", *(opts.slices or _tags(reference, recent))]
    chosen: dict[str, TrafficItem] = {}
    for window in (reference, recent):
        for name in names:
            pool = [i for i in _slice_items(window, name) if i.answer and i.origin not in skip]
            draw = np.random.default_rng([opts.seed, zlib.crc32(name.encode("utf-8"))])
            for k in _sample(len(pool), per_slice, draw):
                chosen.setdefault(pool[k].origin, pool[k])
    return list(chosen.values())


def label_scores(items: Sequence[TrafficItem], tasks: Sequence[Task], judge: Worker | None = None) -> dict[str, float]:
    """Verifier scores (``origin`` → score in [0, 1]) of the stored answers of ``items`` whose
    request a labelled task names (``Task`` built from a regression set), or whose question is a
    labelled task's (the same normalised text: a repeat the export folded into one task; a
    pseudonymized task's question matches the repeats its masking left unchanged). ``open`` tasks are
    graded by ``judge`` against their reference (the eval loop's rubric, its score over 10, as
    ``podium eval`` scores them; one call per answer, through the judge's cache), and left out
    without one. Left out too: candidate references, and references a judge confirmed
    (``judge:*``): a judge confirms a candidate — podium's own answer, or the upstream's — and its
    rejections stay candidates, so its confirmations alone would count only the answers it
    passed and bias quality upward (``podium drift --judge`` grades those answers instead)."""
    from podium.eval.verifiers import verify

    by_origin: dict[str, Task] = {}
    by_question: dict[str, Task] = {}
    for task in tasks:
        origin, source = task.origin, task.reference_source or ""
        gradable = task.task_type != "open" or (judge is not None and bool(task.reference))
        if origin and gradable and not source.startswith(("candidate:", "judge:")):
            by_origin[origin] = task
            by_question.setdefault(normalise(task.question), task)
    pairs = []
    for item in items:  # a question asked again (one task: the export de-duplicates) has the same reference
        labelled = by_origin.get(item.origin) or by_question.get(normalise(item.question))
        if labelled is not None and item.answer is not None:
            pairs.append((item, labelled))

    async def score_all() -> dict[str, float]:
        out: dict[str, float] = {}
        for item, task in pairs:
            answer = item.answer or ""
            verdict = await verify(task, answer, judge=judge)
            if not (task.task_type == "open" and answer.strip() and not verdict.parsed):  # a judge's reply
                out[item.origin] = verdict.score  # without a score counts for nothing; an empty answer as 0
        return out

    return asyncio.run(score_all()) if pairs else {}


def reference_scores(items: Sequence[TrafficItem]) -> dict[str, float]:
    """Scores (``origin`` → 1/0) of the podium answers of shadow rows whose client sent a
    reference (``X-Podium-Reference``) of a task type a rule can check, by the shadow report's
    own rule (:func:`podium.serve.shadow_report.correct`: the eval loop's verifiers), so drift's quality
    and ``podium shadow report``'s agree. Rows without a reference or an answer are left out.

    Raises ConfigError when math-verify (the ``eval`` extra) is missing."""
    from podium.serve.shadow_report import correct

    out: dict[str, float] = {}
    for item in items:
        if item.reference is None or item.answer is None:
            continue
        row = {"id": item.origin, "question": item.question, "reference": item.reference, "task_type": item.task_type}
        score = correct(item.answer, row)
        if score is not None:
            out[item.origin] = score
    return out
