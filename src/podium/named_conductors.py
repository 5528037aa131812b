"""Conductors by name: the one place a name such as ``single:qwen-1.5b`` or ``light:v3`` becomes
a conductor, for ``podium eval --methods`` and the server's model presets.

Names (pool indices are resolved against ``pool``):

* ``single:NAME`` — one step on worker NAME; ``cheapest`` / ``strongest`` — one step on the
  cheapest / strongest worker (:func:`~podium.conductor.baselines.cheapest`, ``strongest``);
* ``random`` — one step on a seeded random worker;
* ``pipeline`` — plan → solve → verify on the strongest worker; ``moa`` — Mixture-of-Agents;
* ``rules:FILE.toml`` — a hand-written rule pipeline (:mod:`podium.conductor.rules`);
* ``light:REF`` — a trained light conductor: a registry ref (``v3``, ``promoted``, ``latest``)
  or a ``policy.npz`` path;
* ``lm:REF`` — a GRPO-trained LM conductor from the registry (``lm``, ``lm@v2``): its base model
  with its exported LoRA adapter, in-process in llama.cpp, decoding as in training
  (:func:`trained_lm`).

The pool's own LM conductor is built by :func:`podium.builder.build_orchestrator`, not here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from podium.conductor.base import Conductor
from podium.conductor.baselines import (
    FixedPipeline,
    MixtureOfAgents,
    RandomWorker,
    SingleWorker,
    cheapest,
    strongest,
)
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.errors import ConfigError
from podium.local_models import EMBEDDED_MODELS
from podium.workers.base import Price, Worker, WorkerSettings

if TYPE_CHECKING:
    from podium.embed import Embedder
    from podium.registry import Version
    from podium.workers.llama_cpp import LlamaCppWorker

__all__ = [
    "NAMED",
    "MethodName",
    "light_conductor",
    "named_conductor",
    "plan_conductor",
    "shared_embedder",
    "trained_lm",
]

NAMED = (
    "single:NAME", "cheapest", "strongest", "random", "pipeline", "moa", "light:REF", "lm:REF", "plan:ID", "rules:FILE",
)  # fmt: skip
"""The names :func:`named_conductor` knows, for help texts and errors."""


@dataclass(frozen=True)
class MethodName:
    """A conductor's or an evaluation method's name, read once: its ``kind`` (``single``,
    ``light``, ``plan``, ``conductor``…) and, for ``KIND:ARG`` names, the ``arg`` after the first
    colon (None for a bare ``KIND``). ``text`` is the name as written."""

    text: str
    kind: str
    arg: str | None

    @classmethod
    def parse(cls, text: str) -> MethodName:
        kind, colon, arg = text.partition(":")
        return cls(text, kind, arg if colon else None)


def named_conductor(
    name: str,
    pool: Sequence[Worker],
    *,
    quality: Sequence[float] | None = None,
    cost: Sequence[float] | None = None,
    embeddings: Path | None = None,
) -> Conductor:
    """The conductor called ``name`` over ``pool``.

    Args:
        quality, cost: measured mean quality and cost (USD) per worker, when known (replay);
            else strength and cheapness follow list prices.
        embeddings: the embedding cache file for light conductors.

    Raises ConfigError for an unknown name, a worker not in the pool, or a trained conductor
    that is not in the registry (or, for ``lm:``, has no exported adapter).
    """
    by_name = {w.info.name: i for i, w in enumerate(pool)}
    best = strongest(pool, quality)
    method = MethodName.parse(name)
    kind, arg = method.kind, method.arg
    if arg is not None:
        if kind == "single":
            if arg not in by_name:
                raise ConfigError(f"{name}: no worker {arg!r} in the pool ({', '.join(by_name)})")
            return SingleWorker(by_name[arg], name)
        if kind == "light":
            return light_conductor(arg, embeddings)
        if kind == "plan":
            return plan_conductor(arg)
        if kind == "rules":
            from podium.conductor.rules import RulePipeline, load_rules

            return RulePipeline(load_rules(Path(arg)), name)
        if kind == "lm":
            worker, settings, version = trained_lm(arg)
            return LMConductor(worker, settings, name=f"lm:{version.ref}")
    elif kind == "cheapest":
        return SingleWorker(cheapest(pool, cost), f"cheapest:{pool[cheapest(pool, cost)].info.name}")
    elif kind == "strongest":
        return SingleWorker(best, f"strongest:{pool[best].info.name}")
    elif kind == "random":
        return RandomWorker(seed=0)
    elif kind == "pipeline":
        return FixedPipeline(best, best, best)
    elif kind == "moa":
        return MixtureOfAgents([i for i, w in enumerate(pool) if not w.info.is_tool], best)
    raise ConfigError(f"unknown conductor {name!r}; known: {', '.join(NAMED)}")


def plan_conductor(plan_id: str) -> Conductor:
    """``plan:ID``: one composition of the local catalogue's steps, always (``podium bank show``
    and docs/learned-workflows.md list the plan ids). Raises ConfigError for an unknown id."""
    from podium.conductor.catalogue import local_columns, local_plans
    from podium.conductor.plans import fixed_plan

    columns = local_columns(checks=True)  # every plan, those with checks too
    plans = {p.id: p for p in local_plans(columns)}
    if plan_id not in plans:
        raise ConfigError(f"plan:{plan_id}: no such plan; known: {', '.join(plans)}")
    return fixed_plan(plans[plan_id], columns)


def light_conductor(ref: str, embeddings: Path | None = None, *, name: str | None = None) -> Conductor:
    """A trained light conductor from a registry ref (``light``, ``light@v3``) or a
    ``policy.npz`` path, with the embedder its policy was trained on. ``name`` is shown in
    traces (default ``light:REF``).

    Raises ConfigError when the ref is not in the registry, names an LM conductor, or the file
    is missing or malformed."""
    from podium.conductor.light import LightConductor, LightPolicy
    from podium.registry import Registry

    if ref.endswith(".npz"):
        path, shown = Path(ref), ref
    else:  # a bare name is its promoted version: the name says which, so traces show rollbacks
        version = Registry().get(ref)
        if version.training().policy == "lm":
            raise ConfigError(f"{version.ref} is a GRPO-trained LM conductor; name it lm:{ref}")
        path, shown = version.policy_path, version.ref
    from podium.conductor.plans import PlanConductor, PlanPolicy, is_plan_policy

    if is_plan_policy(path):  # a composition per question (podium train --policy plans)
        plans = PlanPolicy.load(path)
        return PlanConductor(plans, shared_embedder(embeddings, plans.embedder), name=name or f"light:{shown}")
    policy = LightPolicy.load(path)
    return LightConductor(policy, shared_embedder(embeddings, policy.embedder), name=name or f"light:{shown}")


@functools.cache
def shared_embedder(cache: Path | None, encoder: str | None = None) -> Embedder:
    """One embedder per (cache file, encoder name) for the whole process: the model loads once,
    however many light conductors and router points use it. ``encoder``: an
    :attr:`~podium.embed.Encoder.name` (default all-MiniLM-L6-v2). Raises ConfigError for an
    unknown encoder name."""
    from podium.embed import Embedder, encoder_for

    return Embedder(cache, encoder=encoder_for(encoder) if encoder else None)


def trained_lm(
    ref: str, *, name: str = "conductor", n_ctx: int = 4096, price: Price | None = None
) -> tuple[LlamaCppWorker, LMConductorSettings, Version]:
    """A GRPO-trained LM conductor from the registry, ready to run in llama.cpp: (its model — the
    base model the version was trained from, with the version's exported LoRA adapter
    ``adapter.gguf``, sha256-checked against ``train.json`` at load —, the decoding settings of
    its training, the version).

    The settings are those the rollouts were sampled with: the training temperature,
    ``max_completion_tokens`` as the reply budget, unconstrained (training had no grammar), and
    the prompt's example workflows only if training showed them.

    Args:
        ref: ``NAME`` (its promoted version, else its latest) or ``NAME@vN``.
        name: the worker's name; n_ctx: its context window, tokens; price: USD per 1M tokens.

    Raises ConfigError when the version does not exist, is not an LM conductor, has no exported
    adapter (``podium conductor export REF`` makes one), or was trained on a base that is not an
    embedded model; the llama.cpp backend's ConfigError when llama-cpp-python is missing.
    """
    from podium.registry import Registry
    from podium.workers.llama_cpp import LlamaCppWorker

    version = Registry().get(ref)
    info = version.training()
    if info.policy != "lm":
        raise ConfigError(f"{version.ref} is not a GRPO-trained LM conductor (a light conductor: name it light:{ref})")
    exported = info.adapter_gguf
    if exported is None:
        failed = info.adapter_gguf_error
        why = f" (the export after training failed: {failed})" if failed else ""
        raise ConfigError(f"{version.ref} has no GGUF adapter{why}; export it: podium conductor export {version.ref}")
    base = str(exported.get("base_model", ""))
    if base not in EMBEDDED_MODELS:
        known = ", ".join(EMBEDDED_MODELS)
        raise ConfigError(f"{version.ref} was trained on {base!r}, not an embedded model ({known})")
    config = info.config
    worker = LlamaCppWorker(
        name,
        base,
        settings=WorkerSettings(),
        price=price or Price(),
        n_ctx=n_ctx,
        description=f"{version.ref}: {base} with a LoRA adapter",
        lora=version.path / str(exported["file"]),
        lora_sha256=str(exported["sha256"]),
    )
    roles = bool(config.get("roles", False))
    settings = LMConductorSettings(
        temperature=float(config.get("temperature", 1.0)),
        max_tokens=int(config.get("max_completion_tokens", 160)),
        constrained=roles,  # trained on role instructions: the roles grammar only keeps it to them
        few_shot=bool(config.get("few_shot", True)),
        seed_per_question=True,  # as in training, each question's rollout draws its own randomness
        roles=roles,
        # rollouts drawn among the catalogue's plans (llama.cpp under their grammar): run among them too
        plans=roles and config.get("rollouts") == "llama.cpp",
    )
    return worker, settings, version
