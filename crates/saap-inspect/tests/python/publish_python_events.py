"""Publishes SAAP events the way the Python implementation does, with a plain nats-py client.

Usage: python publish_python_events.py NATS_URL

Creates the class stream as the Python StreamManager does (agent_QaAgent_stream, subjects
agent.QaAgent.*.*.*.*.*.*.*, file storage, limits retention, 10,000,000 messages, 30 days,
60 s duplicate window) and publishes, in this order, with `json.dumps(..., default=str)`
payloads (Python's default separators) and the headers the Python JSPublisher sends:

  run ...a1: UserMessageEvent (start), ChunkEvent (display), RetrievedContext (a foreign
             control event), AnswerStopEvent (stop), RetrievedContext again (after stop)
  run ...a2: UserMessageEvent (start), ExceptionEvent (failed), an event with a bad event id,
             a payload that is not JSON

Ids and created_at values are fixed, so what `saap inspect` shows is the same every time
except the server's stored times.
"""

import asyncio
import json
import sys

import nats
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

CLASS = "QaAgent"
AGENT = "qa1"
THREAD = "665000000000000000000100"
DISPLAY = "665000000000000000000200"
RUN_A = "6650000000000000000000a1"
RUN_B = "6650000000000000000000a2"
T0 = 1767261600000000000  # 2026-01-01T10:00:00Z
UMSG = ["UserMessageEvent", "StartEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]


def locale(en):
    return {"de": None, "en": en, "fr": None, "it": None}


def event(n, name, parents, **fields):
    d = {"event_id": "66500000000000000000%04x" % n, "created_at": T0 + n * 1_000_000}
    d.update(fields)
    d["_event_name"] = name
    d["_parent_event_names"] = parents
    return d


def subject(run, kind, ev):
    return "agent.%s.%s.%s.%s.%s.%s.%s.%s" % (
        CLASS, AGENT, THREAD, DISPLAY, run, kind, ev["_event_name"], ev["event_id"])


async def main(url):
    nc = await nats.connect(url, connect_timeout=10)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(
        name="agent_%s_stream" % CLASS,
        subjects=["agent.%s.*.*.*.*.*.*.*" % CLASS],
        storage=StorageType.FILE,
        retention=RetentionPolicy.LIMITS,
        max_msgs=10_000_000,
        discard=DiscardPolicy.OLD,
        max_age=2_592_000,
        duplicate_window=60,
    ))
    start_a = event(1, "UserMessageEvent", UMSG, message="what is saap?",
                    display_name=locale("User message"), display_description=None)
    chunk = event(2, "ChunkEvent", ["ChunkEvent", "DisplayEvent"], chunk="saap is",
                  display_name=locale("Chunk"), display_description=None)
    context = event(3, "RetrievedContext", ["RetrievedContext", "ControlEvent"],
                    docs=["a.md", "b.md"])
    answer = event(4, "AnswerStopEvent",
                   ["AnswerStopEvent", "StopEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"],
                   answer="an agent runtime", display_name=locale("Answer"), display_description=None)
    late = event(5, "RetrievedContext", ["RetrievedContext", "ControlEvent"], docs=["late.md"])
    start_b = event(6, "UserMessageEvent", UMSG, message="configure me",
                    display_name=locale("User message"), display_description=None)
    failed = event(7, "ExceptionEvent",
                   ["ExceptionEvent", "SemanticEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"],
                   message="The agent configuration is invalid: model is required", http_status_code=500,
                   display_name=locale("Error"), display_description=None)
    messages = [
        (subject(RUN_A, "control_event", start_a), json.dumps(start_a, default=str).encode()),
        (subject(RUN_A, "display_event", chunk), json.dumps(chunk, default=str).encode()),
        (subject(RUN_A, "control_event", context), json.dumps(context, default=str).encode()),
        (subject(RUN_A, "control_event", answer), json.dumps(answer, default=str).encode()),
        (subject(RUN_A, "control_event", late), json.dumps(late, default=str).encode()),
        (subject(RUN_B, "control_event", start_b), json.dumps(start_b, default=str).encode()),
        (subject(RUN_B, "control_event", failed), json.dumps(failed, default=str).encode()),
        ("agent.%s.%s.%s.%s.%s.control_event.BrokenEvent.665000000000000000000008" % (CLASS, AGENT, THREAD, DISPLAY, RUN_B),
         json.dumps({"event_id": "not-an-id", "created_at": T0, "_event_name": "BrokenEvent",
                     "_parent_event_names": ["BrokenEvent", "ControlEvent"]}).encode()),
        ("agent.%s.%s.%s.%s.%s.control_event.Garbage.665000000000000000000009" % (CLASS, AGENT, THREAD, DISPLAY, RUN_B),
         b"\xff\xfe this is not JSON"),
    ]
    for i, (subj, payload) in enumerate(messages):
        headers = {
            "Nats-Msg-Id": "00000000-0000-4000-8000-%012d" % i,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033%02d-01" % i,
        }
        ack = await js.publish(subj, payload, headers=headers, timeout=10)
        assert ack.seq == i + 1, (ack, i)
    await nc.drain()
    print("published %d messages" % len(messages))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
