"""podium: a learned LLM orchestrator.

A conductor writes a workflow — which worker does each step, its subtask, and the access list of
earlier steps it may see — and podium executes it over a worker pool (Nielsen et al., "Learning
to Orchestrate Agents in Natural Language with the Conductor", ICLR 2026).
"""

import importlib as _importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers; at run time __getattr__ imports them
    from podium.budget import Limits, PeriodBudget, RequestBudget
    from podium.builder import build_orchestrator
    from podium.conductor import Conductor, LMConductor, LMConductorSettings
    from podium.conductor.base import DirectConductor, PreviousRound
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
    from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
    from podium.parse import parse_workflow
    from podium.pool import PoolConfig, WorkerConfig, load_pool
    from podium.pool_workers import build_worker
    from podium.records import Disclosure, FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
    from podium.trace import TraceStore
    from podium.workers import (
        Call,
        CallContext,
        Completion,
        Message,
        Price,
        Usage,
        Worker,
        WorkerInfo,
        WorkerSettings,
        WorkerWrapper,
    )
    from podium.workers.resilience import ResiliencePolicy
    from podium.workers.stack import stack, stack_pool
    from podium.workflow import ALL, Step, Workflow, validate_lists

__version__ = "0.1.0"

__all__ = [
    "ALL",
    "BudgetError",
    "Call",
    "CallContext",
    "ClientError",
    "Completion",
    "Conductor",
    "ConfigError",
    "ContextOverflow",
    "CostCapExceeded",
    "DeadlineExceeded",
    "DirectConductor",
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
    "OrchestratorConfig",
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
    "WorkerInfo",
    "WorkerSettings",
    "WorkerTimeout",
    "WorkerUnavailable",
    "WorkerWrapper",
    "Workflow",
    "__version__",
    "build_orchestrator",
    "build_worker",
    "execute",
    "load_pool",
    "parse_workflow",
    "stack",
    "stack_pool",
    "validate_lists",
    "worker_messages",
]

_LAZY: dict[str, str] = {
    "Limits": "podium.budget",
    "PeriodBudget": "podium.budget",
    "RequestBudget": "podium.budget",
    "Conductor": "podium.conductor",
    "LMConductor": "podium.conductor",
    "LMConductorSettings": "podium.conductor",
    "DirectConductor": "podium.conductor.base",
    "PreviousRound": "podium.conductor.base",
    "BudgetError": "podium.errors",
    "ClientError": "podium.errors",
    "ConfigError": "podium.errors",
    "ContextOverflow": "podium.errors",
    "CostCapExceeded": "podium.errors",
    "DeadlineExceeded": "podium.errors",
    "EmptyOutput": "podium.errors",
    "InvalidQuestion": "podium.errors",
    "ModelBehaviourError": "podium.errors",
    "ModelNotInstalled": "podium.errors",
    "PIIProtectionError": "podium.errors",
    "PlanParseError": "podium.errors",
    "PodiumError": "podium.errors",
    "ProviderError": "podium.errors",
    "RateLimited": "podium.errors",
    "ServerError": "podium.errors",
    "TransportError": "podium.errors",
    "WorkerTimeout": "podium.errors",
    "WorkerUnavailable": "podium.errors",
    "execute": "podium.executor",
    "worker_messages": "podium.messages",
    "Fallback": "podium.orchestrator",
    "Orchestrator": "podium.orchestrator",
    "OrchestratorConfig": "podium.orchestrator",
    "parse_workflow": "podium.parse",
    "PoolConfig": "podium.pool",
    "WorkerConfig": "podium.pool",
    "load_pool": "podium.pool",
    "Disclosure": "podium.records",
    "FallbackInfo": "podium.records",
    "PlanAttempt": "podium.records",
    "RunRecord": "podium.records",
    "StepRecord": "podium.records",
    "Totals": "podium.records",
    "build_orchestrator": "podium.builder",
    "TraceStore": "podium.trace",
    "Call": "podium.workers",
    "CallContext": "podium.workers",
    "Completion": "podium.workers",
    "Message": "podium.workers",
    "Price": "podium.workers",
    "Usage": "podium.workers",
    "Worker": "podium.workers",
    "WorkerInfo": "podium.workers",
    "WorkerSettings": "podium.workers",
    "WorkerWrapper": "podium.workers",
    "build_worker": "podium.pool_workers",
    "ResiliencePolicy": "podium.workers.resilience",
    "stack": "podium.workers.stack",
    "stack_pool": "podium.workers.stack",
    "ALL": "podium.workflow",
    "Step": "podium.workflow",
    "Workflow": "podium.workflow",
    "validate_lists": "podium.workflow",
}
"""Where each public name lives: imported on first use (PEP 562), so ``import podium`` and the
CLI's start-up load only what they use."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
