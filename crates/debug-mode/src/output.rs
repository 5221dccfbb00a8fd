//! The shared result envelope (seed §2.1) and its two renderers. A command builds one
//! [`Report`]; `--json` serializes it, the pretty renderer prints it in the fixed order:
//! warnings, summary and scope, statistics, records, hints.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::DmError;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Warning {
    pub code: String,
    pub message: String,
}

/// An actionable follow-up: what to do (`action`, a stable word), the command that does it
/// (when there is one; runnable as printed) and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hint {
    pub action: &'static str,
    pub command: Option<String>,
    pub message: String,
    /// Pretty output shows the message (as a `#` comment line) above the command.
    #[serde(skip)]
    pub explain: bool,
}

impl Hint {
    /// A hint with a command to run.
    pub fn run(
        action: &'static str,
        command: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            action,
            command: Some(command.into()),
            message: message.into(),
            explain: false,
        }
    }

    /// The same hint, with its message shown in pretty output too.
    #[must_use]
    pub fn explained(mut self) -> Self {
        self.explain = true;
        self
    }

    /// A hint without a command (something to do in the program or the environment).
    pub fn note(action: &'static str, message: impl Into<String>) -> Self {
        Self {
            action,
            command: None,
            message: message.into(),
            explain: false,
        }
    }
}

/// One semantic result.
#[derive(Debug, Clone)]
pub struct Report {
    pub command: &'static str,
    pub title: String,
    pub session_id: Option<String>,
    pub hypothesis_filter: Option<Vec<String>>,
    pub partial: bool,
    pub warnings: Vec<Warning>,
    /// (json key, pretty label, value)
    pub statistics: Vec<(&'static str, &'static str, Value)>,
    pub data: Value,
    /// Pretty rendering of the command-specific records.
    pub records: String,
    pub hints: Vec<Hint>,
}

impl Report {
    pub fn new(command: &'static str, title: impl Into<String>) -> Self {
        Self {
            command,
            title: title.into(),
            session_id: None,
            hypothesis_filter: None,
            partial: false,
            warnings: Vec::new(),
            statistics: Vec::new(),
            data: json!({}),
            records: String::new(),
            hints: Vec::new(),
        }
    }

    pub fn warn(&mut self, code: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            code: code.into(),
            message: message.into(),
        });
    }

    pub fn stat(&mut self, key: &'static str, label: &'static str, v: impl Into<Value>) {
        self.statistics.push((key, label, v.into()));
    }

    pub fn to_json(&self) -> Value {
        let stats: Map<String, Value> = self
            .statistics
            .iter()
            .map(|(k, _, v)| ((*k).to_owned(), v.clone()))
            .collect();
        json!({
            "schemaVersion": crate::SCHEMA_VERSION,
            "ok": true,
            "partial": self.partial,
            "command": self.command,
            "scope": { "sessionId": self.session_id, "hypothesisFilter": self.hypothesis_filter },
            "warnings": self.warnings,
            "statistics": stats,
            "data": self.data,
            "hints": self.hints,
        })
    }

    pub fn to_pretty(&self) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            out.push_str(&format!("WARNING  {}\n", w.message));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        out.push_str(&self.title);
        out.push('\n');
        if let Some(s) = &self.session_id {
            out.push_str(&format!("Session {s}\n"));
        }
        if let Some(h) = &self.hypothesis_filter {
            out.push_str(&format!("Hypotheses {}\n", h.join(", ")));
        }
        let shown: Vec<_> = self
            .statistics
            .iter()
            .filter(|(_, label, _)| !label.is_empty())
            .collect();
        if !shown.is_empty() {
            out.push('\n');
            let width = shown.iter().map(|(_, l, _)| l.len()).max().unwrap_or(0);
            for (_, label, v) in shown {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push_str(&format!("{label:<width$}  {text}\n"));
            }
        }
        if !self.records.is_empty() {
            out.push('\n');
            out.push_str(self.records.trim_end());
            out.push('\n');
        }
        if !self.hints.is_empty() {
            out.push_str("\nNext\n");
            for h in &self.hints {
                match &h.command {
                    Some(c) if h.explain => out.push_str(&format!("  # {}\n  {c}\n", h.message)),
                    Some(c) => out.push_str(&format!("  {c}\n")),
                    None => out.push_str(&format!("  {}\n", h.message)),
                }
            }
        }
        out
    }
}

/// The JSON error envelope (printed on stderr). `error.reason` is present only when the
/// error has a finer reason than its code.
pub fn error_json(e: &DmError) -> Value {
    let mut error = json!({ "code": e.code.as_str(), "message": e.message, "hint": e.hint });
    if let (Some(r), Some(obj)) = (&e.reason, error.as_object_mut()) {
        obj.insert("reason".into(), Value::from(r.as_str()));
    }
    json!({
        "schemaVersion": crate::SCHEMA_VERSION,
        "ok": false,
        "error": error,
    })
}

/// The pretty error (for stderr).
pub fn error_pretty(e: &DmError) -> String {
    let code = match &e.reason {
        Some(r) => format!("{}/{r}", e.code.as_str()),
        None => e.code.as_str().to_owned(),
    };
    format!("error[{code}]: {}\nhint: {}\n", e.message, e.hint)
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers);
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// Renders query results: homogeneous flat objects as a compact table, scalars as an
/// indexed value table, anything else as pretty JSON.
pub fn render_values(values: &[Value], first_index: usize) -> String {
    if values.is_empty() {
        return "(no results)\n".into();
    }
    if values.iter().all(is_scalar) {
        let rows: Vec<Vec<String>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| vec![(first_index + i).to_string(), cell(v)])
            .collect();
        return table(&["#".into(), "VALUE".into()], &rows);
    }
    if let Some(Value::Object(first)) = values.first() {
        let keys: Vec<&String> = first.keys().collect();
        let homogeneous = !keys.is_empty()
            && values.iter().all(|v| match v {
                Value::Object(o) => {
                    o.len() == keys.len() && keys.iter().all(|k| o.get(*k).is_some_and(is_scalar))
                }
                _ => false,
            });
        if homogeneous {
            let headers: Vec<String> = keys.iter().map(|k| (*k).clone()).collect();
            let rows: Vec<Vec<String>> = values
                .iter()
                .map(|v| keys.iter().map(|k| cell(&v[k.as_str()])).collect())
                .collect();
            return table(&headers, &rows);
        }
    }
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        out.push_str(&format!("[{}]\n", first_index + i));
        out.push_str(&serde_json::to_string_pretty(v).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// A generic aligned table for command records.
pub fn simple_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let h: Vec<String> = headers.iter().map(|s| (*s).to_owned()).collect();
    table(&h, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_tables_by_shape() {
        let flat = vec![json!({"a": 1, "b": "x"}), json!({"a": 22, "b": null})];
        assert_eq!(render_values(&flat, 1), "a   b\n1   x\n22  null\n");
        assert_eq!(
            render_values(&[json!(1), json!("s")], 1),
            "#  VALUE\n1  1\n2  s\n"
        );
        assert!(render_values(&[json!({"a": [1]})], 1).starts_with("[1]\n{"));
    }
}
