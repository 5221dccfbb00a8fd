"""The Python agent whose run `publish_python_run.py` publishes: the spec `saap explain --run`
reads for it (tests/explain_run.rs). Never executed; only read by saap-python."""

from swiss_ai_hub.agent.agents.agent import Agent
from swiss_ai_hub.agent.workflow.decorators.step import step
from swiss_ai_hub.core.events import ControlEvent, StopEvent, UserMessageEvent


class Doc(ControlEvent):
    text: str


class Note(ControlEvent):
    text: str


class Feedback(ControlEvent):
    text: str


class AnswerStopEvent(StopEvent):
    answer: str


class QaAgent(Agent):
    @step()
    async def search(self, question: UserMessageEvent) -> list[Doc]:
        return [Doc(text="a"), Doc(text="b")]

    # A plain list: the Python dispatcher waits for one Note; saap runs it with none.
    @step()
    async def summarize(self, question: UserMessageEvent, notes: list[Note]) -> None:
        return None

    # On feedback, `doc` is the latest Doc: by arrival for saap, by created_at for Python.
    @step()
    async def revise(self, feedback: Feedback, doc: Doc) -> AnswerStopEvent:
        return AnswerStopEvent(answer=doc.text)
