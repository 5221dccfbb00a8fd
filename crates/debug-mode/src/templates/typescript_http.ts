// #region agent log
const __agentDebugIngestUrl = "__INGEST_URL__";
function __agentDebugSanitize(value: unknown, depth: number): unknown {
  if (depth > 8) return "[depth limit]";
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "string") return value.length > 2000 ? value.slice(0, 2000) + "…" : value;
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (typeof value === "bigint") return value.toString();
  if (value === undefined || typeof value === "function" || typeof value === "symbol") return null;
  if (Array.isArray(value)) return value.slice(0, 100).map((item) => __agentDebugSanitize(item, depth + 1));
  if (value instanceof Error) return { name: value.name, message: __agentDebugSanitize(value.message, depth + 1) };
  if (value instanceof Map) return __agentDebugSanitize(Object.fromEntries(value), depth);
  if (value instanceof Set) return __agentDebugSanitize(Array.from(value), depth);
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const key of Object.keys(value as object)) {
    if (count++ >= 100) break;
    out[key] = /pass(word|wd|phrase)|secret|token|api.?key|authorization|cookie|private.?key|credential/i.test(key)
      ? "[REDACTED]"
      : __agentDebugSanitize((value as Record<string, unknown>)[key], depth + 1);
  }
  return out;
}
function agentDebugLog(hypothesisId: string, location: string, message: string, data: unknown): void {
  try {
    const body = JSON.stringify({
      hypothesisId,
      location,
      message,
      data: __agentDebugSanitize(data, 0),
      timestamp: Date.now(),
    }) + "\n";
    fetch(__agentDebugIngestUrl, {
      method: "POST",
      headers: { "Content-Type": "application/x-ndjson" },
      body,
      keepalive: true,
    }).catch(() => {});
  } catch {
    // A failed observation must never change control flow.
  }
}
// #endregion
