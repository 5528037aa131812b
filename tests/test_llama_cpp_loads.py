"""Model loads that overlap in threads leave the process's output alone.

llama-cpp-python silences a load by pointing file descriptors 1 and 2 at /dev/null and back;
two loads overlapping in threads (a plan conductor's embedding model and a preloaded worker
model) could leave stdout on /dev/null. podium routes llama.cpp's log lines to Python's
logging instead (podium.llama_runtime.load_llama_cpp), so nothing is redirected. Each case runs
in its own Python process, so its stdout and stderr are the real file descriptors.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from podium.local_models import model_status

pytest.importorskip("llama_cpp", reason="needs podium[local]")
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(model_status("smollm2-135m-instruct") != "ready", reason="needs the embedded SmolLM2-135M"),
]

OVERLAPPING = """
import sys, threading
from podium.embed import LlamaCppEncoder
from podium.workers.llama_cpp import _load
go = threading.Barrier(3)
def worker(n_ctx):
    go.wait()
    _load("smollm2-135m-instruct", n_ctx)
def embedder():
    go.wait()
    LlamaCppEncoder("smollm2-135m-instruct").encode(["hello"])
threads = [threading.Thread(target=worker, args=(1024,)), threading.Thread(target=worker, args=(2048,)),
           threading.Thread(target=embedder)]
for t in threads: t.start()
for _ in range(200):  # printed while the loads run: nothing may swallow it
    print("during", flush=True)
    print("during", file=sys.stderr, flush=True)
for t in threads: t.join()
print("after", flush=True)
print("after", file=sys.stderr, flush=True)
"""


def test_overlapping_loads_in_threads_neither_swallow_nor_add_output() -> None:
    """Two worker loads and an embedding-model load at once (the same model under different
    context sizes, so three llama.cpp instances): every line the main thread prints meanwhile
    and afterwards arrives, on stdout and stderr, and llama.cpp itself prints nothing — its
    notices (e.g. that mean pooling overrides the model's default) go to the logger."""
    done = subprocess.run([sys.executable, "-c", OVERLAPPING], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        assert stream.splitlines() == ["during"] * 200 + ["after"]
