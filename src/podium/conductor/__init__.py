"""Conductor policies behind one contract, :class:`~podium.conductor.base.Conductor`."""

from podium.conductor.base import Conductor
from podium.conductor.grammar import workflow_grammar
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.conductor.prompt import conductor_messages

__all__ = ["Conductor", "LMConductor", "LMConductorSettings", "conductor_messages", "workflow_grammar"]
