"""GRPO training of the LM conductor on a replay pool (Nielsen et al. 2026 §3.1, docs/design.md, "Training").

Per training question, TRL's ``GRPOTrainer`` samples G workflows from the conductor (the same
prompt :func:`podium.conductor.prompt.conductor_messages` builds at run time), each is parsed by
the tolerant parser and scored on the replay pool, and the group-normalised advantage updates a
LoRA adapter (peft). Reward, as in the paper plus optional cost:

    0                                                the output does not parse into a valid workflow
    0.5 + 0.5 · score − λ · cost − μ · latency       otherwise; score = the final worker's recorded score

(replay scoring as in :mod:`podium.eval.replay`: every step pays its worker's recorded cost, USD;
latency is the workflow's critical path over the recorded request latencies, seconds, following
its access lists — a matrix with ``|latency_s`` columns is needed when μ > 0).
**Adaptive pools** (paper §4.4): each question shows a random non-empty subset of the workers,
in random order, so the conductor learns to read the pool rather than memorise positions.

**Format warm start** (CPU preset, :mod:`podium.train.warmstart`): the small local bases almost
never write a parseable workflow, so before GRPO one supervised epoch teaches the format with
random decisions, and the prompt leaves out the few-shot examples (GRPO then learns the choices).

The base conductor is one of the embedded local models, loaded by transformers from its GGUF
file (dequantised to float32). Runs on CPU at small scale (SmolLM2-135M, 2 questions × G = 4:
≈ 35–50 s per step on 2 cores, docs/training.md);
the same code runs the paper's recipe on a GPU. Offline only: the matrix is recorded data.
Needs the ``train`` extra (torch, transformers, trl, peft).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium.conductor.prompt import FEW_SHOT, conductor_messages
from podium.errors import ConfigError
from podium.eval.replay import OutcomeMatrix
from podium.eval.tasks import Task, has_tag
from podium.local_models import hub_offline, resolve_model
from podium.roles import ROLES
from podium.train.export import ExportedAdapter, drop_gguf_marker, lora_to_gguf
from podium.train.sources import MatrixSource, ReplaySource
from podium.train.warmstart import warm_start

__all__ = [
    "GRPOResult",
    "GRPOTrainConfig",
    "OnStep",
    "OnWarmStep",
    "StepMetrics",
    "train_grpo",
]


@dataclass(frozen=True)
class GRPOTrainConfig:
    """Hyperparameters. Defaults are the CPU preset; :meth:`paper` gives the paper's recipe.

    Attributes:
        model: embedded model id of the base conductor (``podium models list``).
        steps: optimiser steps.
        questions_per_step: distinct questions per step (each sampled ``generations`` times).
        generations: G, workflows sampled per question.
        max_completion_tokens: conductor output limit, tokens.
        temperature: conductor sampling temperature.
        learning_rate: AdamW learning rate (cosine schedule).
        beta: KL coefficient (the paper uses 0).
        lora_r, lora_alpha: LoRA rank and scale.
        max_steps_per_workflow: the workflow step limit shown in the prompt.
        lam: λ, the cost penalty (1/USD).
        mu: μ, the latency penalty (1/second).
        adaptive_pool: show a random subset of the workers per question.
        split: matrix split trained on; tags: keep questions with any of these tags.
        seed: data order, pools and sampling.
        save_steps: checkpoint every this many steps.
        warm_start_epochs: epochs of the format warm start before GRPO (0: none;
            :mod:`podium.train.warmstart`), one random-decision target per training question.
        warm_start_learning_rate: its AdamW learning rate (constant).
        few_shot: show the prompt's example workflows (about 550 of its 900 tokens). The CPU
            preset leaves them out, as the warm start teaches the format; the trained
            conductor then runs without them (:func:`podium.named_conductors.trained_lm`).
        roles: the conductor writes role instructions only (set by the source: a workflow
            bank); the trained conductor then runs under the roles grammar.
        rollouts: who samples the workflows: ``"transformers"`` (TRL's own generation, free
            text) or ``"llama.cpp"`` (:mod:`podium.train.rollouts`: the current adapter on
            llama.cpp under the run-time grammar, so every complete sample parses).
    """

    model: str = "smollm2-135m-instruct"
    steps: int = 20
    questions_per_step: int = 2
    generations: int = 4
    max_completion_tokens: int = 160
    temperature: float = 1.0
    learning_rate: float = 2e-5
    beta: float = 0.0
    lora_r: int = 16
    lora_alpha: int = 32
    max_steps_per_workflow: int = 3
    lam: float = 0.0
    mu: float = 0.0
    adaptive_pool: bool = True
    split: str = "train"
    tags: tuple[str, ...] = ()
    seed: int = 0
    save_steps: int = 10
    warm_start_epochs: int = 1
    warm_start_learning_rate: float = 2e-4
    few_shot: bool = False
    roles: bool = False
    rollouts: Literal["transformers", "llama.cpp"] = "transformers"

    @classmethod
    def paper(cls, model: str) -> GRPOTrainConfig:
        """The paper's recipe (Qwen2.5-7B there): 200 steps × 4 questions × 64 rollouts, lr 1e-6,
        KL 0, temperature 1.0, ≤ 1024 new tokens. For a GPU; far too slow on a CPU."""
        return cls(model=model, steps=200, questions_per_step=4, generations=64, max_completion_tokens=1024,
                   learning_rate=1e-6, max_steps_per_workflow=5, warm_start_epochs=0, few_shot=True)  # fmt: skip


@dataclass(frozen=True)
class StepMetrics:
    """Per optimiser step (from the rollouts scored during it).

    Attributes:
        step: 1-based. reward_mean, reward_std: over the step's rollouts. parse_rate: share of
        rollouts that parsed. quality: mean recorded score of parsed rollouts. cost_usd: mean cost
        of parsed rollouts. workflow_steps: mean length of parsed workflows. workers: how often
        each worker answered last (on a bank: the recorded step that answered). seconds: wall time
        of the step. replay_rate: share of rollouts a replay scored (on a bank, parsed workflows
        with a step the bank never recorded are not).
    """

    step: int
    reward_mean: float
    reward_std: float
    parse_rate: float
    quality: float
    cost_usd: float
    workflow_steps: float
    workers: dict[str, int]
    seconds: float
    replay_rate: float = 1.0


@dataclass(frozen=True)
class GRPOResult:
    """What :func:`train_grpo` produced.

    Attributes:
        metrics: one :class:`StepMetrics` per optimiser step.
        adapter: the GGUF LoRA adapter exported for llama.cpp (``adapter.gguf``), or None when
            the export failed; export_error then says why (the peft adapter is kept either way).
        warm_start_loss: the format warm start's training loss per logged step (empty without one).
    """

    metrics: list[StepMetrics]
    adapter: ExportedAdapter | None
    export_error: str | None = None
    warm_start_loss: list[float] = field(default_factory=list)


OnStep = Callable[[StepMetrics], None]
OnWarmStep = Callable[[int, int, float], None]


def train_grpo(
    source: ReplaySource | OutcomeMatrix,
    config: GRPOTrainConfig,
    out: Path,
    *,
    resume: bool = False,
    on_step: OnStep | None = None,
    on_warm_step: OnWarmStep | None = None,
) -> GRPOResult:
    """Train a LoRA adapter on the conductor; writes ``out/checkpoint-*`` (TRL checkpoints, for
    ``resume``), ``out/adapter`` (the final LoRA adapter and tokenizer), ``out/adapter.gguf``
    (the adapter for llama.cpp, :func:`podium.train.export.lora_to_gguf`) and
    ``out/metrics.jsonl`` (one :class:`StepMetrics` per step). With ``steps`` = 0 no GRPO runs:
    the adapter is the warm-started one, or without a warm start the untrained (zero) one, so
    the base conductor can be evaluated as a registry version like any other.

    Raises ConfigError for a bad configuration, ModelNotInstalled for a missing base model."""
    if config.generations < 2:
        raise ConfigError("GRPO needs at least 2 generations per question (the advantage is relative)")
    if config.steps < 0 or config.questions_per_step < 1:
        raise ConfigError("steps must be 0 or more and questions_per_step at least 1")
    if config.rollouts not in ("transformers", "llama.cpp"):
        raise ConfigError(f"rollouts must be 'transformers' or 'llama.cpp', got {config.rollouts!r}")
    hub_offline()  # the base model is a local GGUF file; nothing to fetch, no telemetry
    try:
        import torch
        from datasets import Dataset
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ConfigError(f"GRPO training needs the train extra: pip install -e '.[train]' ({exc})") from exc

    replay: ReplaySource = MatrixSource(source) if isinstance(source, OutcomeMatrix) else source
    if replay.roles != config.roles:
        raise ConfigError(f"{replay.name} {'needs' if replay.roles else 'does not take'} roles = True in the config")
    if config.mu:
        replay.require_latency("a latency penalty (μ > 0)")
    tasks = [t for t in replay.tasks(config.split) if not config.tags or has_tag(t, config.tags)]
    needed = config.steps * config.questions_per_step
    if len(tasks) < config.questions_per_step:
        raise ConfigError(f"{len(tasks)} training questions; need at least {config.questions_per_step}")
    rng = random.Random(config.seed)
    picks = (tasks[i] if i < len(tasks) else tasks[rng.randrange(len(tasks))] for i in range(needed))
    rows = [_row(task, replay, config, rng) for task in picks]
    rng.shuffle(rows)
    dataset = Dataset.from_list(rows)

    path = resolve_model(config.model)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: Any = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    drop_gguf_marker(model)
    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    peft: LoraConfig | None = lora  # GRPOTrainer adds this adapter
    warm_loss: list[float] = []
    if config.warm_start_epochs > 0:
        if resume:  # the checkpoint holds the warmed and GRPO-trained adapter: recreate it, then load
            model = get_peft_model(model, lora)
        else:
            warm_rng = random.Random(config.seed + 1)
            model, warm_loss = warm_start(
                model, tokenizer, [_row(t, replay, config, warm_rng) for t in tasks], out,
                max_steps=config.max_steps_per_workflow, epochs=config.warm_start_epochs,
                learning_rate=config.warm_start_learning_rate, lora_r=config.lora_r, lora_alpha=config.lora_alpha,
                seed=config.seed, on_step=on_warm_step,
            )  # fmt: skip
        peft = None  # GRPO trains the adapter the model already carries
    if config.steps == 0:  # no GRPO: store the warm-started adapter, or the untrained (zero) one
        if peft is not None:
            model = get_peft_model(model, peft)
        model.save_pretrained(str(out / "adapter"))
        tokenizer.save_pretrained(str(out / "adapter"))
        return _finish(out, config, [], warm_loss)

    pending: list[dict[str, Any]] = []

    def reward_fn(completions: list[Any], task_id: list[str], pool: list[str], **_: Any) -> list[float]:
        rewards = []
        for completion, tid, shown in zip(completions, task_id, pool, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            reward, parts = replay.reward(
                text, json.loads(shown), tid, lam=config.lam, mu=config.mu, max_steps=config.max_steps_per_workflow
            )
            rewards.append(reward)
            pending.append({"reward": reward, **parts})
        return rewards

    out.mkdir(parents=True, exist_ok=True)
    metrics: list[StepMetrics] = []
    log = out / "metrics.jsonl"
    clock = [time.perf_counter()]

    class _Metrics(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            done = list(pending)
            pending.clear()
            if not done:
                return
            rewards = [d["reward"] for d in done]
            parsed = [d for d in done if d["parsed"]]
            scored = [d for d in parsed if "score" in d]  # a bank leaves unreplayable workflows unscored
            mean = sum(rewards) / len(rewards)
            std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
            now = time.perf_counter()
            record = StepMetrics(
                step=int(state.global_step),
                reward_mean=mean,
                reward_std=std,
                parse_rate=len(parsed) / len(done),
                quality=sum(d["score"] for d in scored) / len(scored) if scored else 0.0,
                cost_usd=sum(d["cost"] for d in scored) / len(scored) if scored else 0.0,
                workflow_steps=sum(d["steps"] for d in scored) / len(scored) if scored else 0.0,
                workers=dict(Counter(d["final"] for d in scored)),
                replay_rate=len(scored) / len(done),
                seconds=now - clock[0],
            )
            clock[0] = now
            metrics.append(record)
            with log.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(record)) + "\n")
            if on_step is not None:
                on_step(record)

    args = GRPOConfig(
        output_dir=str(out),
        max_steps=config.steps,
        # one question's G workflows per forward pass, accumulated over the step's questions: the
        # loss of 2 × 4 rollouts of ~800 tokens at once took over 20 GB on a CPU (SmolLM2-135M)
        per_device_train_batch_size=config.generations,
        gradient_accumulation_steps=config.questions_per_step,
        num_generations=config.generations,
        max_completion_length=config.max_completion_tokens,
        temperature=config.temperature,
        learning_rate=config.learning_rate,
        lr_scheduler_type="cosine",
        beta=config.beta,
        logging_steps=1,
        save_steps=config.save_steps,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        # saves memory (the loss over 4 rollouts of ~800 tokens took over 8 GB without it); with
        # transformers' own generation on a CPU it would also turn off generation's KV cache
        gradient_checkpointing=torch.cuda.is_available() or config.rollouts == "llama.cpp",
        bf16=False,
        seed=config.seed,
        disable_tqdm=True,
        shuffle_dataset=False,
    )
    sampler = None
    if config.rollouts == "llama.cpp":
        from podium.train.rollouts import RolloutSampler, prompt_key, rollout_grammar

        grammars = {}
        for row in rows:
            shown = json.loads(row["pool"])
            grammars[prompt_key(row["prompt"])] = rollout_grammar(
                len(shown),
                config.max_steps_per_workflow,
                roles=config.roles,
                # a bank's replayable workflows for this pool; none fits (e.g. only the vote
                # tool shown): any valid workflow, which scores 0
                choices=replay.replayable(shown, config.max_steps_per_workflow) or None,
            )
        sampler = RolloutSampler(
            config.model,
            grammars,
            max_tokens=config.max_completion_tokens,
            temperature=config.temperature,
            seed=config.seed,
        )
    trainer = GRPOTrainer(
        model=model,
        rollout_func=sampler,
        reward_funcs=[reward_fn],  # type: ignore[list-item]
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft,
        callbacks=[_Metrics()],
    )
    trainer.remove_callback(PrinterCallback)  # it prints raw log dicts to stdout; metrics go to metrics.jsonl
    trainer.train(resume_from_checkpoint=resume or None)
    trainer.save_model(str(out / "adapter"))
    return _finish(out, config, metrics, warm_loss)


def _finish(out: Path, config: GRPOTrainConfig, metrics: list[StepMetrics], warm_loss: list[float]) -> GRPOResult:
    """Record the configuration and export ``out/adapter`` for llama.cpp."""
    (out / "train-config.json").write_text(json.dumps(asdict(config), indent=1) + "\n", encoding="utf-8")
    try:
        adapter = lora_to_gguf(out / "adapter", config.model, out / "adapter.gguf")
    except ConfigError as exc:  # keep the trained adapter and its record; `podium conductor export` retries
        return GRPOResult(metrics, None, str(exc), warm_loss)
    return GRPOResult(metrics, adapter, warm_start_loss=warm_loss)


def _row(task: Task, source: ReplaySource, config: GRPOTrainConfig, rng: random.Random) -> dict[str, Any]:
    """One training row: the conductor prompt for ``task`` over the whole pool or, with
    ``adaptive_pool``, a random non-empty subset of it in random order (paper §4.4), each worker
    shown with what the source says of it; and the warm start's target for that pool."""
    models = source.workers()
    if config.adaptive_pool and len(models) > 1:
        models = rng.sample(models, rng.randint(1, len(models)))
    examples = FEW_SHOT if config.few_shot else ()
    roles = tuple(ROLES.values()) if config.roles else ()
    descriptions = [source.description(m) for m in models]
    prompt = conductor_messages(
        task.question, descriptions, max_steps=config.max_steps_per_workflow, few_shot=examples, roles=roles
    )
    target = source.target(models, config.max_steps_per_workflow, rng)
    return {"prompt": prompt, "task_id": task.id, "pool": json.dumps(models), "target": target or ""}
