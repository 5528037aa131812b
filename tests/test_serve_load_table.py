"""bench/serve_load.py's table: one row per level and way of a committed run, the ratios that
the run computed (not recomputed), and a trace verdict only where the run checked traces."""

from __future__ import annotations

import json
from pathlib import Path

from bench.serve_load import table

RUN = Path(__file__).resolve().parents[1] / "docs" / "bench" / "serve-load-2026-12-05-threads.json"


def test_the_table_has_a_row_per_level_and_way_with_the_runs_own_figures() -> None:
    results = json.loads(RUN.read_text())
    rows = [line.split(" | ") for line in table(results).splitlines()[2:]]
    levels = [k for k in results if k.startswith("clients=")]
    ways = [(k.removeprefix("clients="), w) for k in levels for w, r in results[k].items() if "throughput_rps" in r]
    assert [(r[0].lstrip("| "), r[1]) for r in rows] == ways
    serve_1 = next(r for r in rows if r[0].lstrip("| ") == "1" and r[1] == "serve")
    assert serve_1[3] == str(results["clients=1"]["serve"]["throughput_vs_direct"])
    assert serve_1[-1].rstrip(" |") == "yes"  # serve's traces were checked; direct's (no traces) are blank
    direct_1 = next(r for r in rows if r[0].lstrip("| ") == "1" and r[1] == "direct")
    assert direct_1[3] == "" and direct_1[-1].strip(" |") == ""
