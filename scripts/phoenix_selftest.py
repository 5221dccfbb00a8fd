#!/usr/bin/env python3
"""Proves the Phoenix harness end to end without saap's Rust code.

    $SAAP_PHOENIX_PYTHON scripts/phoenix_selftest.py [--url http://127.0.0.1:PORT]

Run with the python that scripts/phoenix-install prints (it needs opentelemetry-proto,
which arize-phoenix brings). Without --url it starts its own Phoenix with
scripts/phoenix-serve --exit-on-stdin-eof, the way the Rust test does, and stops it at the
end by closing that process's stdin, then checks that the working dir is gone.

It builds OTLP ExportTraceServiceRequests by hand (opentelemetry.proto, like a non-Python
exporter would), POSTs them as application/x-protobuf to {url}/v1/traces, and reads them
back with phoenix_spans.wait_for_spans (Phoenix's REST API):
  1. one trace of 3 spans: an AGENT root, a CHAIN child, an LLM grandchild with
     llm.model_name, llm.token_count.prompt = 3, llm.input_messages.0.message.role = "user",
     session.id, and a few shapes worth knowing (a JSON-string `metadata`, a string list,
     a double, a bool, an ERROR status); no project resource attribute, so project "default";
     checked: names, parent links, kinds, status, those attributes, hex ids, that nothing
     else landed in that trace;
  2. a trace whose resource has openinference.project.name -> lands in that project, not
     in "default";
  3. the same resource sent with an `x-project-name` header -> the header's project wins;
  4. an all-zero parent_span_id comes back as parent "0000000000000000", not as a root;
  5. a Content-Type with a parameter (`application/x-protobuf; charset=utf-8`) -> 415.
Prints what it checked and "phoenix selftest: N passed, 0 failed"; exits 1 on a failure.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import phoenix_spans  # noqa: E402

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status  # noqa: E402


def kv(key, value):
    if isinstance(value, bool):
        v = AnyValue(bool_value=value)
    elif isinstance(value, int):
        v = AnyValue(int_value=value)
    elif isinstance(value, float):
        v = AnyValue(double_value=value)
    elif isinstance(value, list):
        v = AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=x) for x in value]))
    else:
        v = AnyValue(string_value=str(value))
    return KeyValue(key=key, value=v)


def make_span(trace_id, span_id, parent_id, name, start_ns, end_ns, attrs, status=None):
    s = Span(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent_id or b"", name=name,
        kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=start_ns, end_time_unix_nano=end_ns,
        attributes=[kv(k, v) for k, v in attrs.items()],
    )
    if status is not None:
        s.status.CopyFrom(status)
    return s


def request(resource_attrs, spans):
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend([kv(k, v) for k, v in resource_attrs.items()])
    ss = rs.scope_spans.add()
    ss.scope.name = "saap-phoenix-selftest"
    ss.spans.extend(spans)
    return req.SerializeToString()


def post(url, body, content_type="application/x-protobuf", headers=None):
    req = urllib.request.Request(url + "/v1/traces", data=body, method="POST",
                                 headers={"Content-Type": content_type, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type")


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def eq(self, what, got, want):
        if got == want:
            self.passed += 1
            print(f"  ok   {what} = {got!r}")
        else:
            self.failed += 1
            print(f"  FAIL {what}: got {got!r}, want {want!r}")


def one_span_trace(url, resource, headers=None):
    tid, sid = secrets.token_bytes(16), secrets.token_bytes(8)
    now = time.time_ns()
    body = request(resource, [make_span(tid, sid, None, "project-probe", now, now + 1000,
                                        {"openinference.span.kind": "CHAIN"})])
    status, _ = post(url, body, headers=headers)
    return tid.hex(), status


def run(url, c):
    trace_id, root, chain, llm = (secrets.token_bytes(16), secrets.token_bytes(8),
                                  secrets.token_bytes(8), secrets.token_bytes(8))
    session = "sess-" + secrets.token_hex(4)
    t0 = time.time_ns()
    ms = 1_000_000
    spans = [
        make_span(trace_id, root, None, "agent.run", t0, t0 + 90 * ms, {
            "openinference.span.kind": "AGENT", "session.id": session,
            "input.value": "say hi", "output.value": "hi"},
            Status(code=Status.STATUS_CODE_OK)),
        make_span(trace_id, chain, root, "step.plan", t0 + 10 * ms, t0 + 80 * ms, {
            "openinference.span.kind": "CHAIN", "session.id": session}),
        make_span(trace_id, llm, chain, "llm.chat", t0 + 20 * ms, t0 + 70 * ms, {
            "openinference.span.kind": "LLM", "session.id": session,
            "llm.model_name": "test-model", "llm.provider": "openai",
            "llm.token_count.prompt": 3, "llm.token_count.completion": 2,
            "llm.token_count.total": 5,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "say hi",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "hi",
            "llm.invocation_parameters": '{"temperature": 0.5}',
            "metadata": '{"run": 7}', "tag.tags": ["a", "b"],
            "saap.temperature": 0.5, "saap.streamed": False},
            Status(code=Status.STATUS_CODE_ERROR, message="rate limited")),
    ]
    # Send the grandchild first and in its own request: order of arrival must not matter.
    status, ctype = post(url, request({"service.name": "saap-selftest"}, spans[2:]))
    c.eq("POST /v1/traces (protobuf) status", status, 200)
    c.eq("POST /v1/traces response Content-Type", ctype, "application/x-protobuf")
    status, _ = post(url, request({"service.name": "saap-selftest"}, spans[:2]))
    c.eq("POST /v1/traces (second batch) status", status, 200)

    t = time.monotonic()
    got = phoenix_spans.wait_for_spans(url, "default", trace_id.hex(), wait=30, min_spans=3)
    print(f"  (3 spans readable {time.monotonic() - t:.2f} s after the POST)")
    time.sleep(0.5)  # nothing more may arrive
    got = phoenix_spans.fetch_spans(url, "default", trace_id.hex())
    c.eq("spans in the trace", len(got), 3)
    by = {s["name"]: s for s in got}
    c.eq("names", sorted(by), ["agent.run", "llm.chat", "step.plan"])
    if len(by) != 3:
        return
    a, ch, l = by["agent.run"], by["step.plan"], by["llm.chat"]
    print("  the LLM span as phoenix_spans returns it:")
    print("    " + json.dumps(l, indent=1).replace("\n", "\n    "))
    c.eq("trace_id is lowercase hex", a["trace_id"], trace_id.hex())
    c.eq("root span_id is hex", a["span_id"], root.hex())
    c.eq("root parent_id", a["parent_id"], None)
    c.eq("chain parent_id", ch["parent_id"], root.hex())
    c.eq("llm parent_id", l["parent_id"], chain.hex())
    c.eq("kinds", (a["span_kind"], ch["span_kind"], l["span_kind"]), ("AGENT", "CHAIN", "LLM"))
    c.eq("openinference.span.kind popped out of attributes",
         "openinference.span.kind" in l["attributes"], False)
    c.eq("root status", (a["status_code"], a["status_message"]), ("OK", ""))
    c.eq("chain status (unset)", ch["status_code"], "UNSET")
    c.eq("llm status", (l["status_code"], l["status_message"]), ("ERROR", "rate limited"))
    la = l["attributes"]
    c.eq("llm.model_name", la.get("llm.model_name"), "test-model")
    c.eq("llm.token_count.prompt", la.get("llm.token_count.prompt"), 3)
    c.eq("llm.token_count.prompt is an int", type(la.get("llm.token_count.prompt")).__name__, "int")
    c.eq("llm.input_messages.0.message.role", la.get("llm.input_messages.0.message.role"), "user")
    c.eq("llm.output_messages.0.message.content", la.get("llm.output_messages.0.message.content"), "hi")
    c.eq("session.id (llm)", la.get("session.id"), session)
    c.eq("session.id (root)", a["attributes"].get("session.id"), session)
    c.eq("input.value (root)", a["attributes"].get("input.value"), "say hi")
    c.eq("llm.invocation_parameters stays a string", la.get("llm.invocation_parameters"), '{"temperature": 0.5}')
    c.eq("metadata JSON string parsed into metadata.run", (la.get("metadata.run"), "metadata" in la), (7, False))
    c.eq("string list stays a list", la.get("tag.tags"), ["a", "b"])
    c.eq("double", la.get("saap.temperature"), 0.5)
    c.eq("bool", la.get("saap.streamed"), False)
    c.eq("service.name (a resource attribute) not among span attributes", "service.name" in la, False)
    c.eq("start_time has an offset", a["start_time"].endswith("+00:00") or a["start_time"].endswith("Z"), True)
    c.eq("project field", a["project"], "default")

    # The project rule.
    proj = "saap-selftest-" + secrets.token_hex(3)
    tid, status = one_span_trace(url, {"service.name": "x", "openinference.project.name": proj})
    c.eq("POST with openinference.project.name", status, 200)
    got = phoenix_spans.wait_for_spans(url, proj, tid, wait=30, min_spans=1)
    c.eq(f"span in project {proj!r} (resource attribute)", len(got), 1)
    c.eq("... and not in 'default'", len(phoenix_spans.fetch_spans(url, "default", tid)), 0)
    c.eq("'*' finds it with its project", [s["project"] for s in phoenix_spans.fetch_spans(url, "*", tid)], [proj])

    hdr = proj + "-hdr"
    tid, status = one_span_trace(url, {"openinference.project.name": proj}, headers={"x-project-name": hdr})
    c.eq("POST with x-project-name header", status, 200)
    got = phoenix_spans.wait_for_spans(url, hdr, tid, wait=30, min_spans=1)
    c.eq(f"span in project {hdr!r} (header beats resource attribute)", len(got), 1)
    c.eq("... and not in the resource attribute's project", len(phoenix_spans.fetch_spans(url, proj, tid)), 0)

    # What an exporter must know: only an empty parent_span_id makes a root.
    tid, now = secrets.token_bytes(16), time.time_ns()
    post(url, request({}, [make_span(tid, secrets.token_bytes(8), b"\0" * 8, "zero-parent", now, now + 1000,
                                     {"openinference.span.kind": "CHAIN"})]))
    got = phoenix_spans.wait_for_spans(url, "default", tid.hex(), wait=30, min_spans=1)
    c.eq("an all-zero parent_span_id is NOT a root", got[0]["parent_id"], "0" * 16)

    status, _ = post(url, request({}, []), content_type="application/x-protobuf; charset=utf-8")
    c.eq("Content-Type with a parameter is refused", status, 415)
    status, _ = post(url, b'{"resourceSpans": []}', content_type="application/json")
    c.eq("OTLP/JSON is refused", status, 415)

    # The CLI: what the Rust test runs.
    r = subprocess.run([sys.executable, str(HERE / "phoenix_spans.py"), "--url", url,
                        "--trace-id", trace_id.hex().upper(), "--min-spans", "3", "--wait", "10"],
                       capture_output=True, text=True)
    c.eq("phoenix_spans.py CLI exit (upper-case --trace-id)", r.returncode, 0)
    c.eq("phoenix_spans.py CLI spans", len(json.loads(r.stdout or "[]")), 3)
    r = subprocess.run([sys.executable, str(HERE / "phoenix_spans.py"), "--url", url,
                        "--trace-id", secrets.token_hex(16), "--wait", "1"],
                       capture_output=True, text=True)
    c.eq("phoenix_spans.py CLI exit on timeout", r.returncode, 1)
    print(f"  (its message: {r.stderr.strip()})")


def main():
    ap = argparse.ArgumentParser(description="End-to-end self-test of the Phoenix harness.")
    ap.add_argument("--url", help="an already running Phoenix; default: start one with phoenix-serve")
    args = ap.parse_args()
    c = Checks()
    server = None
    info = None
    try:
        if args.url:
            url = args.url.rstrip("/")
        else:
            t = time.monotonic()
            server = subprocess.Popen([sys.executable, str(HERE / "phoenix-serve"), "--exit-on-stdin-eof"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            line = server.stdout.readline()
            if not line:
                server.wait()
                print("phoenix selftest: phoenix-serve printed nothing (see its stderr above)", file=sys.stderr)
                sys.exit(1)
            info = json.loads(line)
            url = info["url"]
            print(f"phoenix-serve: {line.decode().strip()} ({time.monotonic() - t:.1f} s to ready)")
        run(url, c)
    except Exception as e:  # a failed check must not leave Phoenix behind
        c.failed += 1
        print(f"  FAIL {type(e).__name__}: {e}")
    finally:
        if server is not None:
            t = time.monotonic()
            server.stdin.close()
            try:
                code = server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.terminate()
                code = server.wait()
            print(f"phoenix-serve stopped by stdin EOF in {time.monotonic() - t:.1f} s")
            c.eq("phoenix-serve exit code", code, 0)
        if info is not None:
            c.eq("workdir removed", os.path.exists(info["workdir"]), False)
            try:
                os.kill(info["pid"], 0)
                alive = True
            except ProcessLookupError:
                alive = False
            c.eq("Phoenix process gone", alive, False)
    print(f"phoenix selftest: {c.passed} passed, {c.failed} failed")
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
