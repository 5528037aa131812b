"""A version's ``train.json`` as one typed record (podium.registry.TrainingInfo): what each policy
records is read through named fields, a file written by ``podium train`` round-trips unchanged,
and a malformed one is refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.registry import TrainingInfo, Version

LM = {
    "policy": "lm",
    "config": {"model": "qwen2.5-coder-0.5b-instruct", "lam": 2.5, "steps": 34},
    "data": {"bank_sha256": "ab" * 32},
    "history": [{"step": 1, "reward": 0.5}],
    "adapter_gguf": {"file": "adapter.gguf", "sha256": "cd" * 32, "base_model": "qwen2.5-coder-0.5b-instruct"},
}


def test_each_policys_fields_are_read_by_name_and_the_file_round_trips(tmp_path: Path) -> None:
    info = TrainingInfo.from_json(LM)
    assert (info.policy, info.lam, info.base_model) == ("lm", 2.5, "qwen2.5-coder-0.5b-instruct")
    assert info.adapter_gguf is not None and info.adapter_gguf["file"] == "adapter.gguf"
    assert info.adapter_gguf_error is None and info.embedder is None
    version = Version("conductor", 1, tmp_path)
    version.write_training(info)
    assert json.loads((tmp_path / "train.json").read_text()) == LM and version.training() == info


def test_a_failed_export_and_the_encoder_of_each_light_policy() -> None:
    failed = TrainingInfo.from_json({**LM, "adapter_gguf": {}, "adapter_gguf_error": "gguf missing"})
    assert failed.adapter_gguf is None and failed.adapter_gguf_error == "gguf missing"
    light = TrainingInfo.from_json({"config": {}, "data": {"embedder": "all-MiniLM-L6-v2:53aa51172d14"}})
    assert light.policy == "light" and light.embedder == "all-MiniLM-L6-v2:53aa51172d14" and light.lam == 0.0
    plans = TrainingInfo.from_json({"policy": "plans", "data": {"embedder": "x:1", "embedder_choice": "minilm"}})
    assert plans.embedder == "minilm" and plans.base_model == ""  # the loop's choice, as it asks for it again


def test_a_train_json_that_is_not_a_record_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "train.json").write_text('{"policy": "cma", "config": {}}')
    with pytest.raises(ConfigError, match=r"train\.json: unknown policy 'cma'"):
        Version("conductor", 1, tmp_path).training()
