"""GRPO rollouts sampled by llama.cpp under the run-time grammar (podium.train.rollouts)."""

from __future__ import annotations

import json
import random
import types
from pathlib import Path
from typing import Any

import pytest

from podium.parse import try_parse_workflow
from podium.roles import ROLES
from podium.train.rollouts import max_rollout_tokens, prompt_key, rollout_grammar

BANK = Path(__file__).parent.parent / "data" / "banks" / "local"


def test_the_grammar_is_the_reasoning_line_then_the_run_time_lists() -> None:
    grammar = rollout_grammar(3, 2, roles=True)
    assert grammar.startswith('root ::= "Reasoning: " [^\\n]{1,200} "\\n" lists\n')
    assert "lists ::= plan1 | plan2" in grammar and "root ::=" not in grammar.split("\n", 1)[1]
    assert 'id ::= "0" | "1" | "2"' in grammar
    assert all(f'\\"{name}\\"' not in grammar and f'"{name}"' in grammar for name in ROLES)  # names, not texts
    free = rollout_grammar(2, 1, roles=False)
    assert '[^"\\\\\\n]{1,240}' in free  # free-text subtasks as run time allows without roles
    with pytest.raises(ValueError):
        rollout_grammar(0, 1, roles=False)
    # a bank's replayable workflows: exactly those, as literal alternatives
    only = rollout_grammar(2, 3, roles=True, choices=['model_id = [1]\nsubtasks = ["solve"]\naccess_list = [[]]'])
    assert only.endswith('lists ::= "model_id = [1]\\nsubtasks = [\\"solve\\"]\\naccess_list = [[]]"\n')
    with pytest.raises(ValueError, match="no replayable"):
        rollout_grammar(2, 3, roles=True, choices=[])


def test_a_rollout_key_ignores_the_empty_fields_a_table_adds() -> None:
    messages = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]
    widened = [{**m, "name": None} for m in messages]
    assert prompt_key(messages) == prompt_key(widened) == "a\n\nb"


