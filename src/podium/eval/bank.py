"""The workflow outcome bank: recorded outcomes of role steps, as an extended outcome matrix.

RouterBench's outcome matrix (docs/eval.md, "Replay pools") has one column per model. A bank has one column per
**step** of a catalogue (:class:`~podium.conductor.compose.Column`: a role on a worker, seeing
other columns), so every workflow composed of those steps — a single worker, program-aided
reasoning, solve → verify, k samples + vote, a cascade — replays exactly, and is scored by the
recorded score of the answer it selects (:mod:`podium.eval.plans`).

Files (``DIR`` is the bank's folder):

* ``DIR/matrix.csv`` — RouterBench's columns ``sample_id, eval_name, split, prompt``, then per
  column ``c``: ``c`` (the verifier's score of the step's output as the answer, in [0, 1]),
  ``c|model_response`` (the output), ``c|total_cost`` (USD of the column's whole sub-workflow)
  and ``c|latency_s`` (its critical path, seconds) — so any RouterBench tool reads each column as
  a "model" that is a workflow — plus podium's step fields ``c|step_cost`` (USD of this step
  alone), ``c|step_latency_s``, ``c|input_tokens``, ``c|output_tokens``,
  ``c|cached_input_tokens``, ``c|finish_reason`` and ``c|error`` (empty when the step ran);
* ``DIR/workflows.json`` — the sidecar: the bank's pool, and every column's definition (worker,
  role, the columns it sees and runs after) and its sub-workflow in the ordinary workflow
  format (worker names instead of indices).

Rows are appended one question at a time by ``podium bank record`` (:mod:`podium.eval.record`),
so a bank grows, resumes after an interruption and can be committed in pieces.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.conductor.catalogue import local_columns
from podium.conductor.compose import Column, sub_workflow
from podium.errors import ConfigError
from podium.roles import ROLES

__all__ = [
    "CATALOGUES",
    "FIXED",
    "STEP_FIELDS",
    "Bank",
    "Catalogue",
    "MergeResult",
    "column_order",
    "is_bank",
    "local_catalogue",
    "merge_banks",
    "read_bank",
    "read_rows",
    "write_rows",
    "write_sidecar",
]

FIXED = ("sample_id", "eval_name", "split", "prompt")
STEP_FIELDS = (
    "model_response",
    "total_cost",
    "latency_s",
    "step_cost",
    "step_latency_s",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "finish_reason",
    "error",
)
"""The ``c|field`` columns per bank column, after the score column ``c``."""


@dataclass(frozen=True)
class Catalogue:
    """The columns a bank records, in recording order (every column after those it needs).

    Attributes:
        name: e.g. ``"local"``.
        columns: by id, in recording order.
    """

    name: str
    columns: dict[str, Column]

    def header(self) -> list[str]:
        """The matrix's CSV header."""
        names = list(FIXED)
        for cid in self.columns:
            names += [cid, *(f"{cid}|{f}" for f in STEP_FIELDS)]
        return names

    def workers(self) -> list[str]:
        """The pool workers the catalogue uses, in first-use order."""
        return list(dict.fromkeys(c.worker for c in self.columns.values()))

    def sidecar(self) -> dict[str, Any]:
        """The ``workflows.json`` document."""
        return {
            "format": "podium workflow bank",
            "version": 1,
            "catalogue": self.name,
            "workers": self.workers(),
            "columns": {
                cid: {
                    **col.to_json(),
                    "workflow": [
                        {
                            "column": sid,
                            "worker": self.columns[sid].worker,
                            "subtask": ROLES[self.columns[sid].role].subtask,
                            "access": [sub.index(x) for x in self.columns[sid].sees],
                        }
                        for sub in [sub_workflow(cid, self.columns)]
                        for sid in sub
                    ],
                }
                for cid, col in self.columns.items()
            },
        }

    @classmethod
    def from_sidecar(cls, data: Mapping[str, Any], where: str) -> Catalogue:
        """Read a ``workflows.json`` document; ConfigError naming ``where`` when malformed."""
        try:
            if data.get("format") != "podium workflow bank":
                raise ValueError("not a podium workflow bank sidecar")
            columns = {
                str(cid): Column(
                    str(cid),
                    str(spec["worker"]),
                    spec["role"],
                    tuple(str(s) for s in spec.get("sees", ())),
                    tuple(str(s) for s in spec.get("after", ())),
                )
                for cid, spec in data["columns"].items()
            }
            for col in columns.values():
                if col.role not in ROLES:
                    raise ValueError(f"column {col.id!r}: unknown role {col.role!r}")
                for dep in (*col.sees, *col.after):
                    if dep not in columns:
                        raise ValueError(f"column {col.id!r} depends on unknown column {dep!r}")
            return cls(str(data["catalogue"]), columns)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{where}: malformed bank sidecar ({exc})") from None


