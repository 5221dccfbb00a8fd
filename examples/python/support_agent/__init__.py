"""A support agent split over modules, as agents in the Python SDK usually are: events,
config, a shared agent base class and the agent itself import one another."""

from .agent import SupportAgent

__all__ = ["SupportAgent"]
