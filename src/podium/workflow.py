"""The workflow: ordered steps of (worker, subtask, access list), as in docs/design.md, "The workflow format".

A workflow is what a conductor writes. Step ``i`` is done by pool worker ``worker`` (an index
into the ordered worker pool), receives the instruction ``subtask``, and may read the outputs of
the earlier steps its ``access`` grants: ``"all"`` (every earlier step), ``()`` (none) or explicit
earlier indices. The last step's output is the answer.

The storage form is JSON: ``{"steps": [{"worker": 2, "subtask": "...", "access": []}, ...]}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from podium.errors import PlanParseError

__all__ = ["ALL", "Access", "Step", "Workflow", "validate_lists"]

ALL: Literal["all"] = "all"
Access = Literal["all"] | tuple[int, ...]
"""An access list: ``"all"`` or a sorted tuple of earlier step indices (``()`` = none)."""


@dataclass(frozen=True)
class Step:
    """One step of a workflow.

    Attributes:
        worker: index of the worker in the pool (``Model <worker>`` to the conductor).
        subtask: the natural-language instruction the worker receives.
        access: ``"all"`` or the sorted earlier step indices whose (subtask, output) it sees.
    """

    worker: int
    subtask: str
    access: Access

    def visible(self, index: int) -> tuple[int, ...]:
        """Indices of the earlier steps this step (at position ``index``) may see."""
        if self.access == ALL:
            return tuple(range(index))
        return self.access

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "subtask": self.subtask, "access": _access_json(self.access)}


@dataclass(frozen=True)
class Workflow:
    """An ordered, validated sequence of steps. Build it with :func:`validate_lists`."""

    steps: tuple[Step, ...]

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def model_id(self) -> list[int]:
        return [s.worker for s in self.steps]

    @property
    def subtasks(self) -> list[str]:
        return [s.subtask for s in self.steps]

    @property
    def access_list(self) -> list[Any]:
        return [_access_json(s.access) for s in self.steps]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [s.to_json() for s in self.steps]}

    def lists_text(self) -> str:
        """The paper's surface form: the three list assignments, one per line."""
        import json

        return (
            f"model_id = {json.dumps(self.model_id)}\n"
            f"subtasks = {json.dumps(self.subtasks, ensure_ascii=False)}\n"
            f"access_list = {json.dumps(self.access_list)}"
        )


def _access_json(access: Access) -> Any:
    return ALL if access == ALL else list(access)


def validate_lists(
    model_id: Any,
    subtasks: Any,
    access_list: Any,
    *,
    pool_size: int,
    max_steps: int,
    allow_empty: bool = False,
) -> Workflow:
    """Turn the conductor's three lists into a :class:`Workflow`, strictly.

    Args:
        model_id, subtasks, access_list: the three lists as parsed (any Python values).
        pool_size: number of workers N; valid ids are 0..N-1.
        max_steps: the step limit (paper default 5).
        allow_empty: accept three empty lists (meaning "keep the previous answer" in a
            recursion round); otherwise they are an ``empty_workflow`` error.

    Raises PlanParseError with ``kind`` naming the first rule broken, checked in this order:
    empty_workflow, too_many_steps, length_mismatch, unknown_worker, invalid_subtask,
    invalid_access.
    """
    for name, value in (("model_id", model_id), ("subtasks", subtasks), ("access_list", access_list)):
        if not isinstance(value, list):
            raise PlanParseError("unparseable", f"{name} must be a list, got {type(value).__name__}")
    lengths = (len(model_id), len(subtasks), len(access_list))
    if lengths == (0, 0, 0):
        if allow_empty:
            return Workflow(steps=())
        raise PlanParseError("empty_workflow", "the workflow has no steps")
    if max(lengths) > max_steps:
        raise PlanParseError("too_many_steps", f"{max(lengths)} steps, the limit is {max_steps}")
    if len(set(lengths)) != 1:
        raise PlanParseError(
            "length_mismatch",
            f"model_id has {lengths[0]}, subtasks {lengths[1]}, access_list {lengths[2]} entries",
        )
    steps = []
    for index, (raw_id, raw_subtask, raw_access) in enumerate(zip(model_id, subtasks, access_list, strict=False)):
        worker = _worker_index(raw_id)
        if worker is None or not 0 <= worker < pool_size:
            raise PlanParseError(
                "unknown_worker",
                f"step {index}: {raw_id!r} is not a worker id (valid: 0..{pool_size - 1})",
            )
        if not isinstance(raw_subtask, str) or not raw_subtask.strip():
            raise PlanParseError("invalid_subtask", f"step {index}: subtask must be non-empty text")
        steps.append(Step(worker=worker, subtask=raw_subtask.strip(), access=_access(raw_access, index)))
    return Workflow(steps=tuple(steps))


def _worker_index(raw: Any) -> int | None:
    """Accept 2, "2" and "Model 2" (ASCII digits, at most 6 of them); reject everything else,
    "²", "①" and "٣" included."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        text = raw.strip().lower().removeprefix("model").strip()
        if text and len(text) <= 6 and text.isascii() and text.isdigit():
            return int(text)
    return None


def _access(raw: Any, index: int) -> Access:
    """Normalise one access entry for step ``index``; raises PlanParseError(invalid_access)."""
    if isinstance(raw, str) and raw.strip().lower() == ALL:
        return ALL
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str) and raw[0].lower() == ALL:
        return ALL
    if not isinstance(raw, list):
        raise PlanParseError("invalid_access", f"step {index}: access must be 'all' or a list, got {raw!r}")
    seen: set[int] = set()
    for item in raw:
        ref = _worker_index(item)  # same lenient int reading: 1 or "1"
        if ref is None or not 0 <= ref < index:
            raise PlanParseError(
                "invalid_access",
                f"step {index} may only see earlier steps 0..{index - 1}, got {item!r}",
            )
        seen.add(ref)
    return tuple(sorted(seen))
