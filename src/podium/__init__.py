"""podium: a learned LLM orchestrator.

A conductor writes a workflow — which worker does each step, its subtask, and the access list of
earlier steps it may see — and podium executes it over a worker pool (Nielsen et al., "Learning
to Orchestrate Agents in Natural Language with the Conductor", ICLR 2026).
"""

from podium.conductor import Conductor, LMConductor, LMConductorSettings
from podium.errors import (
    ConfigError,
    ContextOverflow,
    EmptyOutput,
    InvalidQuestion,
    ModelBehaviourError,
    ModelNotInstalled,
    PlanParseError,
    PodiumError,
    ProviderError,
)
from podium.executor import execute
from podium.messages import worker_messages
from podium.orchestrator import Fallback, Orchestrator
from podium.parse import parse_workflow
from podium.pool import PoolConfig, WorkerConfig, load_pool
from podium.records import FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
from podium.runtime import build_orchestrator
from podium.trace import TraceStore
from podium.workers import Completion, Message, Price, Usage, Worker, WorkerSettings, build_worker
from podium.workflow import ALL, Step, Workflow, validate_lists

__version__ = "0.1.0"

__all__ = [
    "ALL",
    "Completion",
    "Conductor",
    "ConfigError",
    "ContextOverflow",
    "EmptyOutput",
    "Fallback",
    "FallbackInfo",
    "InvalidQuestion",
    "LMConductor",
    "LMConductorSettings",
    "Message",
    "ModelBehaviourError",
    "ModelNotInstalled",
    "Orchestrator",
    "PlanAttempt",
    "PlanParseError",
    "PodiumError",
    "PoolConfig",
    "Price",
    "ProviderError",
    "RunRecord",
    "Step",
    "StepRecord",
    "Totals",
    "TraceStore",
    "Usage",
    "Worker",
    "WorkerConfig",
    "WorkerSettings",
    "Workflow",
    "__version__",
    "build_orchestrator",
    "build_worker",
    "execute",
    "load_pool",
    "parse_workflow",
    "validate_lists",
    "worker_messages",
]
