# region agent log
import json as _agent_debug_json
import re as _agent_debug_re
import time as _agent_debug_time

_AGENT_DEBUG_APPEND_PATH = "__APPEND_PATH__"
_AGENT_DEBUG_SECRET = _agent_debug_re.compile(
    r"pass(word|wd|phrase)|secret|token|api.?key|authorization|cookie|private.?key|credential", _agent_debug_re.I
)


def _agent_debug_sanitize(value, depth=0):
    if depth > 8:
        return "[depth limit]"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, str):
        return value if len(value) <= 2000 else value[:2000] + "…"
    if isinstance(value, dict):
        return {
            str(k): "[REDACTED]" if _AGENT_DEBUG_SECRET.search(str(k)) else _agent_debug_sanitize(v, depth + 1)
            for k, v in list(value.items())[:100]
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_agent_debug_sanitize(v, depth + 1) for v in list(value)[:100]]
    return _agent_debug_sanitize(repr(value), depth + 1)


def agent_debug_log(hypothesis_id, location, message, data=None):
    try:
        line = _agent_debug_json.dumps(
            {
                "hypothesisId": hypothesis_id,
                "location": location,
                "message": message,
                "data": _agent_debug_sanitize(data),
                "timestamp": int(_agent_debug_time.time() * 1000),
            },
            ensure_ascii=False,
        )
        with open(_AGENT_DEBUG_APPEND_PATH, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except Exception:
        pass  # A failed observation must never change control flow.
# endregion
