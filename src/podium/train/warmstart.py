"""Format warm start: a short supervised pass that teaches a small base conductor the workflow
format before GRPO, without teaching it which workers to choose.

GRPO learns only from questions whose G rollouts get different rewards, and a reward of 0 is all
an unparseable workflow gets. The small local base models almost never write a parseable
workflow (measured in docs/training.md: SmolLM2-135M 0/16, Qwen2.5-Coder-0.5B 0–3/16), so GRPO
from them has nothing to learn from. The warm start fine-tunes the same LoRA adapter that GRPO then
trains (TRL's ``SFTTrainer``, loss on the completion only) on workflows written in the format
whose **decisions are random**: each step's worker is drawn uniformly from the pool shown, and
the shape (one step; solve then verify; two samples then aggregate — role templates of
:mod:`podium.roles`) is drawn at random too. So after
the warm start the conductor writes the format and chooses like a coin; what it learns about
*which* workers to use and how many steps pay off comes from GRPO's reward alone. (The paper
trains a 7B base that already writes the format; this step stands in for that capacity.)

The prompts are GRPO's own (:func:`podium.train.grpo.train_grpo`): each training-split question
once, with an adaptive pool drawn as GRPO draws them; no test question is used.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.conductor.prompt import workflow_text
from podium.roles import subtask

__all__ = ["SHAPES", "Shape", "format_target", "warm_start"]


@dataclass(frozen=True)
class Shape:
    """One workflow shape: its reasoning line, subtasks and access lists (as written)."""

    reasoning: str
    subtasks: tuple[str, ...]
    access_list: tuple[str, ...]


SHAPES: tuple[Shape, ...] = (
    Shape("One worker solves the whole question in a single step.", (subtask("solve"),), ("[]",)),
    Shape(
        "One worker solves the question, a second checks the solution and gives the final answer.",
        (subtask("solve"), subtask("verify")),
        ("[]", "[0]"),
    ),
    Shape(
        "Two workers answer the question independently, a third combines them into the final answer.",
        (subtask("sample"), subtask("sample"), subtask("aggregate")),
        ("[]", "[]", "[0, 1]"),
    ),
)
"""The shapes the warm start writes, drawn with weights 3 : 2 : 1 (shorter first)."""


def format_target(n_workers: int, max_steps: int, rng: random.Random) -> str:
    """One workflow in the conductor's output format with random decisions: a shape of at most
    ``max_steps`` steps and, per step, a worker drawn uniformly from ``0 … n_workers-1``.

    Raises ValueError for an empty pool or ``max_steps`` < 1."""
    if n_workers < 1 or max_steps < 1:
        raise ValueError(f"need at least one worker and one step (got {n_workers} workers, {max_steps} steps)")
    shapes = [s for s in SHAPES if len(s.subtasks) <= max_steps]
    shape = rng.choices(shapes, weights=[3, 2, 1][: len(shapes)])[0]
    ids = [rng.randrange(n_workers) for _ in shape.subtasks]
    return workflow_text(shape.reasoning, ids, shape.subtasks, shape.access_list)


def warm_start(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    out: Path,
    *,
    max_steps: int,
    epochs: int,
    learning_rate: float,
    lora_r: int,
    lora_alpha: int,
    seed: int,
    on_step: Callable[[int, int, float], None] | None = None,
) -> tuple[Any, list[float]]:
    """Fine-tune a fresh LoRA adapter on ``model`` to write :func:`format_target` workflows.

    Args:
        rows: GRPO's training rows (``prompt`` messages and ``pool`` as a JSON list); each gets
            one target with random decisions for its pool: the row's own ``target`` when it has
            one (a workflow bank's random composition), else :func:`format_target`.
        out: the warm start's TRL output folder (``out/warm-start``; no checkpoints are kept).
        epochs: passes over ``rows``; learning_rate: AdamW, constant.
        on_step: called after each optimiser step with (step, total steps, training loss).

    Returns:
        (the peft model with the warmed adapter, still trainable; the training loss per logged step).
    """
    import json

    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined]

    rng = random.Random(seed)
    examples = [
        {
            "prompt": row["prompt"],
            "completion": [
                {
                    "role": "assistant",
                    "content": row.get("target") or format_target(len(json.loads(row["pool"])), max_steps, rng),
                }
            ],
        }
        for row in rows
    ]
    args = SFTConfig(
        output_dir=str(out / "warm-start"),
        num_train_epochs=epochs,
        per_device_train_batch_size=2,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not _cuda(),
        gradient_checkpointing=_cuda(),  # as in GRPO: memory on a GPU, only time on a CPU
        bf16=False,
        seed=seed,
        disable_tqdm=True,
        max_length=None,
    )
    peft = LoraConfig(r=lora_r, lora_alpha=lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        peft_config=peft,
    )
    trainer.remove_callback(PrinterCallback)
    if on_step is not None:
        report = on_step

        class _Progress(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if logs and "loss" in logs:
                    report(int(state.global_step), int(state.max_steps), float(logs["loss"]))

        trainer.add_callback(_Progress())
    trainer.train()
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    return trainer.model, losses


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
