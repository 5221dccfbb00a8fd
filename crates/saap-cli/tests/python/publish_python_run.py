"""Publishes one run of the QaAgent of qa_agent.py the way the Python platform does, with a
plain nats-py client (for tests/explain_run.rs).

Usage: python publish_python_run.py NATS_URL

Creates the class stream as the Python StreamManager does and publishes, in stream order:
the start event (control copy, then its display copy), two Doc events of `search` (the first
published was made last: its created_at is the larger), a display-only ChunkEvent, a Feedback
from outside, the AnswerStopEvent of `revise`, and one more Doc after the stop. Then run
...b2: a Feedback before any start event, and run ...b3: a start event and a message that is
not JSON. Ids and created_at values are fixed.
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
RUN = "6650000000000000000000b1"
ORPHAN_RUN = "6650000000000000000000b2"
BAD_RUN = "6650000000000000000000b3"
T0 = 1767261600000000000
UMSG = ["UserMessageEvent", "StartEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]
STOP = ["AnswerStopEvent", "StopEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]


def locale(en):
    return {"de": None, "en": en, "fr": None, "it": None}


def event(n, created, name, parents, **fields):
    d = {"event_id": "66500000000000000000%04x" % n, "created_at": T0 + created}
    d.update(fields)
    d["_event_name"] = name
    d["_parent_event_names"] = parents
    return d


def subject(run, kind, ev):
    return "agent.%s.%s.%s.%s.%s.%s.%s.%s" % (
        CLASS, AGENT, THREAD, DISPLAY, run, kind, ev["_event_name"], ev["event_id"])


def msg(run, kind, ev):
    return subject(run, kind, ev), json.dumps(ev, default=str).encode()


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
    start = event(0x10, 1, "UserMessageEvent", UMSG, message="what is saap?",
                  display_name=locale("User message"), display_description=None)
    doc_a = event(0x11, 30, "Doc", ["Doc", "ControlEvent"], text="a")
    doc_b = event(0x12, 20, "Doc", ["Doc", "ControlEvent"], text="b")
    chunk = event(0x13, 25, "ChunkEvent", ["ChunkEvent", "DisplayEvent"], chunk="saap",
                  display_name=locale("Chunk"), display_description=None)
    feedback = event(0x14, 40, "Feedback", ["Feedback", "ControlEvent"], text="shorter")
    answer = event(0x15, 50, "AnswerStopEvent", STOP, answer="a",
                   display_name=locale("Answer"), display_description=None)
    late = event(0x16, 60, "Doc", ["Doc", "ControlEvent"], text="late")
    orphan = event(0x20, 70, "Feedback", ["Feedback", "ControlEvent"], text="too early")
    start_bad = event(0x30, 80, "UserMessageEvent", UMSG, message="hello",
                      display_name=locale("User message"), display_description=None)
    messages = [
        msg(RUN, "control_event", start),
        msg(RUN, "display_event", start),
        msg(RUN, "control_event", doc_a),
        msg(RUN, "control_event", doc_b),
        msg(RUN, "display_event", chunk),
        msg(RUN, "control_event", feedback),
        msg(RUN, "control_event", answer),
        msg(RUN, "display_event", answer),
        msg(RUN, "control_event", late),
        msg(ORPHAN_RUN, "control_event", orphan),
        msg(BAD_RUN, "control_event", start_bad),
        ("agent.%s.%s.%s.%s.%s.control_event.Garbage.665000000000000000000031" % (CLASS, AGENT, THREAD, DISPLAY, BAD_RUN),
         b"\xff\xfe this is not JSON"),
    ]
    for i, (subj, payload) in enumerate(messages):
        headers = {"Nats-Msg-Id": "00000000-0000-4000-8000-%012d" % i}
        ack = await js.publish(subj, payload, headers=headers, timeout=10)
        assert ack.seq == i + 1, (ack, i)
    await nc.drain()
    print("published %d messages" % len(messages))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
