// #region agent log
final class AgentDebugLog {
    private static final String APPEND_PATH = "__APPEND_PATH__";
    // Secret key names, compared without case and separators: a short secret word as the
    // whole name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
    private static final java.util.regex.Pattern SECRET = java.util.regex.Pattern.compile(
        "^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$");

    private AgentDebugLog() {}

    static void log(String hypothesisId, String location, String message, Object data) {
        try {
            StringBuilder sb = new StringBuilder(256);
            sb.append("{\"hypothesisId\":");
            string(sb, hypothesisId);
            sb.append(",\"location\":");
            string(sb, location);
            sb.append(",\"message\":");
            string(sb, message);
            sb.append(",\"data\":");
            value(sb, data, 0, java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<Object, Boolean>()));
            sb.append(",\"timestamp\":").append(System.currentTimeMillis()).append("}\n");
            java.nio.file.Files.write(
                java.nio.file.Paths.get(APPEND_PATH),
                sb.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8),
                java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.APPEND);
        } catch (Throwable ignored) {
            // A failed observation must never change control flow.
        }
    }

    private static boolean secretKey(String key) {
        return SECRET.matcher(key.toLowerCase(java.util.Locale.ROOT).replaceAll("[^a-z0-9]", "")).find();
    }

    private static void value(StringBuilder sb, Object v, int depth, java.util.Set<Object> active) throws IllegalAccessException {
        if (depth > 8) {
            string(sb, "[depth limit]");
        } else if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isFinite(d)) sb.append(d); else string(sb, String.valueOf(d));
        } else if (v instanceof Number) {
            sb.append(v);
        } else if (v instanceof CharSequence || v instanceof Character || v instanceof Enum) {
            string(sb, v.toString());
        } else if (v instanceof java.util.Optional) {
            value(sb, ((java.util.Optional<?>) v).orElse(null), depth, active);
        } else if (v.getClass().getName().startsWith("java.") && !(v instanceof java.util.Map)
                   && !(v instanceof Iterable) && !v.getClass().isArray()) {
            // JDK value types (dates, UUIDs, paths, ...) read best as their text.
            string(sb, String.valueOf(v));
        } else {
            // A value that contains itself cannot be recorded: nothing is written.
            if (!active.add(v)) throw new IllegalStateException("cyclic value");
            if (v instanceof java.util.Map) {
                sb.append('{');
                int n = 0;
                for (java.util.Map.Entry<?, ?> e : ((java.util.Map<?, ?>) v).entrySet()) {
                    if (n >= 100) break;
                    if (n++ > 0) sb.append(',');
                    member(sb, String.valueOf(e.getKey()), e.getValue(), depth, active);
                }
                sb.append('}');
            } else if (v instanceof Iterable) {
                sb.append('[');
                int n = 0;
                for (Object item : (Iterable<?>) v) {
                    if (n >= 100) break;
                    if (n++ > 0) sb.append(',');
                    value(sb, item, depth + 1, active);
                }
                sb.append(']');
            } else if (v.getClass().isArray()) {
                sb.append('[');
                int len = Math.min(java.lang.reflect.Array.getLength(v), 100);
                for (int i = 0; i < len; i++) {
                    if (i > 0) sb.append(',');
                    value(sb, java.lang.reflect.Array.get(v, i), depth + 1, active);
                }
                sb.append(']');
            } else {
                // Custom objects (POJOs, records): their instance fields, by name.
                sb.append('{');
                int n = 0;
                for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
                    for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                        int mod = f.getModifiers();
                        if (java.lang.reflect.Modifier.isStatic(mod) || java.lang.reflect.Modifier.isTransient(mod) || f.isSynthetic()) continue;
                        try {
                            f.setAccessible(true);
                        } catch (RuntimeException inaccessible) {
                            continue;
                        }
                        if (n >= 100) break;
                        if (n++ > 0) sb.append(',');
                        member(sb, f.getName(), f.get(v), depth, active);
                    }
                }
                sb.append('}');
            }
            active.remove(v);
        }
    }

    private static void member(StringBuilder sb, String key, Object item, int depth, java.util.Set<Object> active) throws IllegalAccessException {
        string(sb, key);
        sb.append(':');
        if (secretKey(key)) string(sb, "[REDACTED]"); else value(sb, item, depth + 1, active);
    }

    private static void string(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        if (s.length() > 2000) s = s.substring(0, 2000) + "…";
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c)); else sb.append(c);
            }
        }
        sb.append('"');
    }
}
// #endregion
