// #region agent log
#include <chrono>
#include <cstdio>
#include <string>
#define AGENT_DEBUG_APPEND_PATH "__APPEND_PATH__"
namespace agent_debug_mode {
// Largest serialized data written (bytes); a larger event is dropped.
constexpr std::size_t max_data_bytes = 32 * 1024;
// Largest record written (bytes, with its newline): the service's limit.
constexpr std::size_t max_record_bytes = 64 * 1024;
// Deepest nesting of data (the service's limit; data itself is level 1).
constexpr int max_depth = 16;
// Serializes plain text as one JSON string value. Use it when no JSON serializer is
// available; never build JSON by hand.
inline std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += "\"";
    return out;
}
namespace detail {
inline void ws(const std::string &s, std::size_t &i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}
inline std::size_t digits(const std::string &s, std::size_t &i) {
    std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
}
inline bool hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
inline bool string(const std::string &s, std::size_t &i) {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[i++]);
        if (c == '"') return true;
        if (c < 0x20) return false;
        if (c != '\\') continue;
        if (i >= s.size()) return false;
        char e = s[i++];
        if (e == 'u') {
            for (int k = 0; k < 4; ++k, ++i) {
                if (i >= s.size() || !hex(s[i])) return false;
            }
        } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' &&
                   e != 'r' && e != 't') {
            return false;
        }
    }
    return false;
}
inline bool value(const std::string &s, std::size_t &i, int depth) {
    if (depth > max_depth || i >= s.size()) return false;
    char c = s[i];
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        ++i;
        ws(s, i);
        if (i < s.size() && s[i] == close) {
            ++i;
            return true;
        }
        for (;;) {
            ws(s, i);
            if (c == '{') {
                if (!string(s, i)) return false;
                ws(s, i);
                if (i >= s.size() || s[i] != ':') return false;
                ++i;
                ws(s, i);
            }
            if (!value(s, i, depth + 1)) return false;
            ws(s, i);
            if (i < s.size() && s[i] == ',') {
                ++i;
            } else if (i < s.size() && s[i] == close) {
                ++i;
                return true;
            } else {
                return false;
            }
        }
    }
    if (c == '"') return string(s, i);
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (s[i] == '-') ++i;
        if (i < s.size() && s[i] == '0') {
            ++i;
        } else if (digits(s, i) == 0) {
            return false;
        }
        if (i < s.size() && s[i] == '.') {
            ++i;
            if (digits(s, i) == 0) return false;
        }
        if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
            ++i;
            if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
            if (digits(s, i) == 0) return false;
        }
        return true;
    }
    for (const char *w : {"true", "false", "null"}) {
        std::string word(w);
        if (s.compare(i, word.size(), word) == 0) {
            i += word.size();
            return true;
        }
    }
    return false;
}
}  // namespace detail
// True when s is exactly one well-formed JSON value on one line (no raw control
// characters), nested at most max_depth levels.
inline bool is_valid_json(const std::string &s) {
    std::size_t i = 0;
    detail::ws(s, i);
    if (!detail::value(s, i, 1)) return false;
    detail::ws(s, i);
    return i == s.size();
}
// Appends one event. data_json must be one complete serialized JSON value on one line, at
// most max_data_bytes; otherwise the event is dropped and nothing is written. Never throws.
inline void emit(const std::string &hypothesis_id, const std::string &location,
                 const std::string &message, const std::string &data_json) noexcept {
    try {
        if (data_json.size() > max_data_bytes || !is_valid_json(data_json)) return;
        long long ts = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
        std::string line = "{\"hypothesisId\":" + json_string(hypothesis_id) +
                           ",\"location\":" + json_string(location) +
                           ",\"message\":" + json_string(message) + ",\"data\":" + data_json +
                           ",\"timestamp\":" + std::to_string(ts) + "}\n";
        if (line.size() > max_record_bytes) return;
        if (std::FILE *f = std::fopen(AGENT_DEBUG_APPEND_PATH, "ab")) {
            // Unbuffered: the whole record is one write to an append-mode file, so
            // concurrent emitters never interleave within a record.
            std::setvbuf(f, nullptr, _IONBF, 0);
            std::fwrite(line.data(), 1, line.size(), f);
            std::fclose(f);
        }
    } catch (...) {
        // A failed observation must never change control flow.
    }
}
}  // namespace agent_debug_mode
// #endregion
