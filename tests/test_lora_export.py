"""LoRA export to GGUF (podium.train.export) and trained LM conductors in llama.cpp.

Unit tests write real but tiny files: a GGUF base model of two blocks (gguf's own writer) and
peft-format adapters (adapter_config.json + safetensors). The ``model`` tests use SmolLM2-135M:
llama.cpp running an exported adapter must change the logits as transformers + peft do, and a
registry version runs as an LM conductor (``lm:NAME@vN``, the pool file's ``version``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from podium.errors import ConfigError

gguf = pytest.importorskip("gguf")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from podium.train.export import (  # noqa: E402
    base_info,
    check_adapter_config,
    gguf_tensor_name,
    lora_to_gguf,
)
from podium.workers.base import Call  # noqa: E402

HIDDEN, KV, FFN, HEADS, KV_HEADS, BLOCKS, VOCAB = 16, 8, 24, 4, 2, 2, 32
PREFIX = "base_model.model.model.layers"


def write_base(path: Path, arch: str = "llama") -> Path:
    """A two-block GGUF model file with the tensor names and ggml shapes of the real thing."""
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(BLOCKS)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_embedding_length(HIDDEN)
    rng = np.random.default_rng(0)
    shapes = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (KV, HIDDEN), "attn_v": (KV, HIDDEN),
              "attn_output": (HIDDEN, HIDDEN), "ffn_gate": (FFN, HIDDEN), "ffn_up": (FFN, HIDDEN),
              "ffn_down": (HIDDEN, FFN)}  # fmt: skip
    writer.add_tensor("token_embd.weight", rng.normal(size=(VOCAB, HIDDEN)).astype(np.float32))
    for block in range(BLOCKS):
        writer.add_tensor(f"blk.{block}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        for name, shape in shapes.items():
            writer.add_tensor(f"blk.{block}.{name}.weight", rng.normal(size=shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_adapter(folder: Path, tensors: dict[str, np.ndarray[Any, Any]], **config: Any) -> Path:
    """A peft LoRA adapter folder; ``config`` overrides adapter_config.json fields."""
    folder.mkdir(parents=True, exist_ok=True)
    base = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "bias": "none", "use_dora": False, "use_rslora": False,
            "fan_in_fan_out": False, "modules_to_save": None, "target_modules": ["q_proj"], "rank_pattern": {},
            "alpha_pattern": {}}  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps({**base, **config}))
    safetensors_numpy.save_file(tensors, str(folder / "adapter_model.safetensors"))
    return folder


def lora_pair(module: str, n_in: int, n_out: int, r: int = 2, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return {
        f"{module}.lora_A.weight": rng.normal(size=(r, n_in)).astype(np.float32),
        f"{module}.lora_B.weight": rng.normal(size=(n_out, r)).astype(np.float32),
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_base(tmp_path_factory.mktemp("base") / "tiny-llama.gguf")


def test_base_info_reads_architecture_heads_and_ggml_shapes(base: Path) -> None:
    info = base_info(base)
    assert (info.architecture, info.blocks, info.heads, info.kv_heads) == ("llama", 2, 4, 2)
    # ggml lists the fastest dimension first: a (out = 8, in = 16) projection is [16, 8]
    assert info.shapes["blk.1.attn_k.weight"] == (HIDDEN, KV)


def test_peft_names_map_to_llama_cpp_names(base: Path) -> None:
    info = base_info(base)
    cases = {
        f"{PREFIX}.1.self_attn.q_proj.lora_A.weight": ("blk.1.attn_q.weight.lora_a", "a"),
        f"{PREFIX}.0.self_attn.k_proj.lora_B.weight": ("blk.0.attn_k.weight.lora_b", "b"),
        f"{PREFIX}.0.self_attn.o_proj.lora_A.weight": ("blk.0.attn_output.weight.lora_a", "a"),
        f"{PREFIX}.1.mlp.gate_proj.lora_B.weight": ("blk.1.ffn_gate.weight.lora_b", "b"),
        f"{PREFIX}.1.mlp.down_proj.lora_A.weight": ("blk.1.ffn_down.weight.lora_a", "a"),
    }
    for peft_key, expected in cases.items():
        assert gguf_tensor_name(peft_key, info) == expected


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (f"{PREFIX}.0.self_attn.q_proj.lora_magnitude_vector", "not a LoRA A/B weight"),  # DoRA
        ("base_model.model.model.embed_tokens.lora_embedding_A", "not a LoRA A/B weight"),
        (f"{PREFIX}.0.self_attn.q_proj.lora_A.bias", "not a LoRA A/B weight"),
        (f"{PREFIX}.0.self_attn.rotary_emb.lora_A.weight", "no GGUF counterpart"),
        ("base_model.model.lm_head.lora_A.weight", "does not have"),  # tied embeddings: no output.weight
        (f"{PREFIX}.7.self_attn.q_proj.lora_A.weight", "no GGUF counterpart"),  # block 7 of 2
    ],
)
def test_tensors_without_a_llama_cpp_place_are_refused(base: Path, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        gguf_tensor_name(key, base_info(base))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"use_dora": True}, "use_dora"),
        ({"use_rslora": True}, "use_rslora"),
        ({"bias": "all"}, "bias"),
        ({"lora_bias": True}, "lora_bias"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"alpha_pattern": {"q_proj": 8}}, "alpha_pattern"),
        ({"fan_in_fan_out": True}, "fan_in_fan_out"),
        ({"target_parameters": ["experts.gate_up_proj"]}, "target_parameters"),
        ({"peft_type": "IA3"}, "only peft LORA"),
        ({"lora_alpha": 0}, "lora_alpha"),
    ],
)
def test_adapter_options_llama_cpp_cannot_express_are_refused(change: dict[str, Any], message: str) -> None:
    config = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "bias": "none", "modules_to_save": None}
    assert check_adapter_config({**config, "rank_pattern": {"q_proj": 4}}) == 16.0
    with pytest.raises(ConfigError, match=message):
        check_adapter_config({**config, **change})


@pytest.mark.slow  # imports transformers (seconds)
def test_export_writes_the_layout_llama_cpp_checks(base: Path, tmp_path: Path) -> None:
    """lora_a keeps peft's (r, in), lora_b its (out, r) — ggml ne [in, r] and [r, out], the
    shapes llama.cpp compares with the base weight — except that lora_b of the llama q/k
    projections gets the GGUF conversion's row order: transformers' GGUF loader, which undoes that
    order for the base weights, must give back peft's lora_B."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    tensors = {
        **lora_pair(f"{PREFIX}.0.self_attn.q_proj", HIDDEN, HIDDEN, seed=1),
        **lora_pair(f"{PREFIX}.1.self_attn.k_proj", HIDDEN, KV, seed=2),
        **lora_pair(f"{PREFIX}.1.self_attn.v_proj", HIDDEN, KV, seed=3),
        **lora_pair(f"{PREFIX}.0.mlp.down_proj", FFN, HIDDEN, seed=4),
    }
    adapter = write_adapter(tmp_path / "adapter", tensors)
    out = tmp_path / "adapter.gguf"
    exported = lora_to_gguf(adapter, str(base), out)
    assert exported.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert (exported.tensors, exported.rank, exported.alpha, exported.architecture) == (4, 2, 4.0, "llama")
    assert not exported.identity
    reader = gguf.GGUFReader(out)
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert fields == {"general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora",
                      "adapter.lora.alpha": 4.0}  # fmt: skip
    got = {t.name: t for t in reader.tensors}
    assert len(got) == 8

    def array(name: str) -> np.ndarray[Any, Any]:
        t = got[name]
        assert t.tensor_type == gguf.GGMLQuantizationType.F32
        return np.array(t.data).reshape(tuple(reversed([int(n) for n in t.shape])))

    assert [int(n) for n in got["blk.0.ffn_down.weight.lora_a"].shape] == [FFN, 2]  # ne [in, r]
    assert [int(n) for n in got["blk.0.ffn_down.weight.lora_b"].shape] == [2, HIDDEN]  # ne [r, out]
    np.testing.assert_array_equal(
        array("blk.0.ffn_down.weight.lora_a"), tensors[f"{PREFIX}.0.mlp.down_proj.lora_A.weight"]
    )
    np.testing.assert_array_equal(
        array("blk.1.attn_v.weight.lora_b"), tensors[f"{PREFIX}.1.self_attn.v_proj.lora_B.weight"]
    )
    processor = LlamaTensorProcessor(config={"num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS})
    for gguf_name, peft_name in (("blk.0.attn_q", "0.self_attn.q_proj"), ("blk.1.attn_k", "1.self_attn.k_proj")):
        b = array(f"{gguf_name}.weight.lora_b")
        original = tensors[f"{PREFIX}.{peft_name}.lora_B.weight"]
        assert not np.array_equal(b, original)  # reordered ...
        undone = processor.process(b, f"{gguf_name}.weight").weights
        np.testing.assert_array_equal(undone, original)  # ... exactly as transformers undoes it


def test_an_adapter_with_zero_lora_b_is_reported_as_identity(base: Path, tmp_path: Path) -> None:
    """peft starts lora_B at zero; an adapter training never moved changes nothing."""
    tensors = lora_pair(f"{PREFIX}.0.self_attn.q_proj", HIDDEN, HIDDEN)
    tensors[f"{PREFIX}.0.self_attn.q_proj.lora_B.weight"][:] = 0.0
    exported = lora_to_gguf(write_adapter(tmp_path / "adapter", tensors), str(base), tmp_path / "a.gguf")
    assert exported.identity


def test_qwen2_export_keeps_the_row_order(tmp_path: Path) -> None:
    base = write_base(tmp_path / "tiny-qwen2.gguf", arch="qwen2")
    tensors = lora_pair(f"{PREFIX}.0.self_attn.q_proj", HIDDEN, HIDDEN)
    lora_to_gguf(write_adapter(tmp_path / "adapter", tensors), str(base), tmp_path / "a.gguf")
    got = {t.name: t for t in gguf.GGUFReader(tmp_path / "a.gguf").tensors}
    b = np.array(got["blk.0.attn_q.weight.lora_b"].data).reshape(HIDDEN, 2)
    np.testing.assert_array_equal(b, tensors[f"{PREFIX}.0.self_attn.q_proj.lora_B.weight"])


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        (lora_pair(f"{PREFIX}.0.self_attn.q_proj", HIDDEN + 1, HIDDEN), "do not fit the base weight"),
        ({f"{PREFIX}.0.self_attn.q_proj.lora_A.weight": np.zeros((2, HIDDEN), np.float32)}, "incomplete"),
        ({}, "no LoRA tensors"),
    ],
)
def test_a_failed_export_names_the_cause_and_leaves_no_file(
    base: Path, tmp_path: Path, tensors: dict[str, np.ndarray[Any, Any]], message: str
) -> None:
    adapter = write_adapter(tmp_path / "adapter", tensors)
    with pytest.raises(ConfigError, match=message):
        lora_to_gguf(adapter, str(base), tmp_path / "adapter.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter"]  # no adapter.gguf, no temporary file


