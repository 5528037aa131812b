"""A trained LM conductor as a registry version: GRPO (:func:`podium.train.grpo.train_grpo`) on a
replay pool, stored with its ``train.json`` record and learning curve. ``podium train --policy lm``
(:mod:`podium.train.lm_cli`) and the retrain loop's train stage (:mod:`podium.loop.outcomes`)
both call :func:`train_lm_version`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.registry import Registry, TrainingInfo, Version
from podium.train.grpo import GRPOResult, GRPOTrainConfig, StepMetrics, train_grpo

__all__ = ["train_lm_version"]


def _source(replay: Path, config: GRPOTrainConfig) -> tuple[Any, GRPOTrainConfig, str]:
    """The replay pool of ``replay`` (a workflow bank folder, whose multi-step workflows replay
    exactly with role instructions only, or an outcome matrix file), the config it asks for, and
    the name ``train.json`` records."""
    if replay.is_dir():
        from podium.eval.bank import read_bank
        from podium.pool import load_pool
        from podium.train.sources import BankSource

        pool = load_pool("local-tools")
        source = BankSource(read_bank(replay), {w.name: w.description for w in pool.workers})
        return source, replace(config, roles=True), str(replay)
    from podium.eval.replay import OutcomeMatrix

    matrix = OutcomeMatrix.load(replay)
    return matrix, config, matrix.path.name


def _quiet_libraries() -> None:
    """The training libraries' own tqdm bars and deprecation notices would interleave with
    podium's progress output; TQDM_DISABLE must be set before tqdm is first imported (by
    transformers)."""
    import os
    import warnings

    os.environ.setdefault("TQDM_DISABLE", "1")
    for library in ("transformers", "trl", "peft", "accelerate"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=library)
        warnings.filterwarnings("ignore", category=UserWarning, module=library)


def train_lm_version(
    replay: Path,
    name: str,
    config: GRPOTrainConfig,
    *,
    resume: str | None = None,
    on_step: Callable[[StepMetrics], None] | None = None,
    on_warm_step: Callable[[int, int, float], None] | None = None,
) -> tuple[Version, GRPOResult, TrainingInfo]:
    """Train an LM conductor with GRPO on ``replay`` and store it as a new version of ``name``
    (or continue the version ``resume`` names, e.g. ``lm@v2``, from its last checkpoint).

    Args:
        replay: an outcome matrix (CSV) or a workflow bank folder.
        name: the registry name of a new version.
        config: the GRPO settings (:class:`~podium.train.grpo.GRPOTrainConfig`).
        on_step: called after each GRPO step; on_warm_step: ``(step, total, loss)`` after each
            optimiser step of the format warm start.

    Returns (the version, the result, its ``train.json`` record; ``data`` names the training
    file's sha256 as ``matrix_sha256``, or the bank's matrix's as ``bank_sha256``). Raises
    ConfigError for an unknown or missing base model (before a version exists), a bad replay
    file, or running out of memory (with the options that need less); a version that holds no
    checkpoint is removed when training fails."""
    from podium.local_models import resolve_model

    _quiet_libraries()
    source, config, data_name = _source(replay, config)
    resolve_model(config.model, verify=False)  # fails before a version exists
    registry = Registry()
    version = registry.get(resume) if resume else registry.create(name)
    try:
        result = train_grpo(
            source, config, version.path, resume=bool(resume), on_step=on_step, on_warm_step=on_warm_step
        )
    except (ConfigError, MemoryError, RuntimeError) as exc:
        kept = resume or any(version.path.glob("checkpoint-*"))
        if not kept:
            shutil.rmtree(version.path, ignore_errors=True)  # nothing worth keeping: no empty version
        if isinstance(exc, ConfigError):
            raise
        if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
            again = f" (resume with --resume {version.ref})" if kept else ""
            raise ConfigError(
                "GRPO ran out of memory: use fewer --num-generations, a smaller --max-completion-tokens or "
                f"--rollouts llama.cpp (one question's rollouts per pass, gradient checkpointing){again}"
            ) from exc
        raise
    metrics = result.metrics
    adapter = (
        {"adapter_gguf": result.adapter.to_json()}
        if result.adapter is not None
        else {"adapter_gguf_error": result.export_error}
    )
    data_file = replay / "matrix.csv" if replay.is_dir() else replay
    digest = hashlib.sha256(data_file.read_bytes()).hexdigest()
    data = {"matrix": data_name, "split": config.split, "tags": list(config.tags)}
    data["bank_sha256" if replay.is_dir() else "matrix_sha256"] = digest
    info = TrainingInfo(
        "lm",
        asdict(config),
        data,
        [asdict(m) for m in metrics],
        {"warm_start_loss": result.warm_start_loss, **adapter},
    )
    version.write_training(info)
    if metrics:
        from podium.eval.plot import learning_curve_plot

        learning_curve_plot(
            version.path / "learning-curve.png",
            [m.step for m in metrics],
            {
                "reward (mean of rollouts)": [m.reward_mean for m in metrics],
                "parse rate": [m.parse_rate for m in metrics],
            },
            xlabel="GRPO step",
            title=f"{version.ref}: {config.model}, G = {config.generations}, λ = {config.lam:g}",
        )
    return version, result, info
