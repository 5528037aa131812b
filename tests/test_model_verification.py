"""A model file's sha256 is verified once and remembered by path, size, mtime and inode; a
changed file is hashed again; ``podium models verify`` always hashes. A fake embedded model in a
temporary cache stands in for the real ones (unit test)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import podium.local_models as lm
from podium.errors import ModelNotInstalled


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, list[Path]]:
    data = b"GGUF fake weights " * 1000
    model = lm.EmbeddedModel(
        id="fake-model", filename="fake.gguf", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        packages=(), params_b=0.0,
    )  # fmt: skip
    monkeypatch.setitem(lm.EMBEDDED_MODELS, "fake-model", model)
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cache" / "models" / "fake.gguf"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    hashed: list[Path] = []
    real = lm.sha256_file

    def counting(p: Path) -> str:
        hashed.append(p)
        return real(p)

    monkeypatch.setattr(lm, "sha256_file", counting)
    return "fake-model", path, hashed


def test_a_verified_file_is_not_hashed_again(fake_model: tuple[str, Path, list[Path]]) -> None:
    model_id, path, hashed = fake_model
    assert lm.resolve_model(model_id) == path
    assert lm.resolve_model(model_id) == path
    assert len(hashed) == 1  # the second load trusted the recorded verification
    lm.resolve_model(model_id, recheck=True)  # podium models verify
    assert len(hashed) == 2


def test_a_changed_file_is_hashed_again_and_a_corrupt_one_refused(fake_model: tuple[str, Path, list[Path]]) -> None:
    model_id, path, hashed = fake_model
    lm.resolve_model(model_id)
    data = bytearray(path.read_bytes())
    data[0] ^= 1  # same size, other content
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # whatever the clock says, the stamp differs
    with pytest.raises(ModelNotInstalled):  # no packages to rebuild it from
        lm.resolve_model(model_id)
    assert len(hashed) == 2
