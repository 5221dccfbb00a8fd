// #region agent log
import Foundation

let agentDebugAppendPath = "__APPEND_PATH__"

func agentDebugSanitize(_ value: Any?, _ depth: Int = 0) -> Any {
    if depth > 8 { return "[depth limit]" }
    guard let value = value else { return NSNull() }
    switch value {
    case let text as String:
        return text.count > 2000 ? String(text.prefix(2000)) + "…" : text
    case let flag as Bool:
        return flag
    case let number as Int:
        return number
    case let number as Double:
        return number.isFinite ? number : String(number)
    case let list as [Any]:
        return list.prefix(100).map { agentDebugSanitize($0, depth + 1) }
    case let map as [String: Any]:
        var out: [String: Any] = [:]
        for (key, item) in map.prefix(100) {
            // Compared without case and separators: a short secret word as the whole name, or
            // a name ending with a secret word (api_key, accessToken; not tokenCount).
            let norm = String(key.lowercased().unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) })
            let secret = norm.range(
                of: "^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$",
                options: .regularExpression) != nil
            out[key] = secret ? "[REDACTED]" : agentDebugSanitize(item, depth + 1)
        }
        return out
    case is NSNull:
        return NSNull()
    default:
        return String(describing: value)
    }
}

func agentDebugLog(_ hypothesisId: String, _ location: String, _ message: String, _ data: Any?) {
    let event: [String: Any] = [
        "hypothesisId": hypothesisId,
        "location": location,
        "message": message,
        "data": agentDebugSanitize(data),
        "timestamp": Int(Date().timeIntervalSince1970 * 1000),
    ]
    guard JSONSerialization.isValidJSONObject(event),
          var line = try? JSONSerialization.data(withJSONObject: event) else { return }
    line.append(0x0A)
    if let handle = FileHandle(forWritingAtPath: agentDebugAppendPath) {
        handle.seekToEndOfFile()
        handle.write(line)
        handle.closeFile()
    } else {
        FileManager.default.createFile(atPath: agentDebugAppendPath, contents: line)
    }
}
// #endregion
