"""The loop's settings: what ``podium loop run``'s options resolve to.

A folder remembers its settings in ``loop.json``: an option given on the command line is used
and remembered, an option left out takes the value the folder remembers, else its default — so
``podium loop run --dir loop`` alone resumes or repeats a loop set up once. A few settings are
**fixed** once the folder has them, because changing them would make the folder's files
inconsistent (:data:`FIXED`): giving another value is an error naming the one in use.

``--since``, ``--until``, ``--allow-unconfirmed`` and ``--allow-quality-drop`` apply to one run
only (:class:`RunOptions`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium._args import AUTO_CLUSTERS
from podium.errors import ConfigError

__all__ = ["FIXED", "PLANS_EMBEDDER", "RunOptions", "Settings", "resolve_settings"]

PLANS_EMBEDDER = "qwen2.5-coder-0.5b-instruct"
"""The question encoder of the shipped plan tables, and of a loop that trains plans (unless
``--embedder`` says otherwise)."""

FIXED: dict[str, str] = {
    "allow_pii": "the set's questions are pseudonymized or in clear, and one set must not mix them",
    "seed": "the matrix's train/test split was drawn with it, and a question must keep its split",
    "matrix_split": "the matrix's train/test split was drawn with it, and a question must keep its split",
    "pool": "the matrix's columns are its workers, and every row must have the same ones",
    "source": "the set's task ids come from it",
    "policy": "the gate compares the name's versions with each other on one source (the matrix, or the bank for plans)",
}
"""Settings a folder keeps once it has them, and why."""


@dataclass
class Settings:
    """Every remembered setting of a loop folder (``podium loop run --help`` says what each
    does; the field names are the options' without dashes)."""

    source: Literal["traces", "shadow"] = "traces"
    traces: str | None = None
    store: str | None = None
    tag: list[str] = field(default_factory=list)
    use_case: str | None = None
    status: str | None = None
    days: float = 7.0
    task_type: str = "open"
    candidate: str = "auto"
    similar: float | None = None
    similar_embedder: str = "hash"
    limit: int | None = None
    allow_pii: bool = False
    threshold: list[str] = field(default_factory=list)
    reference_since: str | None = None
    reference_until: str | None = None
    drift_judge_sample: int = 30
    judge: str | None = None
    pool: str | None = None
    eval_judge: str | None = None
    seed: int = 0
    matrix_split: float = 0.8
    cache: str | None = None
    concurrency: int | None = None
    bank: bool = False
    bank_pool: str = "local-tools"
    bank_catalogue: str | None = None
    step_timeout: float = 600.0
    name: str = "light"
    policy: Literal["light", "plans", "lm"] = "light"
    lam: float = 0.0
    mu: float = 0.0
    generations: int = 60
    popsize: int | None = None
    dims: int = 16
    clusters: int | None = None
    max_cost_ratio: float | None = None
    embedder: str | None = None
    max_steps: int = 3
    model: str | None = None
    steps: int | None = None
    preset: Literal["cpu", "paper"] = "cpu"
    max_quality_drop: float | None = None

    @property
    def encoder(self) -> str:
        """The question encoder: ``embedder``, else the policy's own — for plans the shipped plan
        table's (Qwen2.5-Coder-0.5B, an embedded model: no torch), for light MiniLM."""
        return self.embedder or (PLANS_EMBEDDER if self.policy == "plans" else "minilm")

    @property
    def table_clusters(self) -> int:
        """The plan table's clusters: ``clusters``, else the policy's own — for plans ``auto``
        (:data:`~podium._args.AUTO_CLUSTERS`, the shipped recipe), else 0 (no table)."""
        if self.clusters is not None:
            return self.clusters
        return AUTO_CLUSTERS if self.policy == "plans" else 0

    @property
    def grader(self) -> str | None:
        """The worker that grades open tasks in the eval: ``eval_judge``, else ``judge``."""
        return self.eval_judge or self.judge

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check(self) -> None:
        """ConfigError naming the option of a value out of its range (the commands check the
        rest: task type, candidate, thresholds, the window)."""
        from podium.eval.matrix import assign_splits

        for flag, value in (("--lam", self.lam), ("--mu", self.mu), ("--max-quality-drop", self.max_quality_drop)):
            if value is not None and not value >= 0:
                raise ConfigError(f"{flag} must be ≥ 0, got {value}")
        from podium.registry import parse_ref

        if parse_ref(self.name)[1] is not None:  # a bad name fails here, not at the train stage
            raise ConfigError(
                f"--name {self.name!r}: a conductor's name, without a version (e.g. {self.name.split('@')[0]})"
            )
        if not self.step_timeout > 0:
            raise ConfigError(f"--step-timeout must be > 0 seconds, got {self.step_timeout}")
        if not self.days > 0:  # checked even when this run's window is given or resumed: it is remembered
            raise ConfigError(f"--days must be positive, got {self.days}")
        if self.source not in ("traces", "shadow"):
            raise ConfigError(f"--source {self.source!r}: use traces or shadow")
        if self.policy not in ("light", "plans", "lm"):
            raise ConfigError(f"--policy {self.policy!r}: use light, plans or lm")
        if self.preset not in ("cpu", "paper"):
            raise ConfigError(f"--preset {self.preset!r}: use cpu or paper")
        lm_only = [f for f, v in (("--model", self.model), ("--steps", self.steps)) if v is not None]
        lm_only += ["--preset paper"] if self.preset == "paper" else []
        if lm_only and self.policy != "lm":
            raise ConfigError(
                f"{', '.join(lm_only)}: options of the LM conductor's training, and this loop trains --policy "
                f"{self.policy}: drop them, or use --policy lm in a new --dir"
            )
        if self.policy == "plans" and not self.bank:
            raise ConfigError(
                "--policy plans trains the plan conductor on the workflow bank's outcomes: add --bank, which records "
                "the set's questions into DIR/bank"
            )
        if (self.clusters or self.max_cost_ratio is not None) and self.policy != "plans":
            raise ConfigError(
                "--clusters and --max-cost-ratio shape the plan conductor's table: use them with --policy plans"
            )
        if self.max_cost_ratio is not None and not self.table_clusters:
            raise ConfigError(
                "--max-cost-ratio caps a cluster table, and --clusters 0 asks for the linear head: drop "
                "--max-cost-ratio, or give --clusters auto (or a number)"
            )
        if self.similar is not None and not 0 < self.similar <= 1:
            raise ConfigError(f"--similar {self.similar}: give a cosine similarity in (0, 1], e.g. 0.95")
        assign_splits((), self.matrix_split)


@dataclass(frozen=True)
class RunOptions:
    """What applies to this run only."""

    since: str | None = None
    until: str | None = None
    allow_unconfirmed: bool = False
    allow_quality_drop: bool = False


_PATHS = ("traces", "store")
"""Settings that name a file: remembered as absolute paths, so a later run from another folder
reads the same file."""


_CLEARABLE = ("judge", "eval_judge", "reference_since", "reference_until")
"""Settings whose remembered value ``none`` on the command line clears (back to the default)."""


def _path_like(value: str) -> bool:
    """A pool or cache value that names a file (rather than a preset name or a URL)."""
    return "://" not in value and (Path(value).exists() or "/" in value or value.endswith((".toml", ".sqlite3")))


def resolve_settings(stored: dict[str, Any], given: argparse.Namespace) -> Settings:
    """The settings of a run: ``given`` (the options given on the command line; None = not given)
    over ``stored`` (the folder's) over the defaults. Raises ConfigError for a fixed setting
    given another value than the folder's, or a remembered value that is not a setting."""
    defaults = Settings()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Settings):
        value = getattr(given, f.name, None)
        if value is not None:
            if f.name in _PATHS or (f.name in ("pool", "cache") and _path_like(str(value))):
                value = str(Path(value).expanduser().resolve())
            if f.name in _CLEARABLE and str(value).lower() == "none":
                value = None
            if f.name in FIXED and f.name in stored and stored[f.name] != value:
                flag = "--" + f.name.replace("_", "-")
                kept = stored[f.name]
                shown = "the embedded local pool (the default)" if f.name == "pool" and kept is None else repr(kept)
                raise ConfigError(
                    f"{flag} {value}: this loop folder uses {shown} ({FIXED[f.name]}); drop the option, "
                    "or start another loop in a new --dir"
                )
            values[f.name] = value
        elif f.name in stored:
            values[f.name] = stored[f.name]
        else:
            values[f.name] = getattr(defaults, f.name)
    try:
        return Settings(**values)
    except TypeError as exc:  # pragma: no cover - a hand-edited loop.json
        raise ConfigError(f"loop.json settings: {exc}") from None
