// #region agent log
#include <chrono>
#include <cstdio>
#include <string>
#define AGENT_DEBUG_APPEND_PATH "__APPEND_PATH__"
namespace agent_debug_mode {
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
// Appends one event. data_json must be one complete serialized JSON value. Never throws.
inline void log(const std::string &hypothesis_id, const std::string &location,
                const std::string &message, const std::string &data_json) noexcept {
    try {
        long long ts = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
        std::string data = data_json.empty() ? std::string("null") : data_json;
        for (char &c : data) {
            if (c == '\n' || c == '\r') c = ' ';
        }
        std::string line = "{\"hypothesisId\":" + json_string(hypothesis_id) +
                           ",\"location\":" + json_string(location) +
                           ",\"message\":" + json_string(message) + ",\"data\":" + data +
                           ",\"timestamp\":" + std::to_string(ts) + "}\n";
        if (std::FILE *f = std::fopen(AGENT_DEBUG_APPEND_PATH, "ab")) {
            std::fwrite(line.data(), 1, line.size(), f);
            std::fclose(f);
        }
    } catch (...) {
        // A failed observation must never change control flow.
    }
}
}  // namespace agent_debug_mode
// #endregion
