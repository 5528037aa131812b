"""The install command an error names for a missing extra (podium.extras)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import podium
from podium import extras
from podium.extras import install_command


class _Dist:
    """Unit-test fake of an installed distribution's metadata files."""

    def __init__(self, direct_url: dict[str, object] | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return json.dumps(self.direct_url) if name == "direct_url.json" and self.direct_url is not None else None


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    extras._checkout.cache_clear()


def test_an_editable_checkout_gets_its_own_pip_and_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "my checkout"  # a space: the command must still be one argument
    url = {"url": folder.as_uri(), "dir_info": {"editable": True}}
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(url))
    command = install_command("serve")
    assert shlex.split(command) == [sys.executable, "-m", "pip", "install", "-e", f"{folder}[serve]"]


@pytest.mark.parametrize("direct_url", [None, {"url": "https://example.org/podium.whl", "archive_info": {}}])
def test_an_installed_package_gets_the_plain_command(
    monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, object] | None
) -> None:
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(direct_url))
    assert install_command("pii") == "pip install 'podium[pii]'"


@pytest.mark.slow
def test_the_dev_install_names_this_checkout() -> None:
    # `make setup-dev` installs podium editable from this repository: the command points here
    root = Path(podium.__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        pytest.skip("podium is not installed from a source checkout here")
    args = shlex.split(install_command("eval"))
    assert args[-2:] == ["-e", f"{root}[eval]"] and Path(args[0]) == Path(sys.executable)
    # and it is a command pip accepts (a dry run resolves the extra without installing anything)
    done = subprocess.run([*args[:4], "--dry-run", "--no-deps", "--no-build-isolation", "-q", *args[4:]],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
