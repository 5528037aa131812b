"""podium: a learned LLM orchestrator.

A conductor writes a workflow — which worker does each step, its subtask, and the access list of
earlier steps it may see — and podium executes it over a worker pool (Nielsen et al., "Learning
to Orchestrate Agents in Natural Language with the Conductor", ICLR 2026).
"""

import os as _os

# llama.cpp's OpenMP threads busy-wait between kernels by default; on a shared or loaded CPU that
# stalls a 64-token prefill chunk for seconds (measured: 5–8 s instead of 0.5 s for SmolLM2-135M
# with other jobs running), so deadlines cannot hold. Passive waiting must be chosen before the
# OpenMP runtime loads, hence here; an explicit OMP_WAIT_POLICY in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.conductor import Conductor, LMConductor, LMConductorSettings
from podium.conductor.base import PreviousRound
from podium.errors import (
    BudgetError,
    ClientError,
    ConfigError,
    ContextOverflow,
    CostCapExceeded,
    DeadlineExceeded,
    EmptyOutput,
    InvalidQuestion,
    ModelBehaviourError,
    ModelNotInstalled,
    PIIProtectionError,
    PlanParseError,
    PodiumError,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
    WorkerTimeout,
    WorkerUnavailable,
)
from podium.executor import execute
from podium.messages import worker_messages
from podium.orchestrator import Fallback, Orchestrator
from podium.parse import parse_workflow
from podium.pool import PoolConfig, WorkerConfig, load_pool
from podium.records import Disclosure, FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
from podium.runtime import build_orchestrator
from podium.trace import TraceStore
from podium.workers import Completion, Message, Price, Usage, Worker, WorkerSettings, build_worker
from podium.workers.resilience import ResiliencePolicy, harden
from podium.workflow import ALL, Step, Workflow, validate_lists

__version__ = "0.1.0"

__all__ = [
    "ALL",
    "BudgetError",
    "ClientError",
    "Completion",
    "Conductor",
    "ConfigError",
    "ContextOverflow",
    "CostCapExceeded",
    "DeadlineExceeded",
    "Disclosure",
    "EmptyOutput",
    "Fallback",
    "FallbackInfo",
    "InvalidQuestion",
    "LMConductor",
    "LMConductorSettings",
    "Limits",
    "Message",
    "ModelBehaviourError",
    "ModelNotInstalled",
    "Orchestrator",
    "PIIProtectionError",
    "PeriodBudget",
    "PlanAttempt",
    "PlanParseError",
    "PodiumError",
    "PoolConfig",
    "PreviousRound",
    "Price",
    "ProviderError",
    "RateLimited",
    "RequestBudget",
    "ResiliencePolicy",
    "RunRecord",
    "ServerError",
    "Step",
    "StepRecord",
    "Totals",
    "TraceStore",
    "TransportError",
    "Usage",
    "Worker",
    "WorkerConfig",
    "WorkerSettings",
    "WorkerTimeout",
    "WorkerUnavailable",
    "Workflow",
    "__version__",
    "build_orchestrator",
    "build_worker",
    "execute",
    "harden",
    "load_pool",
    "parse_workflow",
    "validate_lists",
    "worker_messages",
]
