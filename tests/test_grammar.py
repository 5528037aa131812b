"""The workflow grammar's structure (its behaviour under llama.cpp is in test_e2e_local.py)."""

from __future__ import annotations

import re

import pytest

from podium.conductor.grammar import max_plan_chars, workflow_grammar


def test_one_alternative_per_length_with_equal_list_lengths() -> None:
    g = workflow_grammar(pool_size=3, max_steps=4)
    assert re.search(r"^root ::= plan1 \| plan2 \| plan3 \| plan4$", g, re.M)
    for k in range(1, 5):
        line = next(x for x in g.splitlines() if x.startswith(f"plan{k} ::="))
        ids, strs, accs = line.split("\\n")
        assert ids.count(" id") == k and strs.count(" str") == k and len(re.findall(r"acc\d", accs)) == k


def test_ids_and_references_are_bounded() -> None:
    g = workflow_grammar(pool_size=2, max_steps=3)
    assert 'id ::= "0" | "1"\n' in g
    assert 'ref2 ::= "0" | "1"\n' in g  # step 2 may see only steps 0 and 1
    assert 'acc0 ::= "[]"\n' in g  # step 0 sees nothing


def test_rejects_empty_pools() -> None:
    with pytest.raises(ValueError):
        workflow_grammar(pool_size=0, max_steps=5)


def test_access_lists_are_bounded_so_the_output_is_finite() -> None:
    g = workflow_grammar(pool_size=3, max_steps=4)
    assert "*" not in g and "+" not in g  # no unbounded repetition anywhere
    assert 'acc3 ::= "[]" | "\\"all\\"" | "[" ref3 (", " ref3){0,2} "]"' in g


@pytest.mark.parametrize(("pool_size", "max_steps", "chars"), [(3, 5, 240), (12, 5, 100), (2, 1, 16), (3, 12, 50)])
def test_max_plan_chars_bounds_the_longest_accepted_output(pool_size: int, max_steps: int, chars: int) -> None:
    """Build the longest string the grammar accepts by hand and check the bound covers it."""
    k = max_steps
    ids = ", ".join([str(pool_size - 1)] * k)
    subtasks = ", ".join(['"' + "x" * chars + '"'] * k)
    longest_access = ["[]"] + [max('"all"', "[" + ", ".join([str(i - 1)] * i) + "]", key=len) for i in range(1, k)]
    text = f"model_id = [{ids}]\nsubtasks = [{subtasks}]\naccess_list = [{', '.join(longest_access)}]"
    assert len(text) <= max_plan_chars(pool_size, max_steps, chars)
