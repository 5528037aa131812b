"""``podium drift``: input and outcome shift between two windows of real traces.

The trace files are written by the real orchestrator over podium.testing's scripted fakes
(tests/traffic_support.py) from real questions: GSM8K and MBPP (data/benchmarks), and a
deterministic Danish, table-formatted rewrite of GSM8K questions for the shift. The statistics'
unit tests use numpy samples whose answer is known.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from bench.shift_data import danish_table

from podium.cli import cli
from podium.errors import ConfigError
from podium.traffic.drift import DEFAULT_THRESHOLDS, mmd_test, parse_thresholds, windows_for
from podium.traffic.features import formats, language
from tests.traffic_support import Request, at, gsm8k_questions, mbpp_questions, run_requests

HUMANEVAL = Path(__file__).resolve().parent.parent / "data" / "benchmarks" / "humaneval" / "HumanEval.jsonl"

WINDOWS = ["--reference-since", "2026-11-01", "--reference-until", "2026-11-07", "--since", "2026-11-08",
           "--until", "2026-11-14"]  # fmt: skip


def spread(questions: list[str], first_day: int, tags: tuple[str, ...], **kw: object) -> list[Request]:
    """One request per question, spread over the seven days from ``first_day``, hourly."""
    return [
        Request(q, at(first_day + i % 7, 8 + i // 7), tags, **kw)  # type: ignore[arg-type]
        for i, q in enumerate(questions)
    ]


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Reference week: 40 GSM8K (math) and 20 MBPP (code) questions. Recent week: 40 other
    GSM8K, 20 other MBPP, and 20 Danish support questions over tables, a use case that is new."""
    path = tmp_path_factory.mktemp("shifted") / "traces.sqlite3"
    run_requests(
        path,
        [
            *spread(gsm8k_questions(0, 40), 1, ("use-case:math",)),
            *spread(mbpp_questions(20, 20), 1, ("use-case:code",)),
            *spread(gsm8k_questions(40, 40), 8, ("use-case:math",)),
            *spread(mbpp_questions(40, 20), 8, ("use-case:code",)),
            *spread([danish_table(q, i) for i, q in enumerate(gsm8k_questions(600, 20))], 8, ("use-case:support-da",)),
        ],
    )
    return path


def drift(traces: Path, *extra: str) -> int:
    return cli(["drift", "--traces", str(traces), *WINDOWS, *extra])


def report(traces: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, object]]:
    code = drift(traces, "--json", *extra)
    return code, json.loads(capsys.readouterr().out)


def alerts(data: dict, name: str) -> set[str]:  # type: ignore[type-arg]
    return {a["metric"] for a in data["slices"][name]["alerts"]}


