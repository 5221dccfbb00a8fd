#!/usr/bin/env python3
"""Reads spans back out of a running Arize Phoenix through Phoenix's own REST API.

    python phoenix_spans.py --url http://127.0.0.1:PORT [--project NAME] [--trace-id HEX]
                            [--wait SECONDS] [--min-spans N]

Prints a JSON list of spans on stdout, sorted by start time, each
    {"trace_id": "<32 hex>", "span_id": "<16 hex>", "parent_id": "<16 hex>" | null,
     "name": str, "span_kind": "AGENT" | "CHAIN" | "LLM" | ... | "UNKNOWN",
     "start_time": ISO 8601 with offset, "end_time": ISO 8601 with offset,
     "status_code": "OK" | "ERROR" | "UNSET", "status_message": str,
     "attributes": {flat dotted key: value}, "events": [{"name", "timestamp", "attributes"}],
     "project": str}
Polls (every 0.25 s) until at least --min-spans spans (default 1; of --trace-id when given,
else of the whole project) are there, for at most --wait seconds (default 30); exits 1 with
a message on stderr when they are not. Only the standard library is used, so any python 3
runs it; `import phoenix_spans` gives fetch_spans() and wait_for_spans() to other scripts.

What Phoenix does, read in arize-phoenix 20.26.1's source (phoenix/server/api/routers/v1/
traces.py, spans.py, phoenix/trace/otel.py, phoenix/trace/attributes.py) and checked by
scripts/phoenix_selftest.py:

* OTLP/HTTP ingestion is `POST {url}/v1/traces` on the same port as the UI and the REST API.
  It takes only protobuf: the Content-Type header must be exactly `application/x-protobuf`
  (an exact string compare: no `; charset=...` parameter, else 415; JSON OTLP is not
  accepted either). Content-Encoding may be absent, `gzip` or `deflate`. The answer is 200
  with an empty ExportTraceServiceResponse as soon as the body parses (422 when it does
  not): spans are decoded and inserted afterwards, in a background task and a batching
  queue, so they show up in the API some hundreds of milliseconds later (hence polling).
  OTLP/gRPC is on a separate port (PHOENIX_GRPC_PORT) with the same semantics.
* Project rule, per ResourceSpans: the `x-project-name` HTTP header of the export request,
  if present, wins; else the resource attribute `openinference.project.name` (a string);
  else the project named "default". A project is created on its first span. Asking the
  API for a project that does not exist yet is a 404, which this script treats as "no
  spans yet" while it polls. `--project '*'` searches every project (GET /v1/projects).
  The OTel `service.name` plays no part.
* Reading: `GET {url}/v1/projects/{project name or id}/spans?trace_id=HEX&limit=1000
  [&cursor=...]` (operation getSpans; also filters span_id, parent_id, name, span_kind,
  status_code) returns {"data": [Span...], "next_cursor": str | null}, newest first, where
  Span is {"id": GlobalID, "name", "context": {"trace_id", "span_id"}, "span_kind",
  "parent_id", "start_time", "end_time", "status_code", "status_message", "attributes",
  "events"}. (There is also GET .../spans/otlpv1, the same spans as OTLP JSON, and
  GraphQL at /graphql; not used here.)
* Ids: trace and span ids are stored and returned as lowercase hex (32 and 16 digits) of
  the OTLP bytes, not base64 as in OTLP/JSON. parent_id is the parent's hex span id, or
  null for a root. Only an EMPTY parent_span_id makes a root: eight zero bytes come back
  as parent_id "0000000000000000" (checked), so an exporter must leave the field empty.
  The trace_id filter is an exact string match, so this script lowercases --trace-id.
* Span kind: the OTLP SpanKind (INTERNAL, CLIENT, ...) is dropped. `span_kind` in this
  API is the raw value of the `openinference.span.kind` attribute, which Phoenix pops out
  of `attributes` here (so it is NOT among the returned attributes); "UNKNOWN" when the
  attribute is absent. The value is not normalised in this API (checked: "llm" comes back
  "llm", "WEIRD" comes back "WEIRD"), although the separate span_kind column that the UI
  and the span_kind filter use is upper-cased, or UNKNOWN when not a known kind: send the
  upper-case OpenInference values (AGENT, CHAIN, LLM, TOOL, ...). A span with no kind but
  `gen_ai.*` attributes gets one synthesized (e.g. LLM). Status: STATUS_CODE_OK -> "OK",
  STATUS_CODE_ERROR -> "ERROR" (with its message), unset -> "UNSET".
* Attributes: Phoenix unflattens dotted keys into a nested JSON document when it stores a
  span and the API flattens them back to dotted keys, lists of objects included:
  `llm.input_messages.0.message.role` comes back under that very key. Lists of scalars
  (an OTLP ArrayValue of strings or numbers) stay JSON lists. Int attributes come back as
  JSON integers (llm.token_count.prompt = 3), doubles as floats, bools as bools. Two
  rewrites on the way in: the string values of `metadata`, `llm.prompt_template.variables`,
  `tool.parameters` and `document.metadata` are parsed as JSON when they parse (so
  `metadata` = '{"a": 1}' comes back as `metadata.a` = 1), and `gen_ai.*` attributes
  (OTel GenAI conventions) are translated into OpenInference ones that the span does
  not already carry (the gen_ai.* keys are kept too: gen_ai.request.model = "m1" and
  gen_ai.usage.input_tokens = 4 come back along with llm.model_name = "m1" and
  llm.token_count.prompt = 4). Anything else (session.id, user.id, input.value, ...)
  comes back as sent. Resource attributes are not stored per span and do not come back. This script
  flattens any nested object it still finds, the same way, so attributes are always flat.
* Times are ISO 8601 strings with a UTC offset, microsecond precision (OTLP's nanoseconds
  are truncated).
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple


class PhoenixError(Exception):
    pass


def _get(url: str, timeout: float = 10.0) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def _flatten(value: Any, prefix: str) -> Iterator[Tuple[str, Any]]:
    """Dotted keys for nested objects and lists of objects; lists of scalars stay lists."""
    if isinstance(value, dict):
        if not value and prefix:
            yield prefix, value
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{prefix}.{i}")
    else:
        yield prefix, value


def flatten_attributes(attributes: Any) -> Dict[str, Any]:
    if not isinstance(attributes, dict):
        return {}
    return dict(_flatten(attributes, ""))


def normalise(span: Dict[str, Any], project: str) -> Dict[str, Any]:
    context = span.get("context") or {}
    return {
        "trace_id": (context.get("trace_id") or span.get("trace_id") or "").lower(),
        "span_id": (context.get("span_id") or span.get("span_id") or "").lower(),
        "parent_id": (span.get("parent_id") or None) and span["parent_id"].lower(),
        "name": span.get("name", ""),
        "span_kind": span.get("span_kind") or "UNKNOWN",
        "start_time": span.get("start_time"),
        "end_time": span.get("end_time"),
        "status_code": span.get("status_code") or "UNSET",
        "status_message": span.get("status_message") or "",
        "attributes": flatten_attributes(span.get("attributes")),
        "events": [
            {
                "name": e.get("name", ""),
                "timestamp": e.get("timestamp"),
                "attributes": flatten_attributes(e.get("attributes")),
            }
            for e in span.get("events") or []
        ],
        "project": project,
    }


def list_projects(url: str) -> List[str]:
    names: List[str] = []
    cursor: Optional[str] = None
    while True:
        q = {"limit": "100"}
        if cursor:
            q["cursor"] = cursor
        body = _get(f"{url}/v1/projects?{urllib.parse.urlencode(q)}")
        names += [p["name"] for p in body.get("data", [])]
        cursor = body.get("next_cursor")
        if not cursor:
            return names


def fetch_spans(url: str, project: str = "default", trace_id: Optional[str] = None) -> List[Dict[str, Any]]:
    """All spans of `project` ('*': of every project), of one trace when trace_id is given,
    normalised and sorted by start time. A project that does not exist (yet) has none."""
    url = url.rstrip("/")
    if project == "*":
        spans: List[Dict[str, Any]] = []
        for name in list_projects(url):
            spans += fetch_spans(url, name, trace_id)
        return sorted(spans, key=lambda s: (s["start_time"] or "", s["span_id"]))
    out: List[Dict[str, Any]] = []
    cursor: Optional[str] = None
    while True:
        q: List[Tuple[str, str]] = [("limit", "1000")]
        if trace_id:
            q.append(("trace_id", trace_id.lower().removeprefix("0x")))
        if cursor:
            q.append(("cursor", cursor))
        path = f"{url}/v1/projects/{urllib.parse.quote(project, safe='')}/spans?{urllib.parse.urlencode(q)}"
        try:
            body = _get(path)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return []
            raise PhoenixError(f"GET {path}: HTTP {e.code}: {e.read()[:500]!r}") from e
        out += [normalise(s, project) for s in body.get("data", [])]
        cursor = body.get("next_cursor")
        if not cursor:
            break
    return sorted(out, key=lambda s: (s["start_time"] or "", s["span_id"]))


def wait_for_spans(url: str, project: str = "default", trace_id: Optional[str] = None,
                   wait: float = 30.0, min_spans: int = 1) -> List[Dict[str, Any]]:
    """Polls fetch_spans until it has at least min_spans spans; TimeoutError after `wait` s."""
    deadline = time.monotonic() + wait
    spans: List[Dict[str, Any]] = []
    last_error: Optional[BaseException] = None
    while True:
        try:
            spans = fetch_spans(url, project, trace_id)
            last_error = None
            if len(spans) >= min_spans:
                return spans
        except (urllib.error.URLError, OSError, PhoenixError, ValueError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            what = f"trace {trace_id}" if trace_id else "any trace"
            msg = (f"timed out after {wait:g} s waiting for {min_spans} span(s) of {what} in "
                   f"Phoenix project {project!r} at {url}: found {len(spans)}")
            if last_error is not None:
                msg += f" (last error: {last_error})"
            raise TimeoutError(msg)
        time.sleep(0.25)


def main() -> None:
    ap = argparse.ArgumentParser(description="Read spans back from Arize Phoenix's REST API as flat JSON.")
    ap.add_argument("--url", required=True, help="Phoenix base URL, e.g. http://127.0.0.1:6006")
    ap.add_argument("--project", default="default", help="project name or id; '*' for every project (default: default)")
    ap.add_argument("--trace-id", help="only this trace (32 hex digits)")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to poll for (default 30)")
    ap.add_argument("--min-spans", type=int, default=1, help="spans to wait for (default 1)")
    args = ap.parse_args()
    try:
        spans = wait_for_spans(args.url, args.project, args.trace_id, args.wait, args.min_spans)
    except TimeoutError as e:
        print(f"phoenix_spans: error: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump(spans, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
