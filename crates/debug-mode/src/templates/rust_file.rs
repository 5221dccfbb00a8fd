// #region agent log
#[allow(dead_code)]
mod agent_debug_mode {
    use std::io::Write;

    const APPEND_PATH: &str = "__APPEND_PATH__";
    /// Largest serialized `data` written (bytes); a larger event is dropped.
    pub const MAX_DATA_BYTES: usize = 32 * 1024;
    /// Largest record written (bytes, with its newline): the service's limit.
    const MAX_RECORD_BYTES: usize = 64 * 1024;
    /// Deepest nesting of `data` (the service's limit; `data` itself is level 1).
    const MAX_DEPTH: usize = 16;

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

    /// True when `s` is exactly one well-formed JSON value on one line (no raw control
    /// characters), nested at most `MAX_DEPTH` levels.
    pub fn is_valid_json(s: &str) -> bool {
        let b = s.as_bytes();
        let mut i = 0;
        ws(b, &mut i);
        let ok = value(b, &mut i, 1);
        ws(b, &mut i);
        ok && i == b.len()
    }

    fn ws(b: &[u8], i: &mut usize) {
        while matches!(b.get(*i), Some(b' ' | b'\t')) {
            *i += 1;
        }
    }

    fn digits(b: &[u8], i: &mut usize) -> usize {
        let start = *i;
        while matches!(b.get(*i), Some(b'0'..=b'9')) {
            *i += 1;
        }
        *i - start
    }

    fn value(b: &[u8], i: &mut usize, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match b.get(*i) {
            Some(&open @ (b'{' | b'[')) => {
                let close = if open == b'{' { b'}' } else { b']' };
                *i += 1;
                ws(b, i);
                if b.get(*i) == Some(&close) {
                    *i += 1;
                    return true;
                }
                loop {
                    ws(b, i);
                    if open == b'{' {
                        if !string(b, i) {
                            return false;
                        }
                        ws(b, i);
                        if b.get(*i) != Some(&b':') {
                            return false;
                        }
                        *i += 1;
                        ws(b, i);
                    }
                    if !value(b, i, depth + 1) {
                        return false;
                    }
                    ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(c) if *c == close => {
                            *i += 1;
                            return true;
                        }
                        _ => return false,
                    }
                }
            }
            Some(b'"') => string(b, i),
            Some(b'-' | b'0'..=b'9') => {
                if b.get(*i) == Some(&b'-') {
                    *i += 1;
                }
                match b.get(*i) {
                    Some(b'0') => *i += 1,
                    Some(b'1'..=b'9') => {
                        digits(b, i);
                    }
                    _ => return false,
                }
                if b.get(*i) == Some(&b'.') {
                    *i += 1;
                    if digits(b, i) == 0 {
                        return false;
                    }
                }
                if matches!(b.get(*i), Some(b'e' | b'E')) {
                    *i += 1;
                    if matches!(b.get(*i), Some(b'+' | b'-')) {
                        *i += 1;
                    }
                    if digits(b, i) == 0 {
                        return false;
                    }
                }
                true
            }
            _ => ["true", "false", "null"].iter().any(|w| {
                let hit = b[*i..].starts_with(w.as_bytes());
                if hit {
                    *i += w.len();
                }
                hit
            }),
        }
    }

    fn string(b: &[u8], i: &mut usize) -> bool {
        if b.get(*i) != Some(&b'"') {
            return false;
        }
        *i += 1;
        while let Some(&c) = b.get(*i) {
            *i += 1;
            match c {
                b'"' => return true,
                b'\\' => match b.get(*i) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => *i += 1,
                    Some(b'u') if b.len() > *i + 4 && b[*i + 1..*i + 5].iter().all(u8::is_ascii_hexdigit) => *i += 5,
                    _ => return false,
                },
                0..=0x1f => return false,
                _ => {}
            }
        }
        false
    }

    /// Appends one event. `data_json` must be one complete serialized JSON value on one line,
    /// at most `MAX_DATA_BYTES`; otherwise the event is dropped and nothing is written.
    /// Never panics and never changes control flow: failures are ignored.
    pub fn emit(hypothesis_id: &str, location: &str, message: &str, data_json: impl AsRef<str>) {
        let data = data_json.as_ref();
        if data.len() > MAX_DATA_BYTES || !is_valid_json(data) {
            return;
        }
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let line = format!(
            "{{\"hypothesisId\":{},\"location\":{},\"message\":{},\"data\":{},\"timestamp\":{}}}\n",
            json_string(hypothesis_id),
            json_string(location),
            json_string(message),
            data.trim_matches([' ', '\t']),
            timestamp
        );
        if line.len() > MAX_RECORD_BYTES {
            return;
        }
        // One write of the whole record to an O_APPEND file: concurrent emitters never
        // interleave within a record.
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(APPEND_PATH) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
// #endregion
