"""GRPO rollouts sampled by llama.cpp under the run-time grammar (``--rollouts llama.cpp``).

TRL samples the conductor's workflows with transformers' ``generate`` by default: on a CPU that
is the slowest part of a GRPO step, and since nothing constrains the sample, most of a small
model's early workflows do not parse (25 % parsed in the first step on the bank,
docs/learned-workflows.md). Here each step's rollouts are sampled instead by llama.cpp — the
runtime the trained conductor runs on — from the base GGUF plus the *current* LoRA adapter
(saved and exported with :func:`podium.train.export.lora_to_gguf` once per optimiser step), under
the grammar that run time applies: a reasoning line, then the three lists of
:func:`podium.conductor.grammar.workflow_grammar` for the row's pool size (with role names as the
only subtasks when the source has roles). So every complete sample is a valid workflow, and what
is trained is what runs.

TRL then scores the samples and computes the policy's log-probabilities of their tokens with the
PyTorch model, as for its own samples (TRL's ``rollout_func``, an experimental hook of TRL 1.16).
The samples come from the grammar-masked distribution, not the policy's own: the usual
approximation of constrained decoding in RL; no importance-sampling correction is applied
(``logprobs`` None).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podium.conductor.grammar import choice_grammar, max_plan_chars, workflow_grammar
from podium.conductor.prompt import REASONING_PREFIX
from podium.llama_runtime import load_llama_cpp
from podium.local_models import resolve_model
from podium.roles import ROLES
from podium.train.export import lora_to_gguf

__all__ = ["REASONING_CHARS", "RolloutSampler", "max_rollout_tokens", "prompt_key", "rollout_grammar"]

REASONING_CHARS = 200
"""Longest reasoning line a rollout may write, characters (run time bounds it in tokens)."""


def prompt_key(messages: Sequence[Any]) -> str:
    """A training row's prompt as a lookup key: its messages' texts (TRL hands the prompts back
    through a ``datasets`` table, which may add empty fields to the messages)."""
    return "\n\n".join(str(m["content"]) for m in messages)


def rollout_grammar(pool_size: int, max_steps: int, *, roles: bool, choices: Sequence[str] | None = None) -> str:
    """GBNF for one whole conductor output as run time produces it: ``Reasoning:`` and one line,
    then the three lists over ``pool_size`` workers (role names as subtasks when ``roles``) — or,
    with ``choices`` (a workflow bank's replayable workflows for the shown pool, each as its three
    lists), exactly one of those, so that every sample is scored exactly.

    Raises ValueError for a pool_size or max_steps below 1, or an empty ``choices``."""
    if choices is not None:
        if not choices:
            raise ValueError("no replayable workflow fits this pool")
        lists = choice_grammar(choices).replace("root ::=", "lists ::=", 1)
    else:
        names, chars = _subtasks(roles)
        lists = workflow_grammar(pool_size, max_steps, chars, subtasks=names).replace("root ::=", "lists ::=", 1)
    prefix = json.dumps(REASONING_PREFIX + " ")
    return f'root ::= {prefix} [^\\n]{{1,{REASONING_CHARS}}} "\\n" lists\n' + lists


class RolloutSampler:
    """TRL's ``rollout_func``: one llama.cpp sample per prompt TRL passes (TRL repeats each
    question's prompt G times, consecutively).

    Args:
        base_model: embedded model id of the conductor's base (its GGUF file).
        grammars: each training row's :func:`rollout_grammar` (its shown pool; its replayable
            workflows on a bank), keyed by :func:`prompt_key` of its prompt.
        max_tokens: the completion limit, tokens (a sample cut there does not parse).
        temperature: sampling temperature; seed: the base of each sample's seed.
        threads: llama.cpp threads (None: its default).
    """

    def __init__(
        self,
        base_model: str,
        grammars: dict[str, str],
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        threads: int | None = None,
    ) -> None:
        self.base_model, self.grammars, self.max_tokens = base_model, grammars, max_tokens
        self.temperature, self.seed, self.threads = temperature, seed, threads
        self._llama: Any = None
        self._step = -1
        self._compiled: dict[str, Any] = {}
        self._folder = tempfile.TemporaryDirectory(prefix="podium-rollouts-")
        self.samples = 0

    def _load(self, model: Any) -> Any:
        """llama.cpp on the base plus the adapter as it is now (``model``: the peft model)."""
        llama_cpp = load_llama_cpp()
        folder = Path(self._folder.name)
        lora: str | None = None
        if hasattr(model, "peft_config"):
            model.save_pretrained(str(folder / "adapter"))
            exported = lora_to_gguf(folder / "adapter", self.base_model, folder / "adapter.gguf")
            lora = None if exported.identity else str(folder / "adapter.gguf")  # lora_B = 0: the base
        if self._llama is not None:
            self._llama.close()
        self._llama = llama_cpp.Llama(
            model_path=str(resolve_model(self.base_model)),
            lora_path=lora,
            n_ctx=4096,
            n_threads=self.threads,
            seed=self.seed,
            verbose=False,
        )
        return self._llama

    def _grammar(self, key: str) -> Any:
        if key not in self._compiled:
            from llama_cpp.llama_grammar import LlamaGrammar

            if key not in self.grammars:
                raise RuntimeError("a rollout prompt that no training row holds")
            self._compiled[key] = LlamaGrammar.from_string(self.grammars[key], verbose=False)
        return self._compiled[key]

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        step = int(trainer.state.global_step)
        if self._llama is None or step != self._step:
            self._load(trainer.model)
            self._step = step
        llama, tokenizer = self._llama, trainer.processing_class
        eos = llama.token_eos()
        # the prompts' tokens exactly as TRL's own generation path makes them
        tokenized = tokenizer.apply_chat_template(
            conversation=list(prompts), add_generation_prompt=True, tokenize=True, return_dict=True
        )
        prompt_ids: list[list[int]] = [list(ids) for ids in tokenized["input_ids"]]
        completion_ids: list[list[int]] = []
        for i, (prompt, ids) in enumerate(zip(prompts, prompt_ids, strict=True)):
            grammar = self._grammar(prompt_key(prompt))
            llama.set_seed(self.seed * 1_000_003 + step * 10_007 + i)
            out: list[int] = []
            for token in llama.generate(ids, temp=self.temperature, top_k=0, top_p=1.0, min_p=0.0, grammar=grammar):
                out.append(token)
                if token == eos or len(out) >= self.max_tokens:
                    break
            completion_ids.append(out)
            self.samples += 1
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


def max_rollout_tokens(pool_size: int, max_steps: int, *, roles: bool) -> int:
    """Characters an output of :func:`rollout_grammar` can have at most (a token is at least one)."""
    _, chars = _subtasks(roles)
    return len(REASONING_PREFIX) + 2 + REASONING_CHARS + max_plan_chars(pool_size, max_steps, chars)


def _subtasks(roles: bool) -> tuple[list[str] | None, int]:
    """The subtasks the grammar allows (role names, or None: free text) and their longest length,
    characters (240 for free text, as run time allows)."""
    names: list[str] | None = list(ROLES) if roles else None
    return names, max(len(n) for n in names) if names else 240