CATALOGUES = ("local", "local-checked")
"""The catalogues ``podium bank record`` knows: ``local-checked`` is ``local`` and a ``check``
step of four answers (:data:`podium.conductor.catalogue.CHECKED`)."""


def local_catalogue(samples: tuple[int, int] = (5, 3), name: str = "local") -> Catalogue:
    """The catalogue ``name`` (one of :data:`CATALOGUES`) recorded on the embedded local pool:
    the steps of :func:`podium.conductor.catalogue.local_columns` (``samples``; checks for
    ``local-checked``). Raises ConfigError for another name."""
    if name not in CATALOGUES:
        raise ConfigError(f"unknown catalogue {name!r}; known: {', '.join(CATALOGUES)}")
    return Catalogue(name, local_columns(samples, checks=name == "local-checked"))


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of a bank matrix; ([], []) when the file does not exist yet.

    Raises ConfigError when it cannot be read as CSV."""
    if not path.exists():
        return [], []
    csv.field_size_limit(1 << 27)
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read bank matrix {path}: {exc}") from None


def write_rows(path: Path, header: Sequence[str], rows: Sequence[Mapping[str, str]]) -> None:
    """Write a whole bank matrix at ``path`` atomically (a temporary file beside it, then
    renamed over it): a reader sees the old file or the new one, never half of one."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(header))
    writer.writeheader()
    writer.writerows(rows)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text.getvalue(), encoding="utf-8", newline="")
    os.replace(tmp, path)


def write_sidecar(folder: Path, catalogue: Catalogue) -> None:
    """Write ``workflows.json``; ConfigError when one exists for another catalogue."""
    path = folder / "workflows.json"
    doc = catalogue.sidecar()
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        if old.get("columns") != doc["columns"]:
            raise ConfigError(f"{path} describes other columns than catalogue {catalogue.name!r}: use another --out")
        return
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def column_order(catalogue: Catalogue) -> Sequence[str]:
    """Columns in recording order (each after everything it depends on)."""
    order: list[str] = []
    for cid in catalogue.columns:
        for dep in sub_workflow(cid, catalogue.columns):
            if dep not in order:
                order.append(dep)
    return order


@dataclass(frozen=True)
class Bank:
    """A recorded bank: its catalogue (from the sidecar) and its matrix rows.

    Attributes:
        path: the bank's folder.
        catalogue: the columns.
        rows: the matrix rows, as read (strings), in file order.
    """

    path: Path
    catalogue: Catalogue
    rows: list[dict[str, str]]

    def column_stats(self) -> dict[str, dict[str, float]]:
        """Per column: mean ``score``, ``total_cost`` (USD), ``latency_s`` and the number of
        ``errors`` over the rows."""
        stats: dict[str, dict[str, float]] = {}
        n = max(len(self.rows), 1)
        for cid in self.catalogue.columns:
            stats[cid] = {
                "score": sum(float(r[cid]) for r in self.rows) / n,
                "total_cost": sum(float(r[f"{cid}|total_cost"]) for r in self.rows) / n,
                "latency_s": sum(float(r[f"{cid}|latency_s"]) for r in self.rows) / n,
                "errors": sum(1 for r in self.rows if r[f"{cid}|error"]),
            }
        return stats


