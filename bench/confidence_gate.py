"""A confidence gate from the 1.5B's own token log-probabilities: is it the cheap signal of
correctness that a plan at ≤ 1.1× the 1.5B's cost needs (docs/learned-workflows.md, "A
confidence gate from token log-probabilities")?

1. **Score.** For every GSM8K row of a workflow bank, the recorded answer of ``solve@1.5b`` is
   scored under the 1.5B model itself: the exact prompt the step was sent
   (:func:`podium.messages.worker_messages` with the role's subtask and the worker's system
   prompt, rendered with the model's chat template as the worker renders it; the request-cache
   key of this rebuilt request matches the recorded call's), then one llama.cpp pass over prompt
   + answer with every position's logits, giving each answer token's log-probability. Rows already
   in ``--scores`` (JSONL) are kept, so an interrupted run resumes. About 5–15 s a row on 2 cores.
2. **Gate.** Features of an answer: the mean, minimum and 10th percentile of its tokens'
   log-probabilities, the share below log 0.5, and the minimum and mean over its last line (where
   the final answer is stated). A gate keeps the 1.5B's answer when the feature is above a
   threshold and otherwise answers with another plan the bank replays exactly (its cost added;
   a plan that already contains ``solve@1.5b`` reuses it). The gate (feature, threshold, plan) is
   chosen on the training rows only, as the best quality at ≤ 1.1× ``solve@1.5b``'s cost, and
   then applied unchanged to the test rows: paired difference with ``solve@1.5b`` and its 95 %
   normal interval.

Generation-time log-probabilities would make such a gate free at run time; this measures only
whether the signal is worth building that for.

    .venv/bin/python bench/confidence_gate.py data/banks/local \\
        --scores docs/eval/confidence/solve-logprobs.jsonl --json docs/eval/confidence/gate.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from podium.eval.plans import load_source, plan_outcomes

BASE = "solve@1.5b"
WORKER = "qwen2.5-coder-1.5b"
MAX_COST = 1.1


def score_rows(bank: Path, scores: Path, kind: str) -> None:
    """Append to ``scores`` the log-probabilities of ``solve@1.5b``'s answer on every row of
    ``bank`` whose id contains ``kind`` and that ``scores`` does not hold yet."""
    import llama_cpp

    from podium.eval.bank import read_bank
    from podium.messages import worker_messages
    from podium.pool import load_pool
    from podium.pool_workers import build_pool_workers
    from podium.roles import ROLES
    from podium.workers import llama_cpp as backend

    done = {json.loads(line)["id"] for line in scores.read_text().splitlines()} if scores.exists() else set()
    rows = [r for r in read_bank(bank).rows if kind in r["sample_id"] and r["sample_id"] not in done]
    if not rows:
        return
    worker = next(w for w in build_pool_workers(load_pool("local-tools")) if w.info.name == WORKER)
    path = backend._model_path(worker.info.model)
    n_ctx = 4096
    llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, logits_all=True, verbose=False)
    formatter = backend.chat_formatter(llama)
    assert formatter is not None
    model = backend._LoadedModel(
        llama=llama,
        formatter=formatter,
        lock=None,  # type: ignore[arg-type]  # one caller
        n_ctx=n_ctx,
        controls=backend._control_pattern(backend._control_texts(llama, path)),
    )
    scores.parent.mkdir(parents=True, exist_ok=True)
    with scores.open("a", encoding="utf-8") as out:
        for i, row in enumerate(rows, 1):
            started = time.perf_counter()
            system = worker.info.system_prompt
            messages = worker_messages(row["prompt"], [], ROLES["solve"].subtask, system_prompt=system)
            prompt, _ = model.prompt_tokens(messages)
            answer = llama.tokenize(row[f"{BASE}|model_response"].encode("utf-8"), add_bos=False, special=False)
            tokens = (prompt + answer)[:n_ctx]
            cast(Any, llama).reset()
            llama.eval(tokens)
            logits = np.asarray(llama.scores[len(prompt) - 1 : len(tokens) - 1], dtype=np.float64)
            top = logits.max(axis=1, keepdims=True)
            norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            logprobs = logits[np.arange(len(logits)), tokens[len(prompt) :]] - norm
            pieces = [llama.detokenize([t]).decode("utf-8", "replace") for t in tokens[len(prompt) :]]
            record = {
                "id": row["sample_id"],
                "split": row["split"],
                "logprobs": [round(float(x), 4) for x in logprobs],
                "last_line_from": _last_line_start(pieces),
            }
            out.write(json.dumps(record) + "\n")
            out.flush()
            seconds = time.perf_counter() - started
            print(f"[{i}/{len(rows)}] {row['sample_id']}: {len(logprobs)} tokens, {seconds:.1f} s", file=sys.stderr)


def _last_line_start(pieces: list[str]) -> int:
    """Index of the first token of the answer's last non-empty line."""
    text = "".join(pieces)
    cut = text.rstrip().rfind("\n") + 1
    at = 0
    for i, piece in enumerate(pieces):
        if at >= cut:
            return i
        at += len(piece)
    return max(len(pieces) - 8, 0)


