"""Importing podium changes nothing in the process (issue 18): the OpenMP spin setting
(:func:`podium.llama_runtime.short_openmp_spin`) is applied where llama.cpp is loaded and by the
command line, not by ``import podium``. Each case runs in a fresh interpreter, since the setting
only matters before the OpenMP runtime loads."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest


def _env_after(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run(
        [sys.executable, "-c", f"import os\n{code}\nprint(os.environ.get('GOMP_SPINCOUNT', '-'))"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_importing_podium_and_its_api_leaves_the_environment_alone() -> None:
    assert _env_after("import podium, podium.cli, podium.orchestrator, podium.pool\npodium.Orchestrator") == "-"


def test_the_llama_cpp_backend_sets_a_short_spin_before_it_loads_llama_cpp() -> None:
    pytest.importorskip("llama_cpp")
    assert _env_after("import podium.workers.llama_cpp") == "10000"


@pytest.mark.parametrize(("env", "expected"), [({"GOMP_SPINCOUNT": "5"}, "5"), ({"OMP_WAIT_POLICY": "PASSIVE"}, "-")])
def test_the_users_own_openmp_setting_wins(env: dict[str, str], expected: str) -> None:
    assert _env_after("from podium.llama_runtime import short_openmp_spin\nshort_openmp_spin()", **env) == expected


@pytest.mark.slow  # a fresh interpreter that imports torch: seconds
def test_pii_detection_loads_without_torch_or_transformers_and_leaves_them_importable() -> None:
    """Presidio and spaCy would import both when installed (seconds per process); podium's blank
    pipelines need neither (podium.pii._presidio). Hiding them must not break a later import."""
    pytest.importorskip("presidio_analyzer")
    torch_installed = importlib.util.find_spec("torch") is not None
    code = "import sys\nimport podium.pii.detect\nprint('torch' in sys.modules, 'transformers' in sys.modules)\n" + (
        "import torch\nprint(torch.tensor([2.0]).sum().item())\n" if torch_installed else ""
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["False", "False"]
    if torch_installed:
        assert out[2] == "2.0"
