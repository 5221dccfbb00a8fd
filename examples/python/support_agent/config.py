"""The support agent's config and its form."""

from typing import Annotated, Self

from pydantic import Field
from swiss_ai_hub.agent.agents.agent_config import AgentConfig
from swiss_ai_hub.core.forms import Checkbox
from swiss_ai_hub.core.i18n import LocaleString


class SupportConfig(AgentConfig):
    escalate_urgent: Annotated[bool | Checkbox, Field(description="Hand urgent tickets over")] = True

    @classmethod
    def as_form(cls) -> Self:
        base = AgentConfig.as_form()
        return cls(
            **base.model_dump(),
            escalate_urgent=Checkbox(label=LocaleString(en="Escalate urgent tickets")),
        )