def test_unsupported_architectures_and_missing_adapters_are_refused(tmp_path: Path) -> None:
    gpt2 = write_base(tmp_path / "gpt2.gguf", arch="gpt2")
    adapter = write_adapter(tmp_path / "adapter", lora_pair(f"{PREFIX}.0.self_attn.q_proj", HIDDEN, HIDDEN))
    with pytest.raises(ConfigError, match="supports base architectures llama, qwen2; this base is 'gpt2'"):
        lora_to_gguf(adapter, str(gpt2), tmp_path / "a.gguf")
    with pytest.raises(ConfigError, match="is not a peft adapter"):
        lora_to_gguf(tmp_path / "nothing", str(gpt2), tmp_path / "a.gguf")
    with pytest.raises(ConfigError, match=re.escape("neither an embedded model nor an existing .gguf")):
        lora_to_gguf(adapter, str(tmp_path / "missing.gguf"), tmp_path / "a.gguf")


def test_base_info_of_a_non_gguf_file_is_a_config_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(ConfigError, match=re.escape("junk.gguf")):
        base_info(junk)


# ------------------------------------------------------------------ trained LM conductors


def store_version(home: Path, ref: str, *, exported: dict[str, Any] | None = None, **config: Any) -> Path:
    """A registry version folder of a GRPO-trained conductor (train.json as `podium train
    --policy lm` writes it); returns its folder."""
    name, number = ref.split("@v")
    folder = home / "conductors" / name / f"v{number}"
    folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "policy": "lm",
        "config": {"model": "smollm2-135m-instruct", "temperature": 1.0, "max_completion_tokens": 48, "lam": 0.0,
                   **config},
        "data": {"matrix": "m.csv", "split": "train", "tags": []},
        "history": [],
    }  # fmt: skip
    if exported is not None:
        record["adapter_gguf"] = exported
    (folder / "train.json").write_text(json.dumps(record))
    return folder


