"""Property tests of the conductor-output parser: total (a workflow or a PlanParseError for any
text), linear work, and lossless on what it writes itself (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import podium.parse as parse_module
from podium.errors import PlanParseError
from podium.parse import MAX_OUTPUT_CHARS, parse_workflow
from podium.workflow import ALL, Step, Workflow

# the pieces that broke earlier parsers: labels, openers without closers, smart quotes, think tags,
# non-ASCII digits, brackets inside strings
FRAGMENTS = [
    "model_id = [", "subtasks = [", "access_list = [", "Model IDs:", "[", "]", ",", '"', "'", "“", "”",
    "‘", "„", "<think>", "</think>", "²", "①", "٣", "0", "1", "2", "-", ".", "all", "\\", "\n", " ", "```",
    '"all"', "[]", "Model 1", "{", "}", ":", "=",
]  # fmt: skip
hostile = st.lists(st.sampled_from(FRAGMENTS), max_size=400).map("".join)


def _parse(text: str) -> Workflow | PlanParseError:
    try:
        return parse_workflow(text, pool_size=3, max_steps=5)
    except PlanParseError as exc:
        return exc


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=300), hostile))
@pytest.mark.slow
def test_any_text_gives_a_workflow_or_a_plan_parse_error(text: str) -> None:
    result = _parse(text)  # any other exception fails the test
    assert isinstance(result, Workflow | PlanParseError)
    if isinstance(result, PlanParseError):
        assert result.kind in {
            "missing_field", "unparseable", "empty_workflow", "too_many_steps", "length_mismatch",
            "unknown_worker", "invalid_subtask", "invalid_access",
        }  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join), st.integers(200, 3000))
def test_the_reader_does_linear_work_on_repetitive_text(unit: str, times: int) -> None:
    """Repeating a fragment is how quadratic parsers were broken (``model_id=[“`` × 1455 took
    1.8 s): the characters read over every attempt stay within each field's linear budget."""
    text = (unit * times)[:MAX_OUTPUT_CHARS]
    _parse(text)
    for budget in parse_module._WORK:
        assert budget.limit - budget.left <= parse_module._WORK_FACTOR * len(text) + 10_000


steps = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60).filter(str.strip),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(steps, st.data(), st.text(max_size=80))
@pytest.mark.slow
def test_the_format_podium_writes_parses_back_exactly(
    raw: list[tuple[int, str]], data: st.DataObject, prose: str
) -> None:
    built = []
    for index, (worker, subtask) in enumerate(raw):
        access = data.draw(st.one_of(st.just(ALL), st.sets(st.integers(0, max(index - 1, 0))).map(
            lambda s, i=index: tuple(sorted(x for x in s if x < i)))))  # fmt: skip
        built.append(Step(worker, subtask.strip(), access))
    workflow = Workflow(tuple(built))
    text = f"{prose.replace('model', 'm').replace('sub', 's').replace('access', 'a')}\n{workflow.lists_text()}"
    assert _parse(text) == workflow
