"""Pool files: the packaged default and clear errors for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.pool import load_pool
from tests.conftest import POOLS


def test_packaged_default_is_the_local_pool() -> None:
    pool = load_pool()
    assert pool.name == "local"
    models = [w for w in pool.workers if w.backend == "llama_cpp"]
    assert [w.model for w in models] == [
        "qwen2.5-coder-1.5b-instruct",
        "qwen2.5-coder-0.5b-instruct",
        "smollm2-135m-instruct",
    ]
    assert [w.backend for w in pool.workers if w.backend != "llama_cpp"] == ["python", "vote"]
    # prices follow compute: the bigger model costs more per token, in and out
    prices = [(w.price.input, w.price.output) for w in models]
    assert prices == sorted(prices, reverse=True)
    assert load_pool("local") == pool
    # its conductor: the shipped plan policy, whose every plan the pool can run within its step
    # limit, on an encoder that runs in llama.cpp (the quickstart installs no torch)
    from podium.conductor.compose import plan_workflow, second_round_workflow
    from podium.conductor.plans import PlanPolicy, is_plan_policy

    assert pool.conductor.light is not None and pool.conductor.light_name == "light:local"
    assert is_plan_policy(pool.conductor.light)
    # byte for byte the table frozen before docs/eval/fresh8 ran (the figures the README quotes)
    frozen = Path(__file__).parents[1] / "docs" / "eval" / "fresh8" / "capped-policy.npz"
    assert Path(pool.conductor.light).read_bytes() == frozen.read_bytes()
    policy = PlanPolicy.load(pool.conductor.light)
    reached = {policy.plans[i].id for i in policy.reachable([True] * len(policy.plans))}
    assert reached >= {
        "cascade(vote(solve@1.5b,run(program@1.5b))→+sample×3@1.5b)",
        "check(run(test@1.5b))→checked(sample1@1.5b,solve@0.5b)",
    }
    assert policy.embedder == "llama.cpp-mean:qwen2.5-coder-0.5b-instruct"
    names = [w.name for w in pool.workers]
    for plan in policy.plans:
        rounds = [plan_workflow(plan.members, policy.columns, names, vote_worker="vote")]
        if plan.is_cascade:
            rounds.append(second_round_workflow(plan, policy.columns, names, vote_worker="vote"))
        assert all(0 < len(workflow) <= pool.max_steps for workflow in rounds), plan.id
    # its gate: a question unlike all 120 training questions gets the 1.5B worker's plain answer
    # (bench/policy_agreement.py measured which real questions are outside: docs/learned-workflows.md)
    assert policy.support.shape == (120, 896) and 0 < policy.radius < 1
    assert policy.plans[policy.fallback].id == "solve@1.5b"
    assert not policy.outside(policy.support[:5]).any()
    stranger = -policy.support.mean(axis=0, keepdims=True)
    assert policy.outside(stranger).all() and policy.choose(["?"], stranger) == [policy.fallback]


def test_local_light_keeps_the_routing_light_conductor() -> None:
    from podium.conductor.light import LightPolicy

    pool = load_pool("local-light")
    assert pool.conductor.light is not None and pool.conductor.light_name == "light:local-light"
    assert LightPolicy.load(pool.conductor.light).workers == tuple(w.name for w in pool.workers)


def test_local_lean_runs_the_capped_table_the_seventh_fresh_test_ran() -> None:
    """The preset's policy is byte for byte the one frozen before docs/eval/fresh7 ran, and it
    reaches the checked cascade (math) and the one-sample checked code cascade, as that test
    reports; its longest plan fits the pool's step limit."""
    from podium.conductor.plans import PlanPolicy

    pool = load_pool("local-lean")
    assert pool.conductor.light is not None and pool.conductor.light_name == "light:local-lean"
    frozen = Path(__file__).parents[1] / "docs" / "eval" / "fresh7" / "capped-policy.npz"
    assert Path(pool.conductor.light).read_bytes() == frozen.read_bytes()
    policy = PlanPolicy.load(pool.conductor.light)
    reached = {policy.plans[i].id for i in policy.reachable([True] * len(policy.plans))}
    code = "check(run(test@1.5b))→checked(sample1@1.5b,solve@0.5b)"
    assert {"check(run(program@1.5b))→solve@1.5b", code} <= reached
    assert pool.max_steps >= 5  # the code cascade's second round has five steps


def test_a_copied_local_pool_file_still_finds_the_packaged_policy(tmp_path: Path) -> None:
    from podium.pool import packaged_pools

    copy = tmp_path / "my-pool.toml"
    copy.write_text(packaged_pools()["local"].read_text().replace('name = "local"', 'name = "mine"'))
    assert load_pool(copy).conductor.light == load_pool("local").conductor.light


