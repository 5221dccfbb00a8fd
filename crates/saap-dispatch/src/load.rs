//! Reading spec files: JSON or YAML text into a [`WorkflowSpec`], with errors that carry a
//! location (line:column for syntax, a JSON path for meaning) and bounds on every size.
//!
//! Takes text, never a path: reading files is the caller's job (the core does no I/O).

use crate::spec::{SPEC_FORMAT_VERSION, WorkflowSpec};

/// Largest spec text accepted (bytes).
pub const MAX_SPEC_BYTES: usize = 8 * 1024 * 1024;

/// The syntax a spec is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecSyntax {
    Json,
    Yaml,
}

impl SpecSyntax {
    /// Guesses the syntax from a file name (`.json` → JSON, `.yaml`/`.yml` → YAML), else
    /// from the first non-blank character of the text.
    pub fn detect(file_name: Option<&str>, text: &str) -> SpecSyntax {
        if let Some(name) = file_name {
            let lower = name.to_ascii_lowercase();
            if lower.ends_with(".json") {
                return SpecSyntax::Json;
            }
            if lower.ends_with(".yaml") || lower.ends_with(".yml") {
                return SpecSyntax::Yaml;
            }
        }
        match text.trim_start().chars().next() {
            Some('{') => SpecSyntax::Json,
            _ => SpecSyntax::Yaml,
        }
    }
}

/// Everything that can be wrong with a spec. Each variant says where and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "spec is {bytes} bytes; the limit is {max} bytes. Split the workflow or remove unused parts"
    )]
    TooLarge { bytes: usize, max: usize },
    #[error("{line}:{column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl SpecError {
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A stable code for the error family.
    pub fn code(&self) -> &'static str {
        match self {
            SpecError::TooLarge { .. } => "SAAP-S001",
            SpecError::Syntax { .. } => "SAAP-S002",
            SpecError::Invalid { .. } => "SAAP-S003",
        }
    }
}

/// Parses spec text. Structural problems (wrong field, wrong type, unknown key) are reported
/// with their line and column; meaning (unknown event types, …) is checked by
/// [`crate::compiled::CompiledSpec::compile`].
pub fn parse_spec(text: &str, syntax: SpecSyntax) -> Result<WorkflowSpec, SpecError> {
    if text.len() > MAX_SPEC_BYTES {
        return Err(SpecError::TooLarge {
            bytes: text.len(),
            max: MAX_SPEC_BYTES,
        });
    }
    let spec: WorkflowSpec = match syntax {
        SpecSyntax::Json => serde_json::from_str(text).map_err(|e| SpecError::Syntax {
            line: e.line(),
            column: e.column(),
            message: clean_serde_message(&e.to_string()),
        })?,
        SpecSyntax::Yaml => serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            SpecError::Syntax {
                line,
                column,
                message: clean_serde_message(&e.to_string()),
            }
        })?,
    };
    if spec.format != SPEC_FORMAT_VERSION {
        return Err(SpecError::invalid(
            "saap_spec",
            format!(
                "format version {} is not supported; this saap reads version {SPEC_FORMAT_VERSION}",
                spec.format
            ),
        ));
    }
    Ok(spec)
}

/// serde's words for what it expected, in the spec's words (the spec's own types say what
/// they expect in plain words; these are serde's generic phrases).
const PLAIN_WORDS: &[(&str, &str)] = &[
    ("field identifier", "a field name"),
    ("variant identifier", "a key"),
    ("unknown variant", "unknown value"),
    ("unit variant", "a name alone"),
    ("newtype variant", "a one-key map"),
    ("struct variant", "a map"),
    ("tuple variant", "a list"),
];

/// serde puts " at line L column C" in its messages; we print the location first instead,
/// so the first such phrase is removed (later ones, e.g. YAML's "while parsing a mapping at
/// line 3 column 1", say something else and stay). serde's generic phrases that name Rust
/// notions ("variant identifier") are said in plain words.
fn clean_serde_message(msg: &str) -> String {
    let mut out = strip_location(msg);
    for (from, to) in PLAIN_WORDS {
        if out.contains(from) {
            out = out.replace(from, to);
        }
    }
    out
}