def test_pool_file_version_builds_the_trained_conductor(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[conductor] version = "lm@v1": the version's base model with its adapter, decoding as in
    training (temperature 1.0, 48 tokens, unconstrained) except what the section sets. Nothing
    loads until the first call, so no model file is needed here."""
    pytest.importorskip("llama_cpp")
    from podium.builder import build_orchestrator
    from podium.conductor.lm import LMConductor
    from podium.named_conductors import named_conductor
    from podium.pool import load_pool
    from podium.testing import ScriptedWorker

    record = {"file": "adapter.gguf", "sha256": "0" * 64, "base_model": "smollm2-135m-instruct"}
    folder = store_version(isolated_home, "lm@v1", exported=record)
    store_version(isolated_home, "lm@v2")  # trained, never exported
    light = isolated_home / "conductors" / "light" / "v1"
    light.mkdir(parents=True)
    (light / "train.json").write_text(json.dumps({"config": {"lam": 0}, "history": []}))

    def pool_file(conductor: str) -> Path:
        path = tmp_path / "pool.toml"
        path.write_text(
            f'[conductor]\n{conductor}\n[fallback]\nworker = "w"\n[[workers]]\nname = "w"\nbackend = "python"\n'
        )
        return path

    config = load_pool(pool_file('version = "lm@v1"\ntemperature = 0.0'))
    workers = [ScriptedWorker("w")]
    conductor = build_orchestrator(config, workers=workers).conductor
    assert isinstance(conductor, LMConductor)
    s = conductor.settings
    assert (s.temperature, s.max_tokens, s.constrained) == (0.0, 48, False)  # temperature from the pool file
    assert conductor.model.info.name == "conductor"
    worker = conductor.model
    while hasattr(worker, "inner"):  # under the resilience wrappers
        worker = worker.inner
    assert (worker.model, worker.lora, worker.lora_sha256) == (
        "smollm2-135m-instruct",
        folder / "adapter.gguf",
        "0" * 64,
    )

    named = named_conductor("lm:lm@v1", workers)
    assert isinstance(named, LMConductor) and named.name == "lm:lm@v1"
    assert (named.settings.temperature, named.settings.max_tokens) == (1.0, 48)
    with pytest.raises(ConfigError, match="no GGUF adapter; export it: podium conductor export lm@v2"):
        named_conductor("lm:lm@v2", workers)
    with pytest.raises(ConfigError, match="not a GRPO-trained LM conductor"):
        named_conductor("lm:light@v1", workers)
    with pytest.raises(ConfigError, match="name it lm:lm@v1"):
        named_conductor("light:lm@v1", workers)
    for bad, message in (('version = "lm@x"', "write NAME@vN"), ('version = "lm@v1"\nworker = "w"', "exactly one")):
        with pytest.raises(ConfigError, match=message):
            load_pool(pool_file(bad))
    with pytest.raises(ConfigError, match="no conductor named 'nope'"):
        build_orchestrator(load_pool(pool_file('version = "nope"')), workers=workers)


@pytest.fixture(scope="module")
def smol_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A peft-format LoRA for SmolLM2-135M written directly (no torch): rank 4 on the value,
    output and down projections of all 30 blocks, lora_B large enough to change what it writes."""
    from podium.local_models import resolve_model

    info = base_info(resolve_model("smollm2-135m-instruct"))
    rng = np.random.default_rng(7)
    tensors: dict[str, np.ndarray[Any, Any]] = {}
    for block in range(info.blocks):
        for module, gguf_name in (("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
                                  ("mlp.down_proj", "ffn_down")):  # fmt: skip
            n_in, n_out = info.shapes[f"blk.{block}.{gguf_name}.weight"]
            key = f"{PREFIX}.{block}.{module}"
            tensors[f"{key}.lora_A.weight"] = rng.normal(0, n_in**-0.5, (4, n_in)).astype(np.float32)
            tensors[f"{key}.lora_B.weight"] = rng.normal(0, 0.1, (n_out, 4)).astype(np.float32)
    folder = tmp_path_factory.mktemp("smol") / "adapter"
    return write_adapter(folder, tensors, r=4, lora_alpha=8, target_modules=["v_proj", "o_proj", "down_proj"])


@pytest.mark.model
def test_llama_cpp_applies_an_exported_adapter_as_transformers_does(tmp_path: Path) -> None:
    """Random peft adapters on SmolLM2-135M, exported: the change of the next-token logits
    llama.cpp shows with vs without the adapter must point the same way and have the same size as
    the change transformers + peft show, at every position of a 22-token text.

    Thresholds (measured with bench/lora_agreement.py, 3 seeds per adapter family, docs/training.md):
    correct exports gave cosine 0.976–0.989 and norm ratio 0.955–1.051; exports broken on purpose
    gave cosine ≤ 0.33 (q/k rows left in transformers' order), ≤ 0.29 (another adapter) or a norm
    ratio ≥ 1.32 (alpha doubled). llama.cpp quantises activations, so its logits differ from
    transformers' by about 1/6 of these adapters' effect (``signal`` ≈ 5.5–8.8): the cosine cannot
    reach 1, hence cosine ≥ 0.95 and ratio within 0.8–1.25."""
    import torch
    from peft import LoraConfig, get_peft_model

    from podium.train.export import load_base_model, logit_agreement

    model = load_base_model("smollm2-135m-instruct")
    text = "Question: Janet has 3 apples and buys 5 more. How many apples does she have? Answer:"
    # q/k: the llama row reordering; the rest: orientation and alpha / r scaling
    for targets, scale in (
        (["q_proj", "k_proj"], 0.3),
        (["v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 0.1),
    ):
        torch.manual_seed(0)
        peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=targets))
        with torch.no_grad():
            for name, param in peft.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, scale)
        adapter = tmp_path / targets[0] / "adapter"
        peft.save_pretrained(str(adapter))
        model = peft.unload()
        exported = lora_to_gguf(adapter, "smollm2-135m-instruct", adapter.parent / "adapter.gguf")
        assert exported.tensors == 30 * len(targets) and exported.rank == 8
        a = logit_agreement(adapter, "smollm2-135m-instruct", adapter.parent / "adapter.gguf", text, model=model)
        assert a.positions == 22 and a.signal >= 3, a  # the effect stands out of the runtimes' disagreement
        assert a.cosine >= 0.95 and 0.8 <= a.norm_ratio <= 1.25, (targets, a)


@pytest.mark.model
def test_a_registry_version_runs_its_adapter_in_llama_cpp(isolated_home: Path, smol_adapter: Path) -> None:
    """lm:lm@v1's model is the base with the adapter applied (greedy output differs from the
    base model's), and a tampered adapter file fails its sha256 check before llama.cpp sees it.
    (The conductor's full plan runs in test_conductor_commands_handle_lm_versions.)"""
    from podium.conductor.lm import LMConductor
    from podium.named_conductors import named_conductor
    from podium.testing import ScriptedWorker
    from podium.workers.base import Price, WorkerSettings
    from podium.workers.llama_cpp import LlamaCppWorker

    for ref in ("lm@v1", "lm@v2"):
        folder = store_version(isolated_home, ref)
        exported = lora_to_gguf(smol_adapter, "smollm2-135m-instruct", folder / "adapter.gguf")
        train = json.loads((folder / "train.json").read_text())
        (folder / "train.json").write_text(json.dumps({**train, "adapter_gguf": exported.to_json()}))
    tampered = isolated_home / "conductors" / "lm" / "v2" / "adapter.gguf"
    data = bytearray(tampered.read_bytes())
    data[-1] ^= 0xFF
    tampered.write_bytes(bytes(data))

    pool = [ScriptedWorker("calc"), ScriptedWorker("writer")]
    trained = named_conductor("lm:lm@v1", pool)
    assert isinstance(trained, LMConductor)
    base = LlamaCppWorker("base", "smollm2-135m-instruct", settings=WorkerSettings(), price=Price())
    greedy = WorkerSettings(max_tokens=12, temperature=0.0)
    messages = [{"role": "user", "content": "Name three colours."}]
    with_adapter = asyncio.run(trained.model.complete(Call(messages, greedy))).text
    without = asyncio.run(base.complete(Call(messages, greedy))).text
    assert with_adapter.strip() and without.strip() and with_adapter != without
    with pytest.raises(ConfigError, match="fails its sha256 check"):
        asyncio.run(named_conductor("lm:lm@v2", pool).model.complete(Call(messages, greedy)))


@pytest.mark.model
def test_conductor_commands_handle_lm_versions(
    isolated_home: Path, smol_adapter: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """podium conductor show / export / list / eval on a GRPO version, as `podium train --policy
    lm` leaves it when the export after training failed (adapter/ but no adapter.gguf)."""
    import shutil

    from podium.cli import cli
    from tests.test_light_conductor import write_matrix

    folder = store_version(isolated_home, "lm@v1")
    shutil.copytree(smol_adapter, folder / "adapter")
    light = isolated_home / "conductors" / "light" / "v1"
    light.mkdir(parents=True)
    (light / "train.json").write_text(json.dumps({"config": {"lam": 0}, "history": []}))
    matrix = str(write_matrix(tmp_path / "m.csv"))

    assert cli(["conductor", "show", "lm@v1"]) == 0
    assert "not exported" in capsys.readouterr().out
    assert cli(["eval", "--replay", matrix, "--methods", "lm:lm@v1", "--limit", "1"]) == 2
    assert "export it: podium conductor export lm@v1" in capsys.readouterr().err
    assert cli(["conductor", "export", "light@v1"]) == 2
    assert "only LM conductors" in capsys.readouterr().err

    assert cli(["conductor", "export", "lm@v1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    record = json.loads((folder / "train.json").read_text())["adapter_gguf"]
    assert record["sha256"] == hashlib.sha256((folder / "adapter.gguf").read_bytes()).hexdigest() == shown["sha256"]
    assert (record["tensors"], record["rank"], record["alpha"]) == (90, 4, 8.0)
    assert cli(["conductor", "list", "--json"]) == 0
    rows = {r["ref"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["lm@v1"]["policy"], rows["light@v1"]["policy"]) == ("lm", "light")

    # the LM conductor plans one held-out question in llama.cpp (a prompt of several hundred tokens)
    assert cli(["conductor", "eval", "lm@v1", "--replay", matrix, "--limit", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["methods"]["lm:lm@v1"]["summary"]["n"] == 1
    assert (folder / "eval" / "m-test" / "eval.json").is_file()
