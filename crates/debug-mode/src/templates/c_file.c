// #region agent log
/* C99 or later. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !(defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L) && (defined(__unix__) || defined(__APPLE__))
#include <sys/time.h>
#endif
#define AGENT_DEBUG_APPEND_PATH "__APPEND_PATH__"
/* Text longer than this is cut (at a character boundary) by agent_debug_json_string. */
#define AGENT_DEBUG_JSON_STRING_CAP 4096
/* Largest serialized data written (bytes); a larger event is dropped. */
#define AGENT_DEBUG_MAX_DATA_BYTES 32768
/* Largest record written (bytes, with its newline): the service's limit. */
#define AGENT_DEBUG_MAX_RECORD_BYTES 65536
/* Deepest nesting of data (the service's limit; data itself is level 1). */
#define AGENT_DEBUG_MAX_DEPTH 16
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define AGENT_DEBUG_THREAD_LOCAL _Thread_local
#elif defined(__GNUC__)
#define AGENT_DEBUG_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define AGENT_DEBUG_THREAD_LOCAL __declspec(thread)
#else
#define AGENT_DEBUG_THREAD_LOCAL /* no thread-local storage: json_string is not thread-safe */
#endif
/* Serializes plain text as one JSON string value (quotes, backslashes, newlines and every
 * control character escaped) into a rotating thread-local buffer (8 buffers). Use it when
 * no JSON serializer is available; never build JSON by hand. */
static inline const char *agent_debug_json_string(const char *text) {
    static AGENT_DEBUG_THREAD_LOCAL char bufs[8][AGENT_DEBUG_JSON_STRING_CAP + 8];
    static AGENT_DEBUG_THREAD_LOCAL unsigned next;
    char *out = bufs[next++ % 8];
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    out[n++] = '"';
    for (; *p; p++) {
        unsigned char c = *p;
        /* Stop at the cap, but not inside a multi-byte UTF-8 character. */
        if (n >= AGENT_DEBUG_JSON_STRING_CAP && ((c & 0xC0) != 0x80 || n >= AGENT_DEBUG_JSON_STRING_CAP + 3)) break;
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
static inline void agent_debug_json_ws(const char *s, size_t *i) {
    while (s[*i] == ' ' || s[*i] == '\t') (*i)++;
}
static inline size_t agent_debug_json_digits(const char *s, size_t *i) {
    size_t start = *i;
    while (s[*i] >= '0' && s[*i] <= '9') (*i)++;
    return *i - start;
}
static inline int agent_debug_json_str(const char *s, size_t *i) {
    if (s[*i] != '"') return 0;
    (*i)++;
    for (;;) {
        unsigned char c = (unsigned char)s[(*i)++];
        if (c == '"') return 1;
        if (c < 0x20) return 0; /* raw control character, or the end of the text */
        if (c != '\\') continue;
        c = (unsigned char)s[(*i)++];
        if (c == 'u') {
            int k;
            for (k = 0; k < 4; k++, (*i)++) {
                char h = s[*i];
                if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
            }
        } else if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') {
            return 0;
        }
    }
}
static inline int agent_debug_json_value(const char *s, size_t *i, int depth) {
    char c = s[*i];
    if (depth > AGENT_DEBUG_MAX_DEPTH) return 0;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        (*i)++;
        agent_debug_json_ws(s, i);
        if (s[*i] == close) { (*i)++; return 1; }
        for (;;) {
            agent_debug_json_ws(s, i);
            if (c == '{') {
                if (!agent_debug_json_str(s, i)) return 0;
                agent_debug_json_ws(s, i);
                if (s[*i] != ':') return 0;
                (*i)++;
                agent_debug_json_ws(s, i);
            }
            if (!agent_debug_json_value(s, i, depth + 1)) return 0;
            agent_debug_json_ws(s, i);
            if (s[*i] == ',') { (*i)++; }
            else if (s[*i] == close) { (*i)++; return 1; }
            else return 0;
        }
    }
    if (c == '"') return agent_debug_json_str(s, i);
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') (*i)++;
        if (s[*i] == '0') (*i)++;
        else if (agent_debug_json_digits(s, i) == 0) return 0;
        if (s[*i] == '.') { (*i)++; if (agent_debug_json_digits(s, i) == 0) return 0; }
        if (s[*i] == 'e' || s[*i] == 'E') {
            (*i)++;
            if (s[*i] == '+' || s[*i] == '-') (*i)++;
            if (agent_debug_json_digits(s, i) == 0) return 0;
        }
        return 1;
    }
    if (strncmp(s + *i, "true", 4) == 0) { *i += 4; return 1; }
    if (strncmp(s + *i, "false", 5) == 0) { *i += 5; return 1; }
    if (strncmp(s + *i, "null", 4) == 0) { *i += 4; return 1; }
    return 0;
}
/* 1 when text is exactly one well-formed JSON value on one line (no raw control
 * characters), nested at most AGENT_DEBUG_MAX_DEPTH levels. */
static inline int agent_debug_json_valid(const char *text) {
    size_t i = 0;
    agent_debug_json_ws(text, &i);
    if (!agent_debug_json_value(text, &i, 1)) return 0;
    agent_debug_json_ws(text, &i);
    return text[i] == '\0';
}
static inline long long agent_debug_now_ms(void) {
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && defined(TIME_UTC)
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC)) return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
#elif defined(__unix__) || defined(__APPLE__)
    struct timeval tv;
    if (gettimeofday(&tv, NULL) == 0) return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
#endif
    return (long long)time(NULL) * 1000;
}
/* Appends one event. data_json must be one complete serialized JSON value on one line, at
 * most AGENT_DEBUG_MAX_DATA_BYTES (NULL means null); otherwise the event is dropped and
 * nothing is written. A failed observation never changes control flow. */
static inline void agent_debug_emit(const char *hypothesis_id, const char *location,
                                    const char *message, const char *data_json) {
    const char *d = data_json ? data_json : "null";
    char *line;
    int n;
    FILE *f;
    if (strlen(d) > AGENT_DEBUG_MAX_DATA_BYTES || !agent_debug_json_valid(d)) return;
    line = (char *)malloc(AGENT_DEBUG_MAX_RECORD_BYTES + 1);
    if (!line) return;
    n = snprintf(line, AGENT_DEBUG_MAX_RECORD_BYTES + 1,
                 "{\"hypothesisId\":%s,\"location\":%s,\"message\":%s,\"data\":%s,\"timestamp\":%lld}\n",
                 agent_debug_json_string(hypothesis_id), agent_debug_json_string(location),
                 agent_debug_json_string(message), d, agent_debug_now_ms());
    if (n > 0 && n <= AGENT_DEBUG_MAX_RECORD_BYTES) {
        f = fopen(AGENT_DEBUG_APPEND_PATH, "ab");
        if (f) {
            /* Unbuffered: the whole record is one write to an append-mode file, so
             * concurrent emitters never interleave within a record. */
            setvbuf(f, NULL, _IONBF, 0);
            fwrite(line, 1, (size_t)n, f);
            fclose(f);
        }
    }
    free(line);
}
// #endregion
