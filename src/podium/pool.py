"""Pool files: the ordered workers, the conductor and the fallback pipeline (TOML).

A pool file is validated at the edge (pydantic, unknown keys rejected) and merged in one place:
``[defaults]`` < ``[[workers]]`` entry. The packaged default is ``podium/pools/local.toml``, the
embedded local pool. See ``docs/pool-file.md`` for every field.

Example::

    name = "local"
    max_steps = 5

    [conductor]
    worker = "qwen-1.5b"

    [fallback]
    worker = "qwen-1.5b"

    [[workers]]
    name = "qwen-1.5b"
    backend = "llama_cpp"
    model = "qwen2.5-coder-1.5b-instruct"
    price = { input = 0.33, output = 1.11 }
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator

from podium.errors import ConfigError
from podium.local_models import EMBEDDED_MODELS
from podium.pii.vault import ENTITY_TYPES

__all__ = [
    "PRICE_TABLE",
    "PRICE_TABLE_AS_OF",
    "ConductorConfig",
    "DecodingConfig",
    "FallbackConfig",
    "LimitsConfig",
    "PIIConfig",
    "PoolConfig",
    "PriceConfig",
    "ResilienceConfig",
    "TelemetryConfig",
    "TracesConfig",
    "WorkerConfig",
    "load_pool",
    "packaged_pools",
]


_REMOTE = ("openai", "anthropic", "gemini")
"""Backends that call a provider over the network (priced from the table when unpriced)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_Number = Annotated[float, Strict()]
"""A number of a pool file: a TOML integer or float, never a string or a boolean, and finite
(``inf``, ``nan`` and ``1e400`` are refused at load, so ``pool show``, ``pool check`` and
``run`` agree). Each field also has a range; the upper ends below are far above any real use
and within what the code using them can take (``retention_days`` is a ``timedelta``)."""
_Whole = Annotated[int, Strict()]
"""A whole number of a pool file: a TOML integer (not ``5.0``, ``"5"`` or ``true``)."""
_SECONDS = 1e6  # about 11.6 days
_USD = 1e9
_PRICE = 1e6  # USD per 1M tokens: a dollar a token


class PriceConfig(_Strict):
    """USD per 1M tokens."""

    input: _Number = Field(0.0, ge=0, le=_PRICE, description="USD per 1M input tokens")
    output: _Number = Field(0.0, ge=0, le=_PRICE, description="USD per 1M output tokens")
    cached_input: _Number = Field(0.0, ge=0, le=_PRICE, description="USD per 1M cached input tokens")


class DecodingConfig(_Strict):
    """Decoding settings; every field optional so ``[defaults]`` and workers can merge."""

    max_tokens: _Whole | None = Field(None, gt=0, le=32768, description="generation limit, tokens")
    temperature: _Number | None = Field(None, ge=0, le=2, description="sampling temperature")
    top_p: _Number | None = Field(None, gt=0, le=1, description="nucleus sampling mass")
    seed: _Whole | None = Field(None, ge=0, description="sampling seed")
    n_ctx: _Whole | None = Field(None, ge=256, le=131072, description="context window, tokens (llama_cpp)")