def is_bank(path: Path) -> bool:
    """Whether ``path`` is a workflow bank: a folder, or its ``matrix.csv``, beside ``workflows.json``."""
    return ((path if path.is_dir() else path.parent) / "workflows.json").is_file()


def read_bank(path: Path) -> Bank:
    """Load a bank folder (or its ``matrix.csv``).

    Raises ConfigError when the folder, the sidecar or the matrix is missing or malformed, or
    the matrix's header does not match the sidecar's columns."""
    folder = path.parent if path.name == "matrix.csv" else path
    sidecar = folder / "workflows.json"
    if not sidecar.is_file():
        raise ConfigError(f"{folder} is not a workflow bank: no workflows.json (record one with podium bank record)")
    try:
        doc = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {sidecar}: {exc}") from None
    catalogue = Catalogue.from_sidecar(doc, str(sidecar))
    header, rows = read_rows(folder / "matrix.csv")
    if not header:
        raise ConfigError(f"{folder / 'matrix.csv'} does not exist or is empty")
    if header != catalogue.header():
        raise ConfigError(f"{folder / 'matrix.csv'}: its columns do not match {sidecar}")
    return Bank(folder, catalogue, rows)


def _listed(sample_id: str, ids: Collection[str]) -> bool:
    """Whether ``sample_id`` is one of ``ids`` or ends in one of them after a ``/`` (a regression
    set's ``shift/math/gsm8k/test/7`` is the benchmark's ``gsm8k/test/7``)."""
    parts = sample_id.split("/")
    return any("/".join(parts[i:]) in ids for i in range(len(parts)))


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge_banks` wrote: ``rows`` kept, and per reason the rows left out
    (``split``: another split; ``excluded``: an id in the exclusion lists; ``duplicate``: the same
    question, by its text, as a row kept before it)."""

    rows: int
    left_out: dict[str, int]


def merge_banks(
    banks: Sequence[Path], out: Path, *, split: str | None = None, exclude: Collection[str] = ()
) -> MergeResult:
    """Write a new bank at ``out`` whose rows are those of ``banks``, in order, each with its split
    as recorded: only rows of ``split`` when given, none whose id is listed in ``exclude`` (or
    ends with a listed id after a ``/``), and each question once (by its text; the first row wins).

    Every bank must have the same catalogue (the sidecars' columns); ``out`` gets that sidecar and
    its ``matrix.csv``, written atomically. Raises ConfigError when a bank cannot be read, the
    catalogues differ, ``out`` already holds a matrix (a merge never appends to or overwrites a
    bank) or no row is left."""
    if not banks:
        raise ConfigError("give at least one bank to merge")
    read = [read_bank(path) for path in banks]
    first = read[0]
    for bank in read[1:]:
        if bank.catalogue.sidecar()["columns"] != first.catalogue.sidecar()["columns"]:
            raise ConfigError(
                f"{bank.path} has other columns than {first.path}: banks merge only when recorded with one catalogue"
            )
    target = out / "matrix.csv"
    if target.exists():
        raise ConfigError(f"{target} exists: merge into a new folder (a merge never changes a bank)")
    kept: list[dict[str, str]] = []
    seen: set[str] = set()
    left_out = {"split": 0, "excluded": 0, "duplicate": 0}
    for bank in read:
        for row in bank.rows:
            if split is not None and row["split"] != split:
                left_out["split"] += 1
            elif exclude and _listed(row["sample_id"], exclude):
                left_out["excluded"] += 1
            elif row["prompt"] in seen:
                left_out["duplicate"] += 1
            else:
                seen.add(row["prompt"])
                kept.append(row)
    if not kept:
        raise ConfigError(f"no row left to merge ({', '.join(f'{n} {k}' for k, n in left_out.items())} left out)")
    write_sidecar(out, first.catalogue)
    write_rows(target, first.catalogue.header(), kept)
    return MergeResult(len(kept), left_out)
