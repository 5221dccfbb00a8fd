// #region agent log
const __agentDebugIngestUrl = "__INGEST_URL__";
// Secret key names, compared without case and separators: a short secret word as the whole
// name, or a name ending with a secret word (`api_key`, `accessToken`; not `tokenCount`).
const __agentDebugSecretKey = /^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$/;
function __agentDebugSanitize(value: unknown, depth: number, active: Set<object>): unknown {
  if (depth > 8) return "[depth limit]";
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "string") return value.length > 2000 ? value.slice(0, 2000) + "…" : value;
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (typeof value === "bigint") return value.toString();
  if (value === undefined || typeof value === "function" || typeof value === "symbol") return null;
  const obj = value as object;
  // A value that contains itself cannot be recorded: the observation fails, nothing is sent.
  if (active.has(obj)) throw new Error("cyclic value");
  active.add(obj);
  try {
    if (Array.isArray(obj)) return obj.slice(0, 100).map((item: unknown) => __agentDebugSanitize(item, depth + 1, active));
    if (obj instanceof Error) return { name: obj.name, message: __agentDebugSanitize(obj.message, depth + 1, active) };
    if (obj instanceof Map) return __agentDebugSanitize(Object.fromEntries(obj), depth, active);
    if (obj instanceof Set) return __agentDebugSanitize(Array.from(obj), depth, active);
    const out: Record<string, unknown> = {};
    let count = 0;
    for (const key of Object.keys(obj)) {
      if (count++ >= 100) break;
      out[key] = __agentDebugSecretKey.test(key.toLowerCase().replace(/[^a-z0-9]/g, ""))
        ? "[REDACTED]"
        : __agentDebugSanitize((obj as Record<string, unknown>)[key], depth + 1, active);
    }
    return out;
  } finally {
    active.delete(obj);
  }
}
function agentDebugLog(hypothesisId: string, location: string, message: string, data: unknown): void {
  try {
    const body = JSON.stringify({
      hypothesisId,
      location,
      message,
      data: __agentDebugSanitize(data, 0, new Set<object>()),
      timestamp: Date.now(),
    }) + "\n";
    fetch(__agentDebugIngestUrl, {
      method: "POST",
      headers: { "Content-Type": "application/x-ndjson" },
      body,
      keepalive: true,
    })
      // Release the response body so the connection is freed at once.
      .then((response) => (response.body ? response.body.cancel() : undefined))
      .catch(() => {});
  } catch {
    // A failed observation must never change control flow.
  }
}
// #endregion