class WorkerConfig(DecodingConfig):
    """One worker of the pool."""

    name: str = Field(min_length=1, description="unique name; never shown to the conductor")
    backend: Literal["llama_cpp", "openai", "anthropic", "gemini", "python", "vote", "conductor"] = Field(
        "llama_cpp", description="which backend runs it"
    )
    model: str = Field(
        "",
        description="llama_cpp: embedded model id or .gguf path; openai: the server's model name; python, vote: unused",
    )
    base_url: str | None = Field(None, description="openai: API root, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(None, description="openai: environment variable holding the API key")
    stream: bool = Field(False, description="openai: stream replies (usage from the final chunk)")
    timeout_s: _Number | None = Field(
        None, gt=0, le=_SECONDS, description="openai: transport timeout (600); python: run time (10)"
    )
    memory_mb: _Whole = Field(512, ge=16, description="python: address-space limit of a run, MiB")
    output_chars: _Whole = Field(4000, ge=100, description="python: stdout / stderr are each cut to this length")
    max_depth: _Whole = Field(1, ge=1, le=3, description="conductor: how many nested requests may stack")
    description: str = Field("", description="capability note the conductor sees as 'Model i: ...'")
    system_prompt: str | None = Field(
        None, description='system message before each call (default: podium\'s, see docs/pool-file.md; "" for none)'
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        None, description="openai: reasoning effort for reasoning models"
    )
    extra_body: dict[str, Any] | None = Field(None, description="openai: provider-specific request fields")
    equivalent: str | None = Field(None, description="worker that takes over while this one is out")
    price: PriceConfig | None = Field(
        None, description="USD per 1M tokens; default: podium's price table (openai) or 0 (local, tools)"
    )
    external: bool | None = Field(
        None,
        description="calls leave your trust boundary (a third party); default: true for openai/anthropic/gemini "
        "unless base_url is a loopback address, false for llama_cpp, python and conductor",
    )
    allow_pii: bool = Field(False, description="external: send PII in clear instead of pseudonymized")
    provider: str | None = Field(None, description="who runs it, for the data-flow register (default: endpoint host)")
    region: str | None = Field(None, description="where it processes data (e.g. 'EU'), for the data-flow register")


class ConductorConfig(_Strict):
    """The conductor that writes workflows. An LM conductor: a pool worker's model (``worker``),
    a local model of its own outside the pool (``model``, llama.cpp), e.g. a small local
    conductor orchestrating frontier workers, or a GRPO-trained conductor from the registry
    (``version``: its base model with its LoRA adapter, in llama.cpp; the decoding settings of
    its training unless this section sets them). Or a trained light conductor (``light``: a
    registry ref or a ``policy.npz`` file, relative paths from the pool file's folder), which
    chooses among the pool workers it was trained on by name; the decoding keys below then do
    not apply."""

    worker: str | None = Field(None, description="name of the pool worker whose model runs the conductor")
    model: str | None = Field(None, description="or: an embedded model id / .gguf path run in-process")
    version: str | None = Field(
        None, description="or: a GRPO-trained LM conductor, NAME or NAME@vN (podium conductor list)"
    )
    light: str | None = Field(
        None,
        description="or: a trained light conductor, NAME / NAME@vN (podium conductor list) or a policy .npz file "
        "(relative to the pool file)",
    )
    n_ctx: _Whole = Field(4096, ge=512, le=131072, description="context window of a `model` conductor, tokens")
    price: PriceConfig = Field(default_factory=PriceConfig, description="USD per 1M tokens of a `model` conductor")
    temperature: _Number = Field(0.7, ge=0, le=2)
    seed: _Whole = Field(0, ge=0, description="base seed; re-sample k uses seed + k")
    reasoning_max_tokens: _Whole = Field(
        160,
        ge=0,
        le=4096,
        description="most tokens of the reasoning line (0: none; `reasoning_tokens` is the older name)",
        validation_alias=AliasChoices("reasoning_max_tokens", "reasoning_tokens"),
    )
    max_tokens: _Whole = Field(800, gt=0, le=8192, description="budget of an unconstrained reply")
    subtask_chars: _Whole = Field(240, ge=16, le=4000, description="longest subtask the grammar allows")
    resamples: _Whole = Field(2, ge=0, le=10, description="extra attempts after an invalid plan")
    constrained: bool = Field(True, description="grammar-constrain the lists where the backend can")
    recursion_rounds: _Whole = Field(
        0, ge=0, le=5, description="extra review rounds (paper §3.2; each costs a conductor call)"
    )

    @property
    def light_name(self) -> str | None:
        """The light conductor's name in traces (``light:FILE-STEM`` or ``light:REF``), or None."""
        if self.light is None:
            return None
        return f"light:{Path(self.light).stem if self.light.endswith('.npz') else self.light}"


class FallbackConfig(_Strict):
    """The fallback pipeline: one call to a default worker."""

    worker: str = Field(description="name of the pool worker that answers alone")
    subtask: str = Field(
        "Answer the question completely and correctly. End with the final answer.",
        min_length=1,
    )


class LimitsConfig(_Strict):
    """Default per-request limits and the pool's period budget (all optional)."""

    deadline_s: _Number | None = Field(None, gt=0, le=_SECONDS, description="request latency budget, seconds")
    step_timeout_s: _Number | None = Field(None, gt=0, le=_SECONDS, description="one worker call at most, seconds")
    cost_cap_usd: _Number | None = Field(None, gt=0, le=_USD, description="request cost cap, USD (conductor included)")
    fallback_reserve: _Number = Field(0.25, ge=0, le=0.9, description="share of the deadline kept for the fallback")
    daily_budget_usd: _Number | None = Field(None, gt=0, le=_USD, description="pool budget per UTC day, USD")


class ResilienceConfig(_Strict):
    """Retries with backoff and the circuit breaker, per worker."""

    attempts: _Whole = Field(3, ge=1, le=10, description="attempts per call for transient errors")
    base_delay_s: _Number = Field(0.5, ge=0, le=_SECONDS, description="backoff base, seconds")
    max_delay_s: _Number = Field(8.0, ge=0, le=_SECONDS, description="backoff ceiling, seconds")
    breaker_threshold: _Whole = Field(5, ge=1, description="failures in a row that take a worker out")
    breaker_cooldown_s: _Number = Field(30.0, ge=0, le=_SECONDS, description="how long it stays out, seconds")


class TelemetryConfig(_Strict):
    """OpenTelemetry span export (needs the ``otel`` extra; see ``docs/telemetry.md``).

    Unset fields fall back to the standard ``OTEL_*`` environment variables, then to the
    defaults named here."""

    exporter: Literal["none", "otlp", "console"] | None = Field(
        None, description="where spans go (default: OTEL_TRACES_EXPORTER, else none)"
    )
    endpoint: str | None = Field(
        None,
        description="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces "
        "(default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318)",
    )
    service_name: str | None = Field(
        None, min_length=1, description="service.name (default: OTEL_SERVICE_NAME, else podium)"
    )
    max_queue_size: _Whole = Field(
        2048, ge=1, le=1_000_000, description="spans held for export; more are dropped, counted"
    )
    max_export_batch_size: _Whole = Field(512, ge=1, description="spans per export request")
    schedule_delay_s: _Number = Field(
        5.0, gt=0, le=_SECONDS, description="longest wait before a batch is sent, seconds"
    )
    export_timeout_s: _Number = Field(
        10.0, gt=0, le=_SECONDS, description="one export request, and the wait at shutdown, seconds"
    )
    capture_content: bool = Field(
        False, description="also put questions, messages, outputs and the subject key on spans (off: never)"
    )

    @model_validator(mode="after")
    def _check_batch(self) -> TelemetryConfig:
        if self.max_export_batch_size > self.max_queue_size:
            raise ValueError(
                f"max_export_batch_size ({self.max_export_batch_size}) must not exceed max_queue_size "
                f"({self.max_queue_size})"
            )
        return self


class TracesConfig(_Strict):
    """How long the traces of ``podium run`` stay in the trace database (``[traces]``)."""

    retention_days: _Number | None = Field(
        None,
        gt=0,
        le=100_000,
        description="purge requests started more than this many days ago, from the whole trace file, when it "
        "opens and hourly after writes (see docs/traces.md); default: keep everything",
    )


class PIIConfig(_Strict):
    """PII pseudonymization before calls to external workers (see docs/pii.md)."""

    enabled: bool | None = Field(
        None, description="default: on when any external worker has allow_pii = false; needs the 'pii' extra"
    )
    entities: tuple[str, ...] = Field(ENTITY_TYPES, min_length=1, description="entity types to mask")
    languages: tuple[str, ...] = Field(("da", "en"), min_length=1, description="spaCy language codes to analyse in")
    score_threshold: _Number = Field(0.5, ge=0, le=1, description="minimum detection score")
    record_values: bool = Field(False, description="store placeholder -> value in traces (off: kinds and counts only)")

    @model_validator(mode="after")
    def _check_entities(self) -> PIIConfig:
        unknown = sorted(set(self.entities) - set(ENTITY_TYPES))
        if unknown:
            raise ValueError(f"unknown entity type(s) {', '.join(unknown)}; known: {', '.join(ENTITY_TYPES)}")
        return self


def _is_loopback(url: str | None) -> bool:
    host = urlparse(url).hostname if url else None
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PoolConfig(_Strict):
    """A whole pool file."""

    name: str = Field("pool", min_length=1)
    max_steps: _Whole = Field(5, ge=1, le=20, description="step limit of a workflow")
    max_question_chars: _Whole = Field(20_000, ge=1, description="longer questions are refused")
    defaults: DecodingConfig = Field(default_factory=DecodingConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    pii: PIIConfig = Field(default_factory=PIIConfig)
    conductor: ConductorConfig
    fallback: FallbackConfig
    workers: tuple[WorkerConfig, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_backends(self) -> PoolConfig:
        c = self.conductor
        given = [k for k in ("worker", "model", "version", "light") if getattr(c, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"[conductor] sets {' and '.join(given) if given else 'none of them'}; it needs exactly one of "
                "worker = '<pool worker>', model = '<model id>', version = '<trained LM conductor, NAME@vN>' or "
                "light = '<trained light conductor, NAME@vN or .npz>'"
            )
        for key, ref in (("version", c.version), ("light", c.light)):
            if ref is not None and not ref.endswith(".npz"):
                from podium.registry import parse_ref

                try:
                    parse_ref(ref)
                except ConfigError as exc:
                    raise ValueError(f"[conductor] {key} = {ref!r}: {exc}") from None
        if c.version is not None and c.version.endswith(".npz"):
            raise ValueError(f"[conductor] version = {c.version!r}: a policy file is a light conductor: light = ...")
        local = [(f"worker {w.name!r}", w.model) for w in self.workers if w.backend == "llama_cpp"]
        if self.conductor.model is not None:
            local.append(("[conductor]", self.conductor.model))
        for where, model in local:
            if model and model not in EMBEDDED_MODELS and not model.lower().endswith(".gguf"):
                raise ValueError(
                    f"{where}: model {model!r} is neither an embedded model ({', '.join(EMBEDDED_MODELS)}) "
                    "nor a path to a .gguf file"
                )
        for w in self.workers:
            if w.backend in _REMOTE and w.price is None and w.model not in PRICE_TABLE:
                raise ValueError(
                    f"worker {w.name!r}: no price given and {w.model!r} is not in podium's price table "
                    f"(as of {PRICE_TABLE_AS_OF}); add price = {{ input = ..., output = ... }} (USD per 1M tokens)"
                )
            if w.backend in ("llama_cpp", *_REMOTE) and not w.model:
                raise ValueError(f"worker {w.name!r}: backend {w.backend!r} needs a model")
            if w.backend in ("anthropic", "gemini") and not w.api_key_env:
                raise ValueError(f"worker {w.name!r}: backend {w.backend!r} needs api_key_env (the key's variable)")
            if w.backend == "openai" and not w.base_url:
                raise ValueError(f"worker {w.name!r}: backend 'openai' needs base_url (e.g. https://api.openai.com/v1)")
            if w.backend == "llama_cpp" and (w.base_url or w.api_key_env):
                raise ValueError(f"worker {w.name!r}: base_url / api_key_env only apply to backend 'openai'")
        return self

    @model_validator(mode="after")
    def _check_names(self) -> PoolConfig:
        names = [w.name for w in self.workers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"worker names must be unique, repeated: {', '.join(dupes)}")
        refs = [("fallback", self.fallback.worker)]
        if self.conductor.worker is not None:
            refs.append(("conductor", self.conductor.worker))
        refs += [(f"workers.{w.name}.equivalent", w.equivalent) for w in self.workers if w.equivalent]
        for section, ref in refs:
            if ref not in names:
                raise ValueError(f"[{section}] worker = {ref!r} is not a worker of this pool ({', '.join(names)})")
        return self

    def is_external(self, worker: WorkerConfig) -> bool:
        """Whether calls to ``worker`` go to a third party: its ``external`` setting, else true for
        the remote backends unless ``base_url`` is a loopback address (127.0.0.0/8, ::1,
        localhost), false for local models, tools and the conductor."""
        if worker.external is not None:
            return worker.external
        return worker.backend in _REMOTE and not _is_loopback(worker.base_url)

    def require_api_keys(self, environ: Mapping[str, str] | None = None) -> None:
        """ConfigError naming every API-key variable (``api_key_env``) a worker of the pool needs
        and ``environ`` (default: the process environment) does not set, with the fix."""
        env = os.environ if environ is None else environ
        missing = sorted({w.api_key_env for w in self.workers if w.api_key_env and not env.get(w.api_key_env)})
        if missing:
            raise ConfigError(
                f"pool {self.name!r} needs API keys in the environment: set {', '.join(missing)} "
                "(or remove those workers from the pool file)"
            )

    @property
    def pii_enabled(self) -> bool:
        """``[pii] enabled``, or by default whether any external worker has ``allow_pii = false``."""
        if self.pii.enabled is not None:
            return self.pii.enabled
        return any(self.is_external(w) and not w.allow_pii for w in self.workers)

    def worker_index(self, name: str) -> int:
        return [w.name for w in self.workers].index(name)

    def merged(self, worker: WorkerConfig) -> WorkerConfig:
        """The worker with ``[defaults]`` filled in where it left a setting unset, and its price
        from podium's price table (remote providers) or zero (local models, tools) when it gives none."""
        fill: dict[str, Any] = {k: v for k, v in self.defaults.model_dump().items() if getattr(worker, k) is None}
        if worker.price is None:
            fill["price"] = (
                PRICE_TABLE.get(worker.model or "", PriceConfig()) if worker.backend in _REMOTE else PriceConfig()
            )
        return worker.model_copy(update=fill)


def _price_table() -> tuple[dict[str, PriceConfig], str]:
    data = tomllib.loads((resources.files("podium") / "data" / "prices.toml").read_text(encoding="utf-8"))
    return {name: PriceConfig(**row) for name, row in data["models"].items()}, str(data["as_of"])


PRICE_TABLE, PRICE_TABLE_AS_OF = _price_table()
"""podium's default list prices (USD per 1M tokens) by API model name, and their date."""


def packaged_pools() -> dict[str, Path]:
    """Pool presets shipped in the package, by name (``local`` is the default)."""
    folder = resources.files("podium") / "pools"
    return {p.name.removesuffix(".toml"): Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key (check its spelling against docs/pool-file.md)"
    if err["type"] == "missing":
        return "required, missing (see docs/pool-file.md)"
    if err["type"] == "finite_number":
        return f"must be a finite number, got {err['input']!r}; write a number (e.g. 30 or 0.5), or leave the key out"
    if err["type"] == "float_type":
        return f"must be a number (TOML integer or float, unquoted), got {err['input']!r}"
    if err["type"] == "int_type":
        return f"must be a whole number (TOML integer, unquoted), got {err['input']!r}"
    if err["type"] in ("less_than_equal", "greater_than", "greater_than_equal") and "input" in err:
        return f"{err['msg']}, got {err['input']!r} (ranges: docs/pool-file.md)"
    return str(err["msg"])


def load_pool(path: str | Path | None = None) -> PoolConfig:
    """Load and validate a pool file; ``None`` or a preset name gives a packaged pool.

    Raises ConfigError naming the file, the field and the fix for a missing file, bad TOML or
    an invalid field.
    """
    presets = packaged_pools()
    if path is None:
        path = presets["local"]
    elif str(path) in presets and not Path(path).exists():
        path = presets[str(path)]
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        close = difflib.get_close_matches(path.name.removesuffix(".toml"), presets, n=1)
        raise ConfigError(
            f"pool file {str(path)!r} not found. "
            + (f"Did you mean the preset {close[0]!r}? " if close else "")
            + f"Pass an existing TOML file or one of the presets: {', '.join(sorted(presets))}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read pool file {str(path)!r}: {exc}") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"pool file {str(path)!r} is not valid TOML: {exc}") from None
    try:
        config = PoolConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        if len(errors) > 1:  # a bad worker entry also empties the list: report the cause only
            errors = [e for e in errors if not (e["type"] == "too_short" and e["loc"] == ("workers",))]
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {_message(err)}" for err in errors
        )
        raise ConfigError(f"pool file {str(path)!r} is invalid: {problems}") from None
    light = config.conductor.light
    if light is not None and light.endswith(".npz"):
        policy = path.parent / light
        if not policy.is_file() and (packaged := presets["local"].parent / light).is_file():
            policy = packaged  # a copy of a packaged pool file still finds its packaged policy
        if not policy.is_file():
            raise ConfigError(
                f"pool file {str(path)!r}: [conductor] light = {light!r}: no such file {str(path.parent / light)!r}; "
                "give a path relative to the pool file, an absolute path, or a registry ref (podium conductor list)"
            )
        conductor = config.conductor.model_copy(update={"light": str(policy.resolve())})
        config = config.model_copy(update={"conductor": conductor})
    return config
