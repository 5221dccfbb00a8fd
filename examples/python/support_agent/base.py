"""A base class the package's agents share: its steps are part of every subclass."""

from swiss_ai_hub.agent.agents.agent import Agent
from swiss_ai_hub.agent.workflow.decorators.step import step
from swiss_ai_hub.core.events import UserMessageEvent

from .events import AuditLogged


class AuditedAgent(Agent):
    @step(max_executions_per_run=1)
    async def audit(self, message: UserMessageEvent) -> AuditLogged:
        return AuditLogged(line="received")