def test_local_lm_is_the_local_models_with_the_lm_conductor() -> None:
    local, lm = load_pool("local"), load_pool("local-lm")
    assert list(lm.workers) == [w for w in local.workers if w.backend == "llama_cpp"] and lm.fallback == local.fallback
    assert lm.conductor.worker == "qwen2.5-coder-1.5b" and lm.conductor.light is None


def test_the_reasoning_budget_loads_under_its_older_name_too(tmp_path: Path) -> None:
    # pool files written before the rename still load, to the same value and as set by the file
    # (so a trained conductor's own setting does not replace it: runtime's model_fields_set)
    text = (POOLS / "smollm2.toml").read_text()
    assert "reasoning_max_tokens = 32" in text
    older = tmp_path / "older.toml"
    older.write_text(text.replace("reasoning_max_tokens = 32", "reasoning_tokens = 32"))
    new, old = load_pool(POOLS / "smollm2.toml").conductor, load_pool(older).conductor
    assert new.reasoning_max_tokens == old.reasoning_max_tokens == 32
    assert "reasoning_max_tokens" in old.model_fields_set
    both = tmp_path / "both.toml"
    both.write_text(text.replace("reasoning_max_tokens = 32", "reasoning_max_tokens = 32\nreasoning_tokens = 8"))
    with pytest.raises(ConfigError):  # one setting given twice is a mistake, not a silent pick
        load_pool(both)


def test_defaults_merge_under_worker_settings() -> None:
    pool = load_pool(POOLS / "smollm2.toml")
    a, b = (pool.merged(w) for w in pool.workers)
    assert (a.temperature, b.temperature) == (0.2, 0.0)  # b overrides the default
    assert a.max_tokens == b.max_tokens == 48


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = ", "not valid TOML"),
        ("[conductor]\nworker='x'\n[fallback]\nworker='x'\n", "workers"),
        (
            "[conductor]\nworker='nope'\n[fallback]\nworker='a'\n[[workers]]\nname='a'\nmodel='smollm2-135m-instruct'\n",
            "not a worker of this pool",
        ),
        (
            "[conductor]\nworker='a'\n[fallback]\nworker='a'\n[[workers]]\nname='a'\nmodel='smollm2-135m-instruct'\nmax_tokens=-1\n",
            "workers.0.max_tokens",
        ),
        (
            "[conductor]\nworker='a'\n[fallback]\nworker='a'\n[[workers]]\nname='a'\nmodel='smollm2-135m-instruct'\ntemprature=0.1\n",
            "temprature",
        ),
        (
            "[conductor]\nworker='a'\n[fallback]\nworker='a'\n[[workers]]\nname='a'\nmodel='smollm2-135m-instruct'\n"
            "[[workers]]\nname='a'\nmodel='smollm2-135m-instruct'\n",
            "unique",
        ),
    ],
    ids=["bad-toml", "no-workers", "unknown-conductor-worker", "negative-max-tokens", "typo", "duplicate"],
)
def test_bad_pool_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_pool(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[conductor]\nworker='a'\n[fallback]\nworker='a'\n[[workers]]\nname='a'\nmodel='smollm2-135m'\n",
            "neither an embedded model",
        ),
        ("[[workers]]\nname='a'\nbackend='python'\n", r"conductor: required, missing"),
        (  # re-test 17c: `output = 1e400` (inf) was accepted, pricing every call at $inf
            "name = 'x'\n[conductor]\nworker = 'a'\n[fallback]\nworker = 'a'\n[[workers]]\nname = 'a'\n"
            "backend = 'openai'\nbase_url = 'http://127.0.0.1:1/v1'\nmodel = 'm'\n"
            "price = { input = 1.0, output = 1e400 }\n",
            "finite",
        ),
    ],
    ids=["unknown-model-id", "missing-sections", "infinite-price"],
)
def test_more_bad_pool_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_pool(path)


def test_missing_pool_file_lists_the_presets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not found.*local"):
        load_pool(tmp_path / "nope.toml")


def test_unpriced_remote_workers_of_every_provider_take_the_price_table() -> None:
    """Anthropic and Gemini workers without a price must be priced from the table as OpenAI ones
    are: a zero price would make every cost cap and budget blind to them."""
    from podium.pool import PRICE_TABLE, load_pool

    config = load_pool("frontier")
    for w in config.workers:
        if w.price is None and w.backend in ("openai", "anthropic", "gemini"):
            price = config.merged(w).price
            assert price is not None and price == PRICE_TABLE[w.model or ""] and price.output > 0, w.name
