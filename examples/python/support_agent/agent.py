"""The support agent: classifies a message into a ticket, answers it, or escalates it."""

from swiss_ai_hub.agent.workflow.decorators.step import step
from swiss_ai_hub.core.events import UserMessageEvent

from support_agent.config import SupportConfig

from . import events as ev
from .base import AuditedAgent
from .events import Replied, TicketEvent, UrgentTicket


class SupportAgent(AuditedAgent):
    @step(max_executions_per_run=1)
    async def classify(
        self, message: UserMessageEvent, config: SupportConfig
    ) -> TicketEvent | UrgentTicket:
        if "urgent" in str(message):
            return UrgentTicket(text="")
        return TicketEvent(text="")

    # Takes the parent type: an UrgentTicket never reaches this step (exact-type dispatch).
    @step()
    async def answer(self, ticket: TicketEvent) -> Replied:
        return Replied(text="answered")

    @step()
    async def escalate(self, ticket: UrgentTicket) -> ev.Escalated:
        return ev.Escalated(reason=ticket.text)

    @step()
    async def hand_over(self, escalated: "ev.Escalated") -> Replied:
        return Replied(text="a colleague will answer")