fn strip_location(msg: &str) -> String {
    let Some(start) = msg.find(" at line ") else {
        return msg.to_string();
    };
    let rest = &msg[start + " at line ".len()..];
    let mut end = start + " at line ".len();
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(rest);
    end += n;
    if n > 0 && msg[end..].starts_with(" column ") {
        end += " column ".len();
        end += digits(&msg[end..]);
    }
    format!("{}{}", &msg[..start], &msg[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_syntax_error_has_line_and_column() {
        let err = parse_spec("{\n  \"name\": \"a\",\n  \"steps\": [ }", SpecSyntax::Json)
            .expect_err("broken");
        match err {
            SpecError::Syntax { line, .. } => assert_eq!(line, 3),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unknown_field_is_named() {
        let err = parse_spec("name: a\nsteps: []\nstepz: []\n", SpecSyntax::Yaml).expect_err("bad");
        assert!(err.to_string().contains("stepz"), "{err}");
    }

    #[test]
    fn only_the_first_location_phrase_is_removed() {
        assert_eq!(
            clean_serde_message(
                "did not find expected key at line 5 column 1, while parsing a block mapping at line 3 column 1"
            ),
            "did not find expected key, while parsing a block mapping at line 3 column 1"
        );
        assert_eq!(
            clean_serde_message("expected `,` at line 2 column 7"),
            "expected `,`"
        );
        assert_eq!(clean_serde_message("no location"), "no location");
    }

    #[test]
    fn oversized_spec_is_refused_before_parsing() {
        let big = " ".repeat(MAX_SPEC_BYTES + 1);
        assert!(matches!(
            parse_spec(&big, SpecSyntax::Json),
            Err(SpecError::TooLarge { .. })
        ));
    }

    #[test]
    fn syntax_is_detected_from_name_then_content() {
        assert_eq!(SpecSyntax::detect(Some("a.yml"), "{"), SpecSyntax::Yaml);
        assert_eq!(SpecSyntax::detect(None, "  {\"a\":1}"), SpecSyntax::Json);
        assert_eq!(SpecSyntax::detect(None, "name: x"), SpecSyntax::Yaml);
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;
    use crate::spec::{Condition, ExecutionBehaviour};

    #[test]
    fn conditions_and_behaviours_read_as_one_key_maps_in_json_and_yaml() {
        let json = r#"{"name":"a","steps":[{"name":"s","params":[{"name":"b","kind":"optional","types":["A"]}],
            "precondition":{"name":"p","when":{"all":[{"present":"b"},{"not":{"always":false}}]}}}],
            "simulation":{"arrivals":[],"behaviour":{"s":{"executions":{"2":{"fail":"boom"}}}}}}"#;
        let yaml = "name: a\nsteps:\n  - name: s\n    params: [{name: b, kind: optional, types: [A]}]\n    precondition:\n      name: p\n      when: {all: [{present: b}, {not: {always: false}}]}\nsimulation:\n  arrivals: []\n  behaviour:\n    s:\n      executions:\n        2: {fail: boom}\n";
        let a = parse_spec(json, SpecSyntax::Json).expect("json");
        let b = parse_spec(yaml, SpecSyntax::Yaml).expect("yaml");
        assert_eq!(a, b);
        let when = a.steps[0]
            .precondition
            .as_ref()
            .and_then(|p| p.when.clone());
        assert_eq!(
            when,
            Some(Condition::All(vec![
                Condition::Present("b".into()),
                Condition::Not(Box::new(Condition::Always(false)))
            ]))
        );
        let sim = a.simulation.expect("simulation");
        assert_eq!(
            sim.behaviour["s"].executions[&2],
            ExecutionBehaviour::Fail("boom".into())
        );
        // And it writes back in the same shape.
        let text = serde_json::to_string(&b).expect("serialize");
        assert_eq!(parse_spec(&text, SpecSyntax::Json).expect("round trip"), b);
    }
}

#[cfg(test)]
mod plain_word_tests {
    use super::*;

    /// Words a user of the spec format never wrote: Rust types and serde's notions.
    const RUST_WORDS: &[&str] = &[
        "struct",
        "enum ",
        "u32",
        "u64",
        "i64",
        "usize",
        "f64",
        "Spec",
        "Decl",
        "Vec<",
        "BTreeMap",
        "String",
        "Option",
        "identifier",
        "variant",
        "tuple",
    ];

    fn rust_words(msg: &str) -> Vec<&'static str> {
        RUST_WORDS
            .iter()
            .copied()
            .filter(|w| msg.contains(w))
            .collect()
    }

    /// Every value of the complete example replaced in turn by values of every other JSON
    /// shape: whatever is refused is refused in plain words.
    #[test]
    fn no_error_names_a_rust_type() {
        let doc = include_str!("../../../docs/spec-format.md");
        let at = doc.find("```json").expect("a JSON example") + "```json".len();
        let end = at + doc[at..].find("```").expect("closed");
        let full: serde_json::Value = serde_json::from_str(&doc[at..end]).expect("example");
        let mut paths = Vec::new();
        collect_paths(&full, String::new(), &mut paths);
        let replacements = [
            serde_json::json!("x"),
            serde_json::json!(7),
            serde_json::json!(-1),
            serde_json::json!(1.5),
            serde_json::json!(true),
            serde_json::Value::Null,
            serde_json::json!([]),
            serde_json::json!([1]),
            serde_json::json!({}),
            serde_json::json!({"zz": 1}),
            serde_json::json!({"7": 1}),
        ];
        let mut refused = 0;
        let mut bad = Vec::new();
        for path in &paths {
            for r in &replacements {
                let mut v = full.clone();
                *v.pointer_mut(path).expect("path") = r.clone();
                let text = serde_json::to_string(&v).expect("json");
                if let Err(e) = parse_spec(&text, SpecSyntax::Json) {
                    refused += 1;
                    let msg = e.to_string();
                    if !rust_words(&msg).is_empty() {
                        bad.push(format!("{path} = {r}: {msg}"));
                    }
                }
            }
        }
        assert!(refused > 100, "only {refused} refusals: the mutations miss");
        assert_eq!(bad, Vec::<String>::new());
    }

    fn collect_paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.push(p.clone());
                    collect_paths(x, p, out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    let p = format!("{at}/{i}");
                    out.push(p.clone());
                    collect_paths(x, p, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn yaml_errors_are_in_plain_words_too() {
        for text in [
            "name: a\nsteps: [{name: s}]\nsimulation: {arrivals: [[Go]]}\n",
            "name: a\nsteps: [{name: s}]\nsimulation: {arrivals: [{event: Go, lable: x}]}\n",
            "name: a\nsteps: [{name: s, params: [{name: p, kind: requird, types: [A]}]}]\n",
            "name: a\nsteps: [{name: s, params: [{name: p, kind: [x], types: [A]}]}]\n",
            "name: a\nsteps: [{name: s, max_executions_per_run: many}]\n",
            "name: a\nsteps: [{name: s, precondition: {name: p, when: present}}]\n",
            "name: a\nsteps: [{name: s, precondition: {name: p, when: {presnt: b}}}]\n",
            "name: a\nsteps: [{name: s}]\nsimulation: {behaviour: {s: {executions: {x: {emit: []}}}}}\n",
            "name: a\nsteps: [{name: s}]\nsimulation: {behaviour: {s: {executions: {1: {emt: []}}}}}\n",
            "name: a\nsteps: [{name: s, outputs: [[A]]}]\n",
            "name: a\nsteps: [{name: s, outputs: [{event: A, max: lots}]}]\n",
            "saap_spec: one\nname: a\nsteps: []\n",
            "name: a\nsteps: 3\n",
            "- a\n",
        ] {
            let err = parse_spec(text, SpecSyntax::Yaml).expect_err(text);
            let msg = err.to_string();
            assert_eq!(rust_words(&msg), Vec::<&str>::new(), "{text}: {msg}");
        }
    }

    #[test]
    fn the_message_that_named_a_rust_type_is_in_plain_words() {
        let err = parse_spec(
            "name: a\nsteps: []\nsimulation: {arrivals: [7]}\n",
            SpecSyntax::Yaml,
        )
        .expect_err("a number is not an arrival");
        assert!(
            err.to_string().contains(
                "expected an arrival: an event type name, or a map `{event: Name, label: name}`"
            ),
            "{err}"
        );
    }

    #[test]
    fn an_arrival_may_be_written_as_its_type_name() {
        let short = parse_spec(
            "name: a\nsteps: []\nsimulation: {arrivals: [Go, {event: Go, label: again}]}\n",
            SpecSyntax::Yaml,
        )
        .expect("the short form");
        let sim = short.simulation.expect("simulation");
        assert_eq!(sim.arrivals[0].event, "Go");
        assert_eq!(sim.arrivals[0].label, None);
        assert_eq!(sim.arrivals[1].label.as_deref(), Some("again"));
        let json = parse_spec(
            r#"{"name":"a","steps":[],"simulation":{"arrivals":["Go"]}}"#,
            SpecSyntax::Json,
        )
        .expect("JSON too");
        assert_eq!(json.simulation.expect("simulation").arrivals[0].event, "Go");
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn event_kind_is_a_shorthand_for_one_builtin_parent() {
        let spec = parse_spec(
            "name: a\nevents:\n  - {name: Done, kind: stop}\n  - {name: Note, kind: display}\nsteps: []\n",
            SpecSyntax::Yaml,
        )
        .expect("parses");
        assert_eq!(spec.events[0].parents, ["StopEvent"]);
        assert_eq!(spec.events[1].parents, ["DisplayEvent"]);
    }

    #[test]
    fn event_kind_and_parents_together_are_refused() {
        let err = parse_spec(
            r#"{"name":"a","events":[{"name":"X","kind":"stop","parents":["StopEvent"]}],"steps":[]}"#,
            SpecSyntax::Json,
        )
        .expect_err("both");
        assert!(
            err.to_string().contains("has both `kind` and `parents`"),
            "{err}"
        );
    }
}
