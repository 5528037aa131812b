"""A GBNF grammar (llama.cpp) that makes every constrained conductor output a valid workflow.

The grammar enumerates one alternative per workflow length ``k = 1..max_steps``; each
alternative writes the paper's three lists with exactly ``k`` entries each. llama.cpp keeps all
alternatives alive while sampling and drops those that stop matching, so once ``model_id`` is
closed after ``k`` ids only the ``k``-step alternative remains. By construction:

- the three lists have equal length (1..max_steps, never empty);
- every id is ``0..pool_size-1``;
- access entry ``i`` is ``[]``, ``"all"`` (only for ``i > 0``) or at most ``i`` indices ``< i``;
- subtasks are double-quoted strings of 1..``subtask_chars`` characters without raw newlines —
  or, with ``subtasks`` given (the role templates of :mod:`podium.roles`), exactly one of those
  strings, so every step is a step a workflow bank can replay —, so the whole output has at most
  :func:`max_plan_chars` characters, and since a token covers at least one character, a token
  budget that large can never truncate it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["choice_grammar", "max_plan_chars", "workflow_grammar"]


def _alts(values: list[str]) -> str:
    return " | ".join(f'"{v}"' for v in values)


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal (quotes, backslashes and line breaks escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def workflow_grammar(
    pool_size: int,
    max_steps: int,
    subtask_chars: int = 240,
    *,
    allow_empty: bool = False,
    subtasks: Sequence[str] | None = None,
) -> str:
    """GBNF for the three lists of a ``1..max_steps``-step workflow over ``pool_size`` workers,
    each subtask at most ``subtask_chars`` characters, or one of ``subtasks`` when given; with
    ``allow_empty`` (recursion rounds) also the three empty lists that keep the previous answer.

    Raises ValueError for a pool_size, max_steps or subtask_chars below 1, an empty ``subtasks``
    or one with a newline or a double quote.
    """
    if pool_size < 1 or max_steps < 1 or subtask_chars < 1:
        raise ValueError("pool_size, max_steps and subtask_chars must be at least 1")
    if subtasks is not None:
        if not subtasks or any("\n" in t or '"' in t for t in subtasks):
            raise ValueError("subtasks must be one or more one-line texts without double quotes")
        body = " | ".join(_literal(t) for t in subtasks)
        text_rule = f'str ::= "\\"" ( {body} ) "\\""'
    else:
        text_rule = f'str ::= "\\"" [^"\\\\\\n]{{1,{subtask_chars}}} "\\""'
    rules = [
        "root ::= " + " | ".join(f"plan{k}" for k in range(0 if allow_empty else 1, max_steps + 1)),
        "id ::= " + _alts([str(i) for i in range(pool_size)]),
        text_rule,
        'acc0 ::= "[]"',
    ]
    for i in range(1, max_steps):
        rules.append(f"ref{i} ::= " + _alts([str(j) for j in range(i)]))
        more = f' (", " ref{i}){{0,{i - 1}}}' if i > 1 else ""
        rules.append(f'acc{i} ::= "[]" | "\\"all\\"" | "[" ref{i}{more} "]"')
    if allow_empty:
        rules.append('plan0 ::= "model_id = []\\nsubtasks = []\\naccess_list = []"')
    for k in range(1, max_steps + 1):
        ids = ' ", " '.join(["id"] * k)
        strs = ' ", " '.join(["str"] * k)
        accs = ' ", " '.join(f"acc{i}" for i in range(k))
        rules.append(f'plan{k} ::= "model_id = [" {ids} "]\\nsubtasks = [" {strs} "]\\naccess_list = [" {accs} "]"')
    return "\n".join(rules) + "\n"


def choice_grammar(choices: Sequence[str]) -> str:
    """GBNF whose ``root`` is exactly one of ``choices`` (whole texts, e.g. the three lists of
    each workflow a bank can replay: :func:`podium.conductor.catalogue.plan_lists`).

    Raises ValueError for no choice."""
    if not choices:
        raise ValueError("no workflow to choose from")
    return "root ::= " + " | ".join(_literal(c) for c in choices) + "\n"


def max_plan_chars(pool_size: int, max_steps: int, subtask_chars: int = 240) -> int:
    """An upper bound on the length, in characters, of any string :func:`workflow_grammar` accepts."""
    id_chars = len(str(pool_size - 1))
    ref_chars = len(str(max(max_steps - 2, 0)))
    labels = len("model_id = [") + len("]\nsubtasks = [") + len("]\naccess_list = [") + 1
    per_step = id_chars + (subtask_chars + 2) + max(len('"all"'), 2 + max_steps * (ref_chars + 2)) + 3 * 2
    return labels + max_steps * per_step
