"""A GBNF grammar (llama.cpp) that makes every constrained conductor output a valid workflow.

The grammar enumerates one alternative per workflow length ``k = 1..max_steps``; each
alternative writes the paper's three lists with exactly ``k`` entries each. llama.cpp keeps all
alternatives alive while sampling and drops those that stop matching, so once ``model_id`` is
closed after ``k`` ids only the ``k``-step alternative remains. By construction:

- the three lists have equal length (1..max_steps, never empty);
- every id is ``0..pool_size-1``;
- access entry ``i`` is ``[]``, ``"all"`` (only for ``i > 0``) or indices ``< i``;
- subtasks are non-empty double-quoted strings without raw newlines.
"""

from __future__ import annotations

__all__ = ["workflow_grammar"]


def _alts(values: list[str]) -> str:
    return " | ".join(f'"{v}"' for v in values)


def workflow_grammar(pool_size: int, max_steps: int) -> str:
    """GBNF for the three lists of a ``1..max_steps``-step workflow over ``pool_size`` workers.

    Raises ValueError for a pool_size or max_steps below 1.
    """
    if pool_size < 1 or max_steps < 1:
        raise ValueError("pool_size and max_steps must be at least 1")
    rules = [
        "root ::= " + " | ".join(f"plan{k}" for k in range(1, max_steps + 1)),
        "id ::= " + _alts([str(i) for i in range(pool_size)]),
        'str ::= "\\"" [^"\\\\\\n]+ "\\""',
        'acc0 ::= "[]"',
    ]
    for i in range(1, max_steps):
        rules.append(f"ref{i} ::= " + _alts([str(j) for j in range(i)]))
        rules.append(f'acc{i} ::= "[]" | "\\"all\\"" | "[" ref{i} (", " ref{i})* "]"')
    for k in range(1, max_steps + 1):
        ids = ' ", " '.join(["id"] * k)
        strs = ' ", " '.join(["str"] * k)
        accs = ' ", " '.join(f"acc{i}" for i in range(k))
        rules.append(f'plan{k} ::= "model_id = [" {ids} "]\\nsubtasks = [" {strs} "]\\naccess_list = [" {accs} "]"')
    return "\n".join(rules) + "\n"