@pytest.mark.model
def test_every_llama_cpp_rollout_of_the_untrained_conductor_replays_on_the_bank() -> None:
    """The untrained SmolLM2-135M, sampled at temperature 1 under each row's grammar (its
    pool's replayable workflows), on two bank questions × 2 samples each (real llama.cpp, real
    tokenizer; only TRL's trainer is a namespace holding the step, model and tokenizer): every
    sample parses over its row's pool, ends with the end-of-turn token, and the bank scores it
    exactly — the reward GRPO gets is never the unreplayable 0."""
    pytest.importorskip("trl")
    from transformers import AutoTokenizer

    from podium.eval.bank import read_bank
    from podium.local_models import resolve_model
    from podium.pool import load_pool
    from podium.train.grpo import GRPOTrainConfig, _row
    from podium.train.rollouts import RolloutSampler
    from podium.train.sources import BankSource

    pool = load_pool("local-tools")
    source = BankSource(read_bank(BANK), {w.name: w.description for w in pool.workers})
    config = GRPOTrainConfig(roles=True, rollouts="llama.cpp", max_steps_per_workflow=3)
    rng = random.Random(0)
    rows = [_row(task, source, config, rng) for task in source.tasks("train")[:2]]
    shown = {prompt_key(r["prompt"]): json.loads(r["pool"]) for r in rows}
    grammars = {k: rollout_grammar(len(s), 3, roles=True, choices=source.replayable(s, 3)) for k, s in shown.items()}
    limit = max(max_rollout_tokens(len(s), 3, roles=True) for s in shown.values())
    sampler = RolloutSampler(config.model, grammars, max_tokens=limit, temperature=1.0, seed=0, threads=2)
    path = resolve_model(config.model)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    trainer = types.SimpleNamespace(
        state=types.SimpleNamespace(global_step=0), model=object(), processing_class=tokenizer
    )
    prompts = [r["prompt"] for r in rows for _ in range(2)]
    out = sampler(prompts, trainer)
    assert out["logprobs"] is None and len(out["completion_ids"]) == len(prompts) == sampler.samples
    texts = []
    tasks = [r["task_id"] for r in rows for _ in range(2)]
    for prompt, task, ids, completion in zip(prompts, tasks, out["prompt_ids"], out["completion_ids"], strict=True):
        expected = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
        assert ids == list(expected["input_ids"])
        assert completion[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
        text = tokenizer.decode(completion[:-1])
        pool = shown[prompt_key(prompt)]
        workflow, error = try_parse_workflow(text, pool_size=len(pool), max_steps=3)
        assert error is None and workflow is not None, text
        assert all(s in ROLES for s in workflow.subtasks)
        _, parts = source.reward(text, pool, task, lam=0.0, mu=0.0, max_steps=3)
        assert parts["replayable"] is True, text
        texts.append(text)
    assert len(set(texts)) > 1  # temperature 1 with a per-sample seed: the samples differ


@pytest.mark.parametrize("order", ["pool", "reversed"])
def test_every_replayable_choice_of_the_bank_replays_in_any_pool_order(order: str) -> None:
    """BankSource.replayable lists the catalogue's one-round plans as the conductor writes them;
    each one, written after a reasoning line, parses and the bank scores it (no unreplayable 0)."""
    from podium.eval.bank import read_bank
    from podium.pool import load_pool
    from podium.train.sources import BankSource

    pool = load_pool("local-tools")
    source = BankSource(read_bank(BANK), {w.name: w.description for w in pool.workers})
    shown = source.workers() if order == "pool" else source.workers()[::-1]
    choices = source.replayable(shown, 3)
    assert choices and len(set(choices)) == len(choices)
    task = source.tasks("train")[0]
    for lists in choices:
        reward, parts = source.reward(f"Reasoning: x\n{lists}", shown, task.id, lam=0.0, mu=0.0, max_steps=3)
        assert parts["parsed"] and parts["replayable"], lists
        assert reward >= 0.5  # 0.5 + 0.5 · score at λ = μ = 0


class GrammarRecorder:
    """Unit-test fake conductor model (grammar-capable): records each call's grammar and writes
    the first alternative of a choice grammar (or a fixed reasoning line)."""

    def __init__(self) -> None:
        from podium.workers.base import WorkerInfo

        self.info = WorkerInfo("lm", grammar=True)
        self.grammars: list[str | None] = []

    async def complete(self, call: Any) -> Any:
        from podium.workers.base import Completion, Usage

        self.grammars.append(call.grammar)
        text = " choose a plan\n"
        if call.grammar and call.grammar.startswith('root ::= "model_id'):
            text = json.loads(call.grammar.removeprefix("root ::= ").split(" | ")[0].strip())
        return Completion(text, Usage(1, 1), 0.0, 0.0)


@pytest.mark.parametrize("plans", [True, False])
def test_a_conductor_trained_among_plans_runs_among_them(plans: bool) -> None:
    """LMConductorSettings.plans (set for a version trained with llama.cpp rollouts on a bank):
    the lists are written under the grammar of the catalogue's plans the pool can run, the same
    choices training sampled from — so its workflows replay on the bank; without it, the roles
    grammar."""
    import asyncio

    from podium.conductor.catalogue import plan_lists
    from podium.conductor.grammar import choice_grammar
    from podium.conductor.lm import LMConductor, LMConductorSettings
    from podium.eval.bank import read_bank
    from podium.eval.bank_replay import bank_pool

    pool = bank_pool(read_bank(BANK))
    model = GrammarRecorder()
    conductor = LMConductor(model, LMConductorSettings(roles=True, plans=plans, few_shot=False))  # type: ignore[arg-type]
    attempt = asyncio.run(conductor.plan("What is 2 + 2?", pool, max_steps=3))
    choices = plan_lists([w.info.name for w in pool], 3, vote_worker="vote")
    # by hand: the 11 one-member plans (3 solves, 2 × run(program), 2 × state(program), test, fix(test),
    # 2 × verify) fit in 3 steps; every vote has at least 3 members plus its vote step, so none does
    assert len(choices) == 11
    assert (model.grammars[-1] == choice_grammar(choices)) is plans
    if plans:
        assert attempt.workflow is not None and attempt.raw_output.endswith(choices[0])
