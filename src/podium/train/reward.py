"""The training reward: the one formula every conductor's training and the promotion gate use.

After Nielsen et al. 2026 §3.1 (the RL Conductor's reward), with podium's cost and latency terms:

    0                                                the output is not a valid workflow
    0.5 + 0.5 · score − λ · cost − μ · latency       otherwise

``score`` is the answer's verified score in [0, 1], ``cost`` USD per request, ``latency``
seconds (the workflow's critical path); λ is 1/USD, μ 1/second. λ = 10 therefore trades one cent
per request against 0.1 points of reward, i.e. 0.2 of quality, whichever conductor is trained.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "INVALID_REWARD",
    "Value",
    "workflow_reward",
]

INVALID_REWARD = 0.0
"""The reward of an output that does not parse into a valid (or replayable) workflow."""

Value = TypeVar("Value", float, npt.NDArray[np.float64])


def workflow_reward(
    score: Value, cost_usd: Value, latency_s: Value | float = 0.0, *, lam: float, mu: float = 0.0
) -> Value:
    """``0.5 + 0.5·score − λ·cost − μ·latency`` (module docstring), elementwise for arrays.

    Args:
        score: verified score(s) in [0, 1].
        cost_usd: cost(s), USD, same shape as ``score``.
        latency_s: latency (critical path), seconds; broadcast against ``score``.
        lam: λ, 1/USD. mu: μ, 1/second.
    """
    return 0.5 + 0.5 * score - lam * cost_usd - mu * latency_s
