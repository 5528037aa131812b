"""The conductor registry: trained conductors, versioned, with their config, data and eval reports.

Layout under ``<data dir>/conductors/`` (``PODIUM_HOME``, default ``~/.local/share/podium``)::

    <name>/v<N>/policy.npz        the trained parameters
    <name>/v<N>/train.json        config, data, per-generation history
    <name>/v<N>/learning-curve.png
    <name>/v<N>/eval/             held-out eval reports (``podium conductor eval``)
    <name>/promotions.jsonl       every promotion and rollback, in order (UTC ISO 8601)

Promotions form a stack: a promotion pushes a version, a rollback pops the current one so the
version promoted before it is current again. Both are appended to ``promotions.jsonl``; nothing is
ever deleted.

Promotion rule (``podium conductor promote``, :func:`promotion_verdict`): a candidate is promoted
when its held-out reward beats the current promoted version's (or, for a name never promoted, the
best single worker's) **and** its quality, on the same questions, is not more than a margin
(:data:`QUALITY_MARGIN` by default) below the current promoted version's — reward alone trades
quality for cost, so a cheaper candidate could otherwise lower quality without anyone deciding
to. Only an explicit override promotes past the quality guard; the promotion log says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium.errors import ConfigError
from podium.records import utc_now
from podium.trace import data_dir

__all__ = [
    "QUALITY_MARGIN",
    "Policy",
    "Registry",
    "TrainingInfo",
    "Verdict",
    "Version",
    "parse_ref",
    "promotion_verdict",
]

QUALITY_MARGIN = 0.01
"""The most mean quality (absolute, on a 0–1 score) a candidate may lose against the current
promoted version and still be promoted without an override: on a few hundred held-out questions
this is noise, more is a decision someone should make."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@vN`` → (name, N or None). Raises ConfigError for a malformed ref."""
    name, _, version = ref.partition("@")
    if not _NAME.match(name):
        raise ConfigError(f"conductor name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    if not version:
        return name, None
    if not re.fullmatch(r"v?\d+", version):
        raise ConfigError(f"conductor version {version!r}: write NAME@vN, e.g. {name}@v2")
    return name, int(version.lstrip("v"))


Policy = Literal["light", "lm", "plans"]
_POLICIES: tuple[Policy, ...] = ("light", "lm", "plans")
_COMMON = ("policy", "config", "data", "history")


@dataclass(frozen=True)
class TrainingInfo:
    """What a version's ``train.json`` says of its training: the one record ``podium train``
    writes (every policy) and ``podium conductor``, the UI and promotion read.

    Attributes:
        policy: ``light`` (CMA-ES), ``lm`` (GRPO + LoRA) or ``plans`` (the plan conductor).
        config: the training settings as given (``lam``: the cost penalty λ, 1/USD).
        data: what it was trained on (e.g. ``matrix``, ``split``, ``tags``, ``questions``).
        history: one entry per generation (light) or logged step (lm), oldest first.
        extra: what only one policy records (``adapter_gguf`` and ``warm_start_loss`` of lm,
            ``best_generation`` of light, ``cross_validation`` and ``curve`` of plans, …).
    """

    policy: Policy
    config: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    history: Sequence[Mapping[str, Any]] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def lam(self) -> float:
        """The training's cost penalty λ (1/USD; 0 when it recorded none)."""
        value = self.config.get("lam")
        return float(value) if isinstance(value, int | float) else 0.0

    @property
    def base_model(self) -> str:
        """An LM conductor's base model (``config.model``; "" when it recorded none)."""
        return str(self.config.get("model") or "")

    @property
    def adapter_gguf(self) -> Mapping[str, Any] | None:
        """An LM conductor's exported llama.cpp adapter (``file``, ``sha256``, ``base_model``,
        …), or None before a successful export."""
        value = self.extra.get("adapter_gguf")
        return value if isinstance(value, Mapping) and value else None

    @property
    def adapter_gguf_error(self) -> str | None:
        """Why the export after training failed, when it did."""
        value = self.extra.get("adapter_gguf_error")
        return str(value) if value else None

    @property
    def embedder(self) -> str | None:
        """The question encoder the policy was trained with: the loop's choice
        (``data.embedder_choice``, plans) or the encoder's id (``data.embedder``, light)."""
        value = self.data.get("embedder_choice") or self.data.get("embedder")
        return str(value) if value is not None else None

    def to_json(self) -> dict[str, Any]:
        """The ``train.json`` object: the four common fields, then ``extra``'s."""
        common = {"policy": self.policy, "config": dict(self.config), "data": dict(self.data)}
        return {**common, "history": [dict(h) for h in self.history], **self.extra}

    @classmethod
    def from_json(cls, stored: object, *, where: str = "train.json") -> TrainingInfo:
        """Read a ``train.json`` object; a version trained before the field existed has no
        ``policy`` and is ``light``. Raises ConfigError naming ``where`` for what is not one."""
        if not isinstance(stored, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(stored).__name__}")
        policy = stored.get("policy", "light")
        if policy not in _POLICIES:
            raise ConfigError(f"{where}: unknown policy {policy!r} (expected {', '.join(_POLICIES)})")
        config, data, history = stored.get("config", {}), stored.get("data", {}), stored.get("history", [])
        if not isinstance(config, dict) or not isinstance(data, dict) or not isinstance(history, list):
            raise ConfigError(f"{where}: config and data must be objects and history a list")
        extra = {k: v for k, v in stored.items() if k not in _COMMON}
        return cls(policy, config, data, [h for h in history if isinstance(h, dict)], extra)


@dataclass(frozen=True)
class Version:
    """One stored version: ``name@v<number>`` in ``path``."""

    name: str
    number: int
    path: Path

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.number}"

    @property
    def policy_path(self) -> Path:
        return self.path / "policy.npz"

    def training(self) -> TrainingInfo:
        """The stored ``train.json`` (absent: an empty ``light`` record, as a policy file copied
        in by hand has). Raises ConfigError for one that is not valid JSON or not a training
        record."""
        file = self.path / "train.json"
        if not file.is_file():
            return TrainingInfo("light")
        try:
            stored = json.loads(file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{file}: not valid JSON ({exc})") from None
        return TrainingInfo.from_json(stored, where=str(file))

    def write_training(self, info: TrainingInfo) -> None:
        """Store ``info`` as this version's ``train.json`` (replacing it)."""
        (self.path / "train.json").write_text(json.dumps(info.to_json(), indent=1) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate is promoted, and the one line that says why.

    Attributes:
        promote: promote it.
        line: the reason, one line, naming the figures it compared.
        quality_drop: how much lower its quality is than the compared one's (negative: higher).
        guarded: the quality guard applied (against a promoted version, or a margin was given).
        overridden: promoted only because the operator overrode the quality guard.
    """

    promote: bool
    line: str
    quality_drop: float
    guarded: bool
    overridden: bool = False


def promotion_verdict(
    *,
    candidate: str,
    against: str,
    against_promoted: bool,
    reward: tuple[float, float],
    quality: tuple[float, float],
    questions: int,
    margin: float | None = None,
    override: bool = False,
) -> Verdict:
    """The promotion rule of the module docstring.

    Args:
        candidate, against: their names (``light@v3``, ``single:qwen-1.5b``).
        against_promoted: ``against`` is the currently promoted version (the quality guard then
            applies by default).
        reward, quality: (candidate, against) held-out mean reward and mean quality, measured on
            the same ``questions`` questions.
        margin: the most quality the candidate may lose; None: :data:`QUALITY_MARGIN` against a
            promoted version, no guard against a single worker.
        override: promote even if the quality guard fails (never past a reward that does not beat).
    """
    (r_new, r_old), (q_new, q_old) = reward, quality
    limit = margin if margin is not None else (QUALITY_MARGIN if against_promoted else None)
    drop = q_old - q_new
    on = f"on the same {questions} questions"
    if r_new <= r_old:
        line = (
            f"not promoted: {candidate}'s reward {r_new:.4f} does not beat {against}'s {r_old:.4f} "
            f"(quality {q_new:.4f} vs {q_old:.4f}; {on})"
        )
        return Verdict(False, line, drop, limit is not None)
    if limit is not None and drop > limit + 1e-12:
        lost = (
            f"{candidate}'s quality {q_new:.4f} is {drop:.4f} below {against}'s {q_old:.4f} "
            f"(more than the {limit:g} allowed)"
        )
        if override:
            line = f"promoted despite the quality guard (--allow-quality-drop): {lost}; its reward {r_new:.4f} "
            return Verdict(True, line + f"beats {r_old:.4f} ({on})", drop, True, True)
        line = (
            f"not promoted: {lost} {on}, although its reward {r_new:.4f} beats {r_old:.4f}; to promote anyway "
            "pass --allow-quality-drop (or set the margin with --max-quality-drop)"
        )
        return Verdict(False, line, drop, True)
    if limit is None:
        guard = f"quality {q_new:.4f} vs {q_old:.4f}, no quality guard as {against} is no promoted version"
    else:
        guard = f"its quality {q_new:.4f} is within {limit:g} of {q_old:.4f}"
    line = f"promoted: {candidate}'s reward {r_new:.4f} beats {against}'s {r_old:.4f} and {guard} ({on})"
    if limit is None:
        line = f"promoted: {candidate}'s reward {r_new:.4f} beats {against}'s {r_old:.4f} ({guard}; {on})"
    return Verdict(True, line, drop, limit is not None)


class Registry:
    """Trained conductors on disk (see the module docstring).

    Args:
        root: the registry folder (default ``<data dir>/conductors``).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or data_dir() / "conductors"

    def create(self, name: str) -> Version:
        """A new, empty version folder ``name@v<next>``."""
        parse_ref(name)
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        number = max((v.number for v in self.versions(name)), default=0) + 1
        path = folder / f"v{number}"
        path.mkdir()
        return Version(name, number, path)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def versions(self, name: str) -> list[Version]:
        folder = self.root / name
        if not folder.is_dir():
            return []
        found = [Version(name, int(p.name[1:]), p) for p in folder.iterdir() if re.fullmatch(r"v\d+", p.name)]
        return sorted(found, key=lambda v: v.number)

    def get(self, ref: str, *, bare: str = "promoted") -> Version:
        """``NAME@vN``, or for a bare ``NAME`` its promoted version (else its latest) — or, with
        ``bare="latest"``, its latest version.

        Raises ConfigError naming the known versions when there is no such version."""
        name, number = parse_ref(ref)
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none yet (train one: podium train)"
            raise ConfigError(f"no conductor named {name!r} in {self.root}; known: {known}")
        if number is None:
            promoted = self.promoted(name) if bare == "promoted" else None
            return promoted if promoted is not None else versions[-1]
        for version in versions:
            if version.number == number:
                return version
        raise ConfigError(f"{name} has no v{number}; versions: {', '.join(v.ref for v in versions)}")

    def history(self, name: str) -> list[dict[str, Any]]:
        """Promotions and rollbacks of ``name``, oldest first."""
        file = self.root / name / "promotions.jsonl"
        if not file.is_file():
            return []
        return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]

    def _stack(self, name: str) -> list[int]:
        """Promoted versions as a stack: a promotion pushes, a rollback pops."""
        stack: list[int] = []
        for entry in self.history(name):
            if entry["action"] == "promote":
                stack.append(int(entry["version"]))
            elif stack:
                stack.pop()
        return stack

    def promoted(self, name: str) -> Version | None:
        stack = self._stack(name)
        return self.get(f"{name}@v{stack[-1]}") if stack else None

    def promote(self, version: Version, *, evidence: dict[str, Any]) -> None:
        """Record ``version`` as promoted, with the evaluation that justified it."""
        self._log(version.name, {"action": "promote", "version": version.number, "at": utc_now(), **evidence})

    def rollback(self, name: str) -> Version:
        """Undo the latest promotion: the version promoted before it is current again.
        Raises ConfigError for an unknown name, or when there is no earlier promotion to
        return to (the message names the version to pin instead)."""
        latest = self.get(name, bare="latest")  # an unknown name: "no conductor named …; known: …"
        stack = self._stack(name)
        if len(stack) < 2:
            kind = "lm" if latest.training().policy == "lm" else "light"
            state = (
                f"v{stack[-1]} is its first promotion, so there is no earlier one to return to"
                if stack
                else f"it was never promoted (a serving configuration naming it serves its latest, v{latest.number})"
            )
            raise ConfigError(
                f"cannot roll back {name}: {state}; to serve another version, pin it in the serving configuration "
                f'(serve.toml: conductor = "{kind}:{name}@vN"), or serve "fallback" or "pipeline"'
            )
        target = self.get(f"{name}@v{stack[-2]}")
        self._log(name, {"action": "rollback", "version": target.number, "from": stack[-1], "at": utc_now()})
        return target

    def _log(self, name: str, entry: dict[str, Any]) -> None:
        file = self.root / name / "promotions.jsonl"
        with file.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
