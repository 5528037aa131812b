"""Per λ, the sweep whose version has the highest cross-validated mean reward (issue 16: the
RouteLLM selections fixed in docs/eval/plans-routellm-dims/README.md and
docs/eval/plans-routellm-value/README.md).

    python bench/select_by_cv.py 16=sweep16.json 64=sweep64.json 384=sweep384.json > choice.json

Each argument is ``LABEL=FILE``: the ``--json`` output of one ``podium train --policy plans
--sweep`` (e.g. labelled by its ``--dims``; every sweep over the same λ, in the same order).
Prints, per λ, every sweep's cross-validated reward and the chosen label (highest reward; a tie
goes to the sweep named first — list the simpler settings first), as JSON:
``{"choices": [{"lam": …, "choice": LABEL, "rewards": {LABEL: …}}, …]}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def choose(sweeps: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per λ, the rewards of each sweep and the chosen label (``sweeps`` in the order given: a
    tie goes to the first). Raises ValueError when the sweeps do not have the same λ in the same
    order."""
    lams = {d: [v["config"]["lam"] for v in s["versions"]] for d, s in sweeps.items()}
    first = next(iter(lams.values()))
    if any(values != first for values in lams.values()):
        raise ValueError("the sweeps have different λ: run them on the same matrix and split")
    out = []
    for k, lam in enumerate(first):
        rewards = {d: s["versions"][k]["cross_validation"]["reward"]["mean"] for d, s in sweeps.items()}
        best = max(rewards, key=lambda d: rewards[d])  # max keeps the first of equals
        out.append({"lam": lam, "choice": best, "rewards": rewards})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", metavar="LABEL=FILE")
    args = parser.parse_args()
    sweeps = {}
    for item in args.sweeps:
        label, _, path = item.partition("=")
        sweeps[label] = json.loads(Path(path).read_text())
    print(json.dumps({"choices": choose(sweeps)}, indent=1))


if __name__ == "__main__":
    main()
