// #region agent log
#include <stdio.h>
#include <string.h>
#include <time.h>
#define AGENT_DEBUG_APPEND_PATH "__APPEND_PATH__"
#define AGENT_DEBUG_JSON_STRING_CAP 4096
/* Serializes plain text as one JSON string value into a rotating thread-local buffer
 * (8 buffers; text beyond 4 KiB is cut). Use it when no JSON serializer is available;
 * never build JSON by hand. */
static inline const char *agent_debug_json_string(const char *text) {
    static _Thread_local char bufs[8][AGENT_DEBUG_JSON_STRING_CAP + 8];
    static _Thread_local unsigned next;
    char *out = bufs[next++ % 8];
    size_t n = 0;
    out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p && n < AGENT_DEBUG_JSON_STRING_CAP; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') { out[n++] = '\\'; out[n++] = (char)c; }
        else if (c == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
        else if (c == '\r') { out[n++] = '\\'; out[n++] = 'r'; }
        else if (c == '\t') { out[n++] = '\\'; out[n++] = 't'; }
        else if (c < 0x20) { n += (size_t)snprintf(out + n, 7, "\\u%04x", (unsigned)c); }
        else { out[n++] = (char)c; }
    }
    out[n++] = '"';
    out[n] = '\0';
    return out;
}
/* Appends one event. data_json must be one complete serialized JSON value (or NULL). */
static inline void agent_debug_log(const char *hypothesis_id, const char *location,
                                   const char *message, const char *data_json) {
    FILE *f = fopen(AGENT_DEBUG_APPEND_PATH, "ab");
    if (!f) return; /* A failed observation must never change control flow. */
    long long ms = 0;
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC)) ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    fputs("{\"hypothesisId\":", f);
    fputs(agent_debug_json_string(hypothesis_id), f);
    fputs(",\"location\":", f);
    fputs(agent_debug_json_string(location), f);
    fputs(",\"message\":", f);
    fputs(agent_debug_json_string(message), f);
    fputs(",\"data\":", f);
    const char *d = (data_json && *data_json) ? data_json : "null";
    for (; *d; d++) fputc((*d == '\n' || *d == '\r') ? ' ' : *d, f);
    fprintf(f, ",\"timestamp\":%lld}\n", ms);
    fclose(f);
}
// #endregion
