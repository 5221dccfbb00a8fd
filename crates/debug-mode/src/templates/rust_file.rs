// #region agent log
#[allow(dead_code)]
mod agent_debug_mode {
    use std::io::Write;

    const APPEND_PATH: &str = "__APPEND_PATH__";

    /// Serializes plain text as one JSON string value. Use it when no JSON serializer is
    /// available; never build JSON by hand.
    pub fn json_string(text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// Appends one event. `data_json` must be one complete serialized JSON value. Never
    /// panics and never changes control flow: failures are ignored.
    pub fn log(hypothesis_id: &str, location: &str, message: &str, data_json: impl AsRef<str>) {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let data = data_json.as_ref().trim();
        let data = if data.is_empty() { "null".to_owned() } else { data.replace(['\n', '\r'], " ") };
        let line = format!(
            "{{\"hypothesisId\":{},\"location\":{},\"message\":{},\"data\":{},\"timestamp\":{}}}\n",
            json_string(hypothesis_id),
            json_string(location),
            json_string(message),
            data,
            timestamp
        );
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(APPEND_PATH) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
// #endregion
