// #region agent log
private const val AGENT_DEBUG_APPEND_PATH = "__APPEND_PATH__"
// Secret key names, compared without case and separators: a short secret word as the whole
// name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
private val agentDebugSecret = Regex(
    "^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$"
)

private fun agentDebugSecretKey(key: String): Boolean =
    agentDebugSecret.containsMatchIn(key.toLowerCase().replace(Regex("[^a-z0-9]"), ""))

fun agentDebugLog(hypothesisId: String, location: String, message: String, data: Any?) {
    try {
        val sb = StringBuilder(256)
        sb.append("{\"hypothesisId\":")
        agentDebugString(sb, hypothesisId)
        sb.append(",\"location\":")
        agentDebugString(sb, location)
        sb.append(",\"message\":")
        agentDebugString(sb, message)
        sb.append(",\"data\":")
        agentDebugValue(sb, data, 0)
        sb.append(",\"timestamp\":").append(System.currentTimeMillis()).append("}\n")
        java.io.File(AGENT_DEBUG_APPEND_PATH).appendText(sb.toString(), Charsets.UTF_8)
    } catch (e: Throwable) {
        // A failed observation must never change control flow.
    }
}

private fun agentDebugValue(sb: StringBuilder, v: Any?, depth: Int) {
    when {
        depth > 8 -> agentDebugString(sb, "[depth limit]")
        v == null -> sb.append("null")
        v is Boolean -> sb.append(v)
        v is Double || v is Float -> {
            val d = (v as Number).toDouble()
            if (d.isFinite()) sb.append(d) else agentDebugString(sb, d.toString())
        }
        v is Number -> sb.append(v)
        v is CharSequence || v is Char || v is Enum<*> -> agentDebugString(sb, v.toString())
        v is Map<*, *> -> {
            sb.append('{')
            var n = 0
            for ((key, item) in v) {
                if (n >= 100) break
                if (n++ > 0) sb.append(',')
                val name = key.toString()
                agentDebugString(sb, name)
                sb.append(':')
                if (agentDebugSecretKey(name)) agentDebugString(sb, "[REDACTED]") else agentDebugValue(sb, item, depth + 1)
            }
            sb.append('}')
        }
        v is Iterable<*> -> {
            sb.append('[')
            var n = 0
            for (item in v) {
                if (n >= 100) break
                if (n++ > 0) sb.append(',')
                agentDebugValue(sb, item, depth + 1)
            }
            sb.append(']')
        }
        v is Array<*> -> agentDebugValue(sb, v.asList(), depth)
        else -> agentDebugString(sb, v.toString())
    }
}

private fun agentDebugString(sb: StringBuilder, text: String) {
    val s = if (text.length > 2000) text.substring(0, 2000) + "…" else text
    sb.append('"')
    for (c in s) {
        when (c) {
            '"' -> sb.append("\\\"")
            '\\' -> sb.append("\\\\")
            '\n' -> sb.append("\\n")
            '\r' -> sb.append("\\r")
            '\t' -> sb.append("\\t")
            else -> {
                val code = c - '\u0000'
                if (code < 0x20) sb.append(String.format("\\u%04x", code)) else sb.append(c)
            }
        }
    }
    sb.append('"')
}
// #endregion
