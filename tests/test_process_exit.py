"""``podium run``/``plan`` end their process without the interpreter's teardown, in which
llama-cpp-python frees each loaded model one by one (issue 20: 0.1-0.2 s of a run's fixed cost;
podium.llama_runtime.exit_without_teardown). What a command leaves for the end must still happen:
the ``atexit`` handlers run (logging's flush, trace stores' close, exporters' shutdown) and
buffered output is written. Each case runs in its own Python process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, logging, sys
from pathlib import Path
from podium.llama_runtime import exit_without_teardown
log = logging.getLogger("probe")
log.addHandler(logging.FileHandler(sys.argv[1] + ".log", delay=True))
log.warning("logged before exit")
atexit.register(lambda: Path(sys.argv[1]).write_text("handler ran"))
sys.stdout.write("answer without newline")  # still in the buffer
sys.stderr.write("note")
class Loud:
    def __del__(self):
        print("finalised")  # the teardown that is skipped
keep = Loud()
exit_without_teardown(3)
print("not reached")
"""


def test_the_exit_runs_atexit_handlers_flushes_output_and_skips_finalisers(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(marker)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "answer without newline"  # flushed; neither the finaliser nor the last print ran
    assert done.stderr == "note"
    assert marker.read_text() == "handler ran"
    assert Path(f"{marker}.log").read_text() == "logged before exit\n"  # logging.shutdown flushed the handler
