"""The support agent's events."""

from swiss_ai_hub.core.events import ControlAndDisplayEvent, ControlEvent, DisplayEvent, StopEvent


class TicketEvent(ControlEvent):
    text: str


class UrgentTicket(TicketEvent):
    """A ticket that needs a human; a subclass of TicketEvent."""


class Escalated(ControlAndDisplayEvent):
    reason: str


class AuditLogged(DisplayEvent):
    line: str


class Replied(StopEvent):
    text: str