@pytest.mark.slow
def test_a_new_danish_table_use_case_is_an_input_shift_and_unchanged_slices_stay_quiet(
    shifted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = report(shifted, capsys)
    assert code == 3  # input shift only
    slices = data["slices"]
    assert slices["all"]["requests"] == {"reference": 60, "recent": 80}  # type: ignore[index]
    assert alerts(data, "all") >= {"mmd", "unseen_terms", "language", "format"}
    assert slices["all"]["input"]["language"]["recent"] == {"en": 0.75, "da": 0.25}  # type: ignore[index]
    assert slices["all"]["input"]["format"]["moved"] == "table"  # type: ignore[index]
    new_terms = [t for t, _ in slices["all"]["input"]["unseen_terms"]["new_terms"]]  # type: ignore[index]
    assert {"antal", "bestilt", "følgende"} <= set(new_terms)  # in every Danish question, in no English one
    assert alerts(data, "use-case:support-da") == {"new_slice"}
    # the same kinds of questions in both weeks: nothing to report
    assert alerts(data, "use-case:math") == set() and alerts(data, "use-case:code") == set()
    math = slices["use-case:math"]["input"]  # type: ignore[index]
    assert math["embedding"]["p_adjusted"] > 0.01 and math["unseen_terms"]["excess"] < 0.07
    assert {a["kind"] for a in data["alerts"]} == {"input"}  # type: ignore[attr-defined]


def test_the_markdown_report_names_the_slices_that_moved(shifted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = shifted.parent / "drift.md"
    assert drift(shifted, "--out", str(out_file)) == 3
    printed, err = capsys.readouterr()
    assert printed == out_file.read_text(encoding="utf-8")
    assert "alert(s): input shift** (exit 3)" in printed
    assert "- `use-case:support-da` input · new_slice: 20" in printed
    assert "| `use-case:math` | 40 → 40 |" in printed
    assert "exit 3" in err


@pytest.mark.slow
def test_the_plot_draws_the_metrics_over_time(shifted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = shifted.parent / "drift.png"
    assert drift(shifted, "--plot", str(png), "--json") == 3
    assert json.loads(capsys.readouterr().out)["plot"] == str(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


@pytest.mark.slow
def test_thresholds_change_what_alerts(shifted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    off = [f"{name}=off" for name in ("p", "language", "format", "new_slice")]
    code, data = report(shifted, capsys, *[x for name in off for x in ("--threshold", name)])
    assert code == 0 and data["alerts"] == []
    code, data = report(shifted, capsys, "--tag", "use-case:math", "--tag", "use-case:code")
    assert list(data["slices"]) == ["all", "use-case:math", "use-case:code"]  # type: ignore[arg-type]
    assert code == 3 and {a["slice"] for a in data["alerts"]} == {"all"}  # type: ignore[attr-defined]
    code, data = report(shifted, capsys, "--min-requests", "50")
    assert {a["slice"] for a in data["alerts"]} == {"all"}  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def worse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The same GSM8K traffic both weeks; in the recent week the conductor fails to plan a
    quarter of the time (the fallback answers), a worker costs three times as much, and the
    answers are wrong. Returns the trace file and the labelled set's lines."""
    path = tmp_path_factory.mktemp("worse") / "traces.sqlite3"
    ref_q, rec_q = gsm8k_questions(0, 30), gsm8k_questions(30, 30)
    requests = [
        *spread(ref_q, 1, ("use-case:math",), answer="The answer is 18."),
        *[
            Request(q, at(8 + i % 7, 8 + i // 7), ("use-case:math",), "The answer is 5.",
                    conductor="broken" if i % 4 == 0 else "flaky" if i % 4 == 1 else "ok", price=3.0)
            for i, q in enumerate(rec_q)
        ],
    ]  # fmt: skip
    records = run_requests(path, requests)
    labels = []
    for k, r in enumerate(records):
        if k % 3 == 0:  # a human labelled every third request
            labels.append({"id": f"t{k}", "question": r.question, "task_type": "math", "reference": "18"})
            labels[-1].update(reference_source="human", origin=f"trace:{r.id}")
    candidate = {"id": "c", "question": "x", "task_type": "math", "reference": "5"}
    labels.append({**candidate, "reference_source": "candidate:podium", "origin": f"trace:{records[-1].id}"})
    return path, [json.dumps(label) for label in labels]


@pytest.mark.slow
def test_worse_outcomes_on_the_same_traffic_are_an_outcome_shift(
    worse: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, labels = worse
    labelled = path.parent / "labelled.jsonl"
    labelled.write_text("\n".join(labels) + "\n")
    code, data = report(path, capsys, "--labels", str(labelled))
    assert code == 4
    found = alerts(data, "use-case:math")
    assert {"quality_drop", "cost_rise", "fallback_rise", "parse_failure_rise"} <= found
    assert not found & {"mmd", "unseen_terms", "language", "format"}  # what is asked did not change
    outcome = data["slices"]["use-case:math"]["outcome"]  # type: ignore[index]
    assert (outcome["reference"]["quality"], outcome["recent"]["quality"]) == (1.0, 0.0)
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (10, 10)  # the candidate is not used
    assert outcome["reference"]["fallback_rate"] == 0 and outcome["recent"]["fallback_rate"] == pytest.approx(
        8 / 30, abs=1e-4
    )
    assert outcome["recent"]["parse_failure_rate"] == pytest.approx(
        16 / 30, abs=1e-4
    )  # broken and flaky both failed once
    assert outcome["recent"]["cost_usd"] > 2 * outcome["reference"]["cost_usd"]
    code, data = report(path, capsys)  # without labels: no quality, the rest still alerts
    assert code == 4 and "quality_drop" not in alerts(data, "use-case:math")


def test_bad_inputs_are_errors_that_name_the_fix(shifted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["drift", "--traces", str(shifted)]
    cases = [
        (["--reference-since", "2026-10-01", "--reference-until", "2026-10-07", *WINDOWS[4:]],
         "the reference window 2026-10-01T00:00:00.000Z → 2026-10-08T00:00:00.000Z has no request"),
        ([*WINDOWS[:4], "--since", "2026-12-01", "--until", "2026-12-02"], "the recent window"),
        ([*WINDOWS, "--tag", "use-case:billing"], "no stored request carries tag(s) 'use-case:billing'"),
        (["--reference-since", "2026-11-01", "--reference-until", "2026-11-09", *WINDOWS[4:]], "the windows overlap"),
        ([*WINDOWS, "--threshold", "mmd=lots"], "must be a non-negative number or off"),
        ([*WINDOWS, "--threshold", "vibes=1"], "NAME one of p, mmd"),
        ([*WINDOWS, "--embedder", "bert"], "--embedder 'bert'"),
        ([*WINDOWS, "--since", "yesterday"], "is not an ISO 8601 date"),
        ([*WINDOWS, "--min-requests", "1"], "--min-requests must be at least 2"),
        ([*WINDOWS, "--out", str(shifted.parent / "no" / "d.md")], f"folder {shifted.parent / 'no'} does not exist"),
        ([*WINDOWS, "--plot", str(shifted.parent / "d.txt")], "the plot is a PNG image; name a .png file"),
    ]  # fmt: skip
    for extra, message in cases:
        assert cli([*base, *extra]) == 2, extra
        assert message in " ".join(capsys.readouterr().err.split()), extra
    assert cli(["drift", "--traces", str(shifted.parent / "none.sqlite3")]) == 2
    assert "no trace database" in capsys.readouterr().err
    # a tag new this window, asked for by name, is reported as the new slice it is (a first user got exit 2)
    code, data = report(shifted, capsys, "--tag", "use-case:support-da")
    assert code == 3 and "new_slice" in alerts(data, "use-case:support-da"), data


def test_the_default_windows_are_the_last_week_against_the_week_before() -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    w = windows_for(since=None, until=None, reference_since=None, reference_until=None, days=7, now=now)
    assert w == {
        "reference": ("2026-11-16T12:00:00.000Z", "2026-11-23T12:00:00.000Z"),
        "recent": ("2026-11-23T12:00:00.000Z", "2026-11-30T12:00:00.000Z"),
    }
    w = windows_for(since="2026-11-20", until="2026-11-21", reference_since=None, reference_until=None, days=1)
    assert w["reference"] == ("2026-11-19T00:00:00.000Z", "2026-11-20T00:00:00.000Z")
    assert w["recent"] == ("2026-11-20T00:00:00.000Z", "2026-11-22T00:00:00.000Z")  # --until's day included


def test_the_mmd_permutation_test_separates_shifted_samples_from_alike_ones() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    alike = rng.normal(size=(60, 8)).astype(np.float32)
    moved = (rng.normal(size=(60, 8)) + np.r_[1.0, np.zeros(7)]).astype(np.float32)
    mmd_alike, p_alike = mmd_test(x, alike, permutations=200, seed=0)
    mmd_moved, p_moved = mmd_test(x, moved, permutations=200, seed=0)
    assert p_alike > 0.05 and abs(mmd_alike) < 0.02
    assert p_moved == pytest.approx(1 / 201) and mmd_moved > 0.05  # no permutation reaches it
    assert mmd_test(x, moved, permutations=200, seed=0) == (mmd_moved, p_moved)  # seeded


def test_language_and_format_of_real_questions() -> None:
    assert language(gsm8k_questions(0, 1)[0]) == "en"
    assert language(danish_table(gsm8k_questions(0, 1)[0], 1)) == "da"
    assert language("Hur många äpplen har hon kvar efter att ha ätit två?") == "sv"
    assert language("Wie viele Äpfel hat sie noch, nachdem sie zwei gegessen hat?") == "de"
    assert language("Сколько яблок у неё осталось?") == "ru"
    assert language("def f(x): return x") == "und"
    assert formats(danish_table("A 3 b 4 c 5", 1)) == {"table"}
    assert formats("Fix this:\n```python\nprint(1)\n```") == {"code"}
    assert formats("Steps:\n1. open\n2. close") == {"list"}
    assert formats('Parse {"a": 1}') == {"json"}
    assert formats(gsm8k_questions(0, 1)[0]) == frozenset()


def test_pipe_tables_of_any_width_are_tables() -> None:
    """A first user's 3-column tables were missed (a row could hold three pipes at most)."""
    three = "Stock:\n| item | count | price |\n|---|---|---|\n| bolt | 3 | 2.5 |"
    five = "a | b | c | d | e\n1 | 2 | 3 | 4 | 5"
    assert formats(three) == formats(five) == {"table"}
    assert not any("table" in formats(q) for q in gsm8k_questions(0, 1319))
    assert formats("Is it 3 | 4 or not?") == frozenset()  # one row is no table


def test_code_on_one_line_is_code_and_math_notation_is_not() -> None:
    """A first user's drift report missed code asked on one line (a code line needed a second
    one). One unmistakable construct or an inline code span with code punctuation now flags it;
    function notation in a word problem does not."""
    one_line = [
        "Why does `sorted(d.items(), key=lambda kv: kv[1])` fail?",
        "What does print(len(set([1, 2, 2]))) output?",
        "SELECT name FROM users WHERE age > 30 returns nothing, why?",
        "How do I fix def add(a, b) return a + b",
        "[x * 2 for x in range(5)] gives what?",
        "const f = (a) => a + 1 is undefined?",
        "df.groupby('a').sum() is slow",
    ]
    assert [q for q in one_line if "code" not in formats(q)] == []
    prose = [
        "If f(x) = 3x + 2, what is f(4)?",
        "Use the `requests` library or `httpx`?",  # a name in backticks, no code punctuation
        "My order #123 hasn't arrived; can you help? Total = 40 kr.",
        "What is the print run of the first edition?",
    ]
    assert [q for q in prose if "code" in formats(q)] == []
    # the shipped benchmarks: every HumanEval prompt is a Python stub (35 of 164 were flagged
    # before: its def line and doctests were one code-like line); no GSM8K question is code
    humaneval = [json.loads(line)["prompt"] for line in HUMANEVAL.read_text(encoding="utf-8").splitlines()]
    assert sum("code" in formats(p) for p in humaneval) == len(humaneval) == 164
    assert not any("code" in formats(q) for q in gsm8k_questions(0, 1319))


def test_language_of_short_support_texts_and_text_without_language() -> None:
    """py3langid instead of the stop-word vote: short English support questions were ``und``
    (no "i", "my", "do" in its list, and "i"/"do" are Polish function words)."""
    assert language("I need help with my order") == "en"
    assert language("Do I have to pay?") == "en"
    assert language("Hej, jeg har et problem med min ordre") == "da"
    assert language("<PERSON_1> ringede i går om sin faktura") == "da"  # the placeholder is not a word
    assert language("Hur många äpplen har hon kvar?") == "sv"
    for no_language in ("12345 + 678", "SELECT * FROM t WHERE x = 1", "ok", "", "<PERSON_1>"):
        assert language(no_language) == "und", no_language
    # among all 142 of py3langid's labels these were Frisian and Luxembourgish (a trial user's texts)
    assert (language("Is it ok?"), language("Rechnung falsch")) == ("en", "de")


def test_a_language_model_file_that_fails_its_sha256_check_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from podium.traffic import features

    monkeypatch.setattr(features, "_LANGID_SHA256", "0" * 64)
    features._identifier.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"pip install --force-reinstall --no-deps py3langid==0\.4\.0"):
            language("What is two plus two?")
    finally:
        features._identifier.cache_clear()


def test_threshold_pairs() -> None:
    t = parse_thresholds(["mmd=0.02", "language=off", "p95-rise=1"])
    assert (t["mmd"], t["language"], t["p95_rise"]) == (0.02, None, 1.0)
    assert parse_thresholds([]) == DEFAULT_THRESHOLDS
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_thresholds(["mmd"])


def test_p95_latency_alerts_on_a_rise_of_seconds_not_of_milliseconds() -> None:
    """In-memory requests (TrafficItem built here, not from traces) with chosen wall times."""
    from podium.traffic.drift import drift_report
    from podium.traffic.source import TrafficItem

    def window(prefix: str, wall: float) -> list[TrafficItem]:
        questions = gsm8k_questions(0, 20)
        return [TrafficItem(f"{prefix}:{k}", None, "t", q, "ok", latency_s=wall) for k, q in enumerate(questions)]

    spans = {"reference": ("a", "b"), "recent": ("c", "d")}
    slow = drift_report(window("r", 10.0), window("n", 20.0), windows=spans, embedder=None)
    assert [a["metric"] for a in slow["alerts"]] == ["p95_rise"] and slow["exit_code"] == 4
    noisy = drift_report(window("r", 0.003), window("n", 0.005), windows=spans, embedder=None)
    assert noisy["alerts"] == [] and noisy["exit_code"] == 0  # +67 %, but 2 ms


def _shadow_store(path: Path, reference: str | None = "18") -> Path:
    """A real shadow store: the same GSM8K use case both weeks, each row with the client's
    reference (``X-Podium-Reference``) unless None, and the upstream answering 18; podium's
    answers are right (and agree) in the reference week and wrong in the recent one."""
    from podium.store.shadow import ShadowStore

    store = ShadowStore(path)
    for week, answer in ((1, "The answer is 18."), (8, "The answer is 5.")):
        for i, question in enumerate(gsm8k_questions(0 if week == 1 else 12, 12)):
            store.add(
                {"at": at(week + i % 6, 8 + i // 6), "status": "done", "mode": "execute", "use_case": "math",
                 "task_type": "math", "reference": reference, "question": question, "upstream_answer": "18",
                 "podium_status": "ok", "podium_answer": answer, "podium_cost_usd": 0.001}
            )  # fmt: skip
    store.close()
    return path


def test_drift_over_shadow_records_without_references_compares_agreement_with_the_upstream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the client sends no reference, the shadow rows still say whether podium agrees with
    the pipeline it shadows: agreement (as ``podium shadow report`` computes it) falling from
    1.0 to 0.0 is an outcome alert."""
    store = _shadow_store(tmp_path / "shadow.sqlite3", reference=None)
    base = ["drift", "--source", "shadow", "--store", str(store), *WINDOWS, "--embedder", "none"]
    assert cli([*base, "--json"]) == 4
    data = json.loads(capsys.readouterr().out)
    outcome = data["slices"]["use-case:math"]["outcome"]
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (0, 0)
    assert (outcome["reference"]["agreement"], outcome["recent"]["agreement"]) == (1.0, 0.0)
    assert (outcome["reference"]["compared"], outcome["recent"]["compared"]) == (12, 12)
    assert "agreement_drop" in alerts(data, "use-case:math")
    assert cli(base) == 4
    assert "| `use-case:math` | – → – (0, 0) | – | 1.000 → 0.000 (12, 12) |" in capsys.readouterr().out
    assert cli([*base, "--threshold", "agreement_drop=off", "--json"]) == 0
    assert cli([*base, "--use-case", "billing"]) == 2  # not a use case of the store: named, with the ones there are
    assert "--use-case 'billing': no shadow record has it; use cases: math" in capsys.readouterr().err


def test_drift_over_shadow_records_scores_quality_with_the_clients_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--source shadow``: the shadow rows are the traffic, a use case is a slice, and the
    references the client sent are the labels — no labelled set needed for a quality alert."""
    store = _shadow_store(tmp_path / "shadow.sqlite3")
    base = ["drift", "--source", "shadow", "--store", str(store), *WINDOWS, "--json", "--embedder", "none"]
    assert cli([*base, "--tag", "use-case:math"]) == 4
    data = json.loads(capsys.readouterr().out)
    outcome = data["slices"]["use-case:math"]["outcome"]
    assert (outcome["reference"]["quality"], outcome["recent"]["quality"]) == (1.0, 0.0)
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (12, 12)
    assert "quality_drop" in alerts(data, "use-case:math")
    assert cli([*base, "--tag", "billing"]) == 2  # not a use case of the store: a clear error
    assert "shadow slices are use cases: use-case:math" in capsys.readouterr().err
    assert cli(["drift", "--store", str(store), *WINDOWS]) == 2  # a shadow store without --source shadow
    assert "add --source shadow" in capsys.readouterr().err


def test_the_plot_bucket_follows_the_windows_span() -> None:
    """Ten-minute windows drawn by the day were one point at midnight, outside both shaded
    windows, and by the hour one point for both windows (first users' plots); auto picks minutes
    under 6 hours, hours under 3 days, weeks over 90."""
    from podium.traffic.drift_run import DriftQuery, plot_bucket

    def windows(days: float) -> dict[str, tuple[str, str]]:
        return windows_for(since=None, until="2026-11-14", reference_since=None, reference_until=None, days=days)

    spans = (10 / 1440, 2 / 24, 1, 7, 30, 60)  # each window's length, days (the span is twice it)
    assert [plot_bucket(windows(d)) for d in spans] == ["minute", "minute", "hour", "day", "day", "week"]
    assert DriftQuery().bucket == "auto"


def test_new_terms_that_name_a_person_are_not_listed_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recent week's questions carry a customer's name (a word no reference question has):
    the report lists the week's other new words, never the name, unless --allow-pii."""
    path = tmp_path / "traces.sqlite3"
    recent = [f"Our customer Jens Hansen asks about the refund: {q}" for q in gsm8k_questions(20, 6)]
    run_requests(path, [*spread(gsm8k_questions(0, 6), 1, ()), *spread(recent, 8, ())])
    _, masked = report(path, capsys)
    listed = {t for t, _ in masked["slices"]["all"]["input"]["unseen_terms"]["new_terms"]}  # type: ignore[index]
    assert "refund" in listed and not listed & {"jens", "hansen"}
    _, clear = report(path, capsys, "--allow-pii")
    listed = {t for t, _ in clear["slices"]["all"]["input"]["unseen_terms"]["new_terms"]}  # type: ignore[index]
    assert {"jens", "hansen", "refund"} <= listed


def test_a_question_asked_again_is_scored_by_its_one_labelled_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export keeps one task per question; the request that asked it again (another origin)
    is graded against the same reference."""
    path = tmp_path / "traces.sqlite3"
    (janet,) = gsm8k_questions(0, 1)
    records = run_requests(
        path,
        [
            Request(janet, at(8), ("task:math",), "The answer is 18."),
            Request(janet, at(9), ("task:math",), "It is 17."),
        ],
    )
    labels = tmp_path / "set.jsonl"
    task = {"id": "t", "question": janet, "task_type": "math", "reference": "18", "reference_source": "human"}
    labels.write_text(json.dumps({**task, "origin": f"trace:{records[0].id}"}) + "\n", encoding="utf-8")
    run_requests(path, [Request(q, at(2), ("task:math",), "The answer is 1.") for q in gsm8k_questions(5, 2)])
    _, data = report(path, capsys, "--labels", str(labels), "--min-requests", "2")
    recent = data["slices"]["all"]["outcome"]["recent"]  # type: ignore[index]
    assert (recent["labelled"], recent["quality"]) == (2, 0.5)  # 18 right, 17 wrong


@pytest.mark.slow  # 2–3 s: make check's loop stays under a minute
def test_windows_of_minutes_are_drawn_by_the_minute(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "traces.sqlite3"
    questions = gsm8k_questions(0, 12)
    run_requests(path, [Request(q, at(8, 12, minute=k)) for k, q in enumerate(questions)])  # 12:00 … 12:11
    png = tmp_path / "drift.png"
    windows = ["--reference-since", "2026-11-08T12:00:00Z", "--reference-until", "2026-11-08T12:06:00Z",
               "--since", "2026-11-08T12:06:00Z", "--until", "2026-11-08T12:12:00Z"]  # fmt: skip
    code, data = report(path, capsys, *windows, "--plot", str(png), "--min-requests", "2")
    assert code in (0, 3) and data["plot_bucket"] == "minute" and png.read_bytes()[:4] == b"\x89PNG"