def features(record: dict[str, Any]) -> dict[str, float]:
    """Confidence features of one answer (higher = more confident)."""
    lp = np.asarray(record["logprobs"] or [0.0])
    tail = lp[record["last_line_from"] :] if record["last_line_from"] < len(lp) else lp[-8:]
    return {
        "mean": float(lp.mean()),
        "min": float(lp.min()),
        "p10": float(np.percentile(lp, 10)),
        "share_above_half": float((lp >= np.log(0.5)).mean()),
        "last_line_min": float(tail.min()),
        "last_line_mean": float(tail.mean()),
    }


def auroc(confidence: np.ndarray, right: np.ndarray) -> float:
    """Probability that a right answer is more confident than a wrong one (ties count half)."""
    pos, neg = confidence[right > 0.5], confidence[right <= 0.5]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def analyse(bank: Path, scores: Path) -> dict[str, Any]:
    """The gate chosen on the training rows and its result on the test rows (module doc)."""
    _, columns, rows, plans = load_source(bank)
    outcomes = plan_outcomes(plans, columns, rows)
    at = {r["sample_id"]: i for i, r in enumerate(rows)}
    plan_at = {p.id: j for j, p in enumerate(plans)}
    base = plan_at[BASE]
    records = [json.loads(line) for line in scores.read_text().splitlines()]

    def split(name: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        mine = [r for r in records if r["split"] == name]
        index = np.array([at[r["id"]] for r in mine])
        feats = [features(r) for r in mine]
        return index, {k: np.array([f[k] for f in feats]) for k in feats[0]}

    def gate(index: np.ndarray, value: np.ndarray, threshold: float, plan: str) -> tuple[np.ndarray, float, float]:
        """(per-question score, cost × solve@1.5b, share escalated)."""
        j, low = plan_at[plan], value <= threshold
        extra = 0.0 if BASE in plan else outcomes.cost[index, base]
        score = np.where(low, outcomes.score[index, j], outcomes.score[index, base])
        cost = np.where(low, outcomes.cost[index, j] + extra, outcomes.cost[index, base])
        return score, float(cost.mean() / outcomes.cost[index, base].mean()), float(low.mean())

    train, f_train = split("train")
    test, f_test = split("test")
    right_train, right_test = outcomes.score[train, base], outcomes.score[test, base]
    result: dict[str, Any] = {
        "rows": {"train": len(train), "test": len(test)},
        "solve@1.5b": {"train": float(right_train.mean()), "test": float(right_test.mean())},
        "auroc": {k: {"train": auroc(f_train[k], right_train), "test": auroc(f_test[k], right_test)} for k in f_train},
    }
    best: tuple[float, str, float, str] | None = None
    for name, value in f_train.items():
        for share in np.arange(0.05, 0.51, 0.05):
            threshold = float(np.quantile(value, share))
            for plan in (p.id for p in plans if p.id != BASE):
                score, cost, _ = gate(train, value, threshold, plan)
                gain = float(score.mean() - outcomes.score[train, base].mean())
                if cost <= MAX_COST and (best is None or gain > best[0]):
                    best = (gain, name, threshold, plan)
    assert best is not None
    gain, name, threshold, plan = best
    score, cost, share = gate(test, f_test[name], threshold, plan)
    diff = score - outcomes.score[test, base]
    half = 1.96 * float(diff.std(ddof=1)) / np.sqrt(len(diff))
    _, train_cost, train_share = gate(train, f_train[name], threshold, plan)
    mean = float(diff.mean())
    result["gate"] = {
        "feature": name,
        "threshold": threshold,
        "escalate_to": plan,
        "train": {"gain": gain, "cost_x": train_cost, "escalated": train_share},
        "test": {"gain": mean, "ci95": [mean - half, mean + half], "cost_x": cost, "escalated": share},
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bank", type=Path, help="a workflow bank recorded with the local catalogue")
    parser.add_argument("--scores", type=Path, required=True, help="JSONL of per-row log-probabilities (resumed)")
    parser.add_argument("--kind", default="gsm8k", help="rows whose id contains this (default gsm8k)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    score_rows(args.bank, args.scores, args.kind)
    result = analyse(args.bank, args.scores)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
