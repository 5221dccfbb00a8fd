# region agent log
import json as _agent_debug_json
import re as _agent_debug_re
import time as _agent_debug_time

_AGENT_DEBUG_APPEND_PATH = "__APPEND_PATH__"
# Secret key names, compared without case and separators: a short secret word as the whole
# name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
_AGENT_DEBUG_SECRET = _agent_debug_re.compile(
    r"^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization"
    r"|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$"
)


def _agent_debug_secret_key(key):
    return _AGENT_DEBUG_SECRET.search(_agent_debug_re.sub(r"[^a-z0-9]", "", str(key).lower())) is not None


def _agent_debug_sanitize(value, depth=0, active=None):
    if depth > 8:
        return "[depth limit]"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, str):
        return value if len(value) <= 2000 else value[:2000] + "…"
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        active = set() if active is None else active
        if id(value) in active:
            # A value that contains itself cannot be recorded: nothing is written.
            raise ValueError("cyclic value")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                return {
                    str(k): "[REDACTED]" if _agent_debug_secret_key(k) else _agent_debug_sanitize(v, depth + 1, active)
                    for k, v in list(value.items())[:100]
                }
            return [_agent_debug_sanitize(v, depth + 1, active) for v in list(value)[:100]]
        finally:
            active.discard(id(value))
    return _agent_debug_sanitize(repr(value), depth + 1, active)


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
