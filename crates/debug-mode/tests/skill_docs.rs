//! The skill files and the README run as written: every `debug-mode` command they show is
//! executed against a temporary state directory (`AGENT_DEBUG_MODE_HOME_OVERRIDE`), must
//! exit 0, and every output the docs print must still be what the command prints.
//!
//! What counts as a command, per file, in document order:
//! - `sh` code blocks: each line starting with `debug-mode`;
//! - `text` code blocks: each `$ ` line; the lines after it, up to the next `$ ` line, are
//!   its documented output (`...` skips any number of lines; the output may go on after
//!   the documented part). A `$ ` line that is not `debug-mode` is the reproduction step of
//!   an example: the test performs it by appending the events the example's probes
//!   recorded to the session's Append Path, as the Python helper would;
//! - inline code spans outside code blocks that start with `debug-mode `.
//!
//! Synopses (`[--limit N]`, `http\|file`, `L`, `ID`, `<id>`, `'<jq>'`) are run with their
//! optional parts dropped and placeholders filled in; every flag they mention must exist in
//! the subcommand's `--help`. Session ids (example UUIDs or placeholders) stand for the
//! session of the walk: the one the last `create` made, or a new one holding the example
//! events when there is none (before the first `create`, after `clean`).
//!
//! Output comparison is by shape: UUIDs, ports, digits and the state directory are
//! normalized and runs of spaces collapsed; labels, headings, column names, order, keys and
//! literal values must match.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::PathBuf;

use common::Env;
use serde_json::Value;

fn repo_file(rel: &str) -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    (rel.to_owned(), text)
}

/// The four events of EXAMPLES.md's first investigation, as its probes record them.
const EXAMPLE_EVENTS: &str = concat!(
    r#"{"hypothesisId":"H1","location":"cart/cache.py:41","message":"cache lookup","data":{"key":"cart:42","hit":false,"version":7},"timestamp":1784313728010}"#,
    "\n",
    r#"{"hypothesisId":"H1","location":"cart/cache.py:41","message":"cache lookup","data":{"key":"cart:42","hit":true,"version":7},"timestamp":1784313728020}"#,
    "\n",
    r#"{"hypothesisId":"H1","location":"cart/cache.py:41","message":"cache lookup","data":{"key":"cart:42","hit":true,"version":8},"timestamp":1784313728030}"#,
    "\n",
    r#"{"hypothesisId":"H2","location":"cart/service.py:88","message":"cart total computed","data":{"items":2,"total":39.98},"timestamp":1784313728045}"#,
    "\n",
);

#[derive(Debug)]
enum Step {
    /// A `debug-mode ...` command and the output the docs show for it (possibly none).
    Run {
        cmd: String,
        expect: Vec<String>,
        origin: String,
    },
    /// A reproduction step (`$ pytest ...`).
    Reproduce,
    /// A code block in another language (a probe call): its helper must be the template's.
    Probe { lang: String, code: String },
    /// A `text` block without commands: an excerpt of `logs` output.
    Excerpt(Vec<String>),
    /// The `--json` envelope shape.
    Envelope(String),
}

fn steps(file: &str, text: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    let span = regex::Regex::new(r"`(debug-mode [^`]+)`").unwrap();
    while let Some((n, line)) = lines.next() {
        let origin = format!("{file}:{}", n + 1);
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            let lang = lang.trim().to_owned();
            let mut body = Vec::new();
            for (_, l) in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                body.push(l.to_owned());
            }
            match lang.as_str() {
                "sh" => out.extend(
                    body.iter()
                        .filter(|l| l.starts_with("debug-mode"))
                        .map(|l| Step::Run {
                            cmd: l.clone(),
                            expect: Vec::new(),
                            origin: origin.clone(),
                        }),
                ),
                "text" if body.iter().any(|l| l.starts_with("$ ")) => {
                    for l in body {
                        if let Some(cmd) = l.strip_prefix("$ ") {
                            if cmd.starts_with("debug-mode") {
                                out.push(Step::Run {
                                    cmd: cmd.to_owned(),
                                    expect: Vec::new(),
                                    origin: origin.clone(),
                                });
                            } else {
                                out.push(Step::Reproduce);
                            }
                        } else if let Some(Step::Run { expect, .. }) = out.last_mut() {
                            expect.push(l);
                        } else {
                            panic!("{origin}: output without a command before it");
                        }
                    }
                }
                "text" => out.push(Step::Excerpt(body)),
                "json" => out.push(Step::Envelope(body.join("\n"))),
                _ => out.push(Step::Probe {
                    lang,
                    code: body.join("\n"),
                }),
            }
            continue;
        }
        for c in span.captures_iter(line) {
            out.push(Step::Run {
                cmd: c[1].replace("\\|", "|"),
                expect: Vec::new(),
                origin: origin.clone(),
            });
        }
    }
    out
}

/// Splits a command line on spaces, honoring single and double quotes.
fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut in_word = false;
    for c in s.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ') => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (_, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Drops `[...]` groups (and a following `...`), returning the rest and the dropped flags.
fn strip_optional(cmd: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut flags = Vec::new();
    let mut depth = 0;
    let mut group = String::new();
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        if depth == 0 {
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                _ => {}
            }
            if quote.is_some() || c == '\'' || c == '"' {
                kept.push(c);
                continue;
            }
        }
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    flags.extend(
                        group
                            .split_whitespace()
                            .filter(|w| w.starts_with("--"))
                            .map(str::to_owned),
                    );
                    group.clear();
                }
            }
            c if depth > 0 => group.push(c),
            c => kept.push(c),
        }
    }
    // `...` after a group means "repeatable"; inside quotes it is part of a program.
    let kept = kept.replace(" ...", "");
    (kept.split_whitespace().collect::<Vec<_>>().join(" "), flags)
}

struct Walk<'a> {
    env: &'a Env,
    session: Option<(String, PathBuf)>,
    uuid: regex::Regex,
}

impl Walk<'_> {
    fn new_session(&mut self, with_events: bool) -> (String, PathBuf) {
        let (id, _, append) = self.env.create();
        if with_events {
            append_events(&append, EXAMPLE_EVENTS);
        }
        self.session = Some((id.clone(), append.clone()));
        (id, append)
    }

    fn session(&mut self) -> (String, PathBuf) {
        match &self.session {
            Some(s) => s.clone(),
            None => self.new_session(true),
        }
    }

    /// Fills the placeholders of one command; returns the argument list.
    fn args(&mut self, cmd: &str, origin: &str) -> Vec<String> {
        let (required, optional_flags) = strip_optional(cmd);
        let mut words = split_words(&required);
        assert_eq!(words.first().map(String::as_str), Some("debug-mode"));
        words.remove(0);
        let sub = words.first().cloned().unwrap_or_default();
        // Every flag a synopsis mentions exists.
        if !optional_flags.is_empty() || words.iter().any(|w| w.starts_with("--")) {
            let help = if sub.starts_with("--") {
                self.env.ok(&["--help"])
            } else {
                self.env.ok(&[sub.as_str(), "--help"])
            };
            for f in optional_flags
                .iter()
                .chain(words.iter().filter(|w| w.starts_with("--")))
            {
                assert!(
                    help.contains(f.as_str()),
                    "{origin}: `{cmd}` mentions {f}, which `debug-mode {sub} --help` does not know"
                );
            }
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            let prev = if i > 0 { words[i - 1].as_str() } else { "" };
            let filled = match (prev, w.as_str()) {
                ("--session", _) => self.session().0,
                ("--language", "L" | "<language>") => "python".to_owned(),
                ("--ingest", "http|file" | "<http|file>") => "file".to_owned(),
                (_, "<program>" | "<jq>") => ".".to_owned(),
                (_, w) => {
                    assert!(
                        !w.starts_with('<') && !self.uuid.is_match(w),
                        "{origin}: unfilled placeholder {w} in `{cmd}`"
                    );
                    w.to_owned()
                }
            };
            out.push(filled);
            i += 1;
        }
        out
    }

    fn run(&mut self, cmd: &str, expect: &[String], origin: &str) {
        let args = self.args(cmd, origin);
        let o = self
            .env
            .cmd()
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("{origin}: cannot run {args:?}: {e}"));
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{origin}: `{cmd}` ran as {args:?} and failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !stdout.trim().is_empty(),
            "{origin}: `{cmd}` printed nothing"
        );
        match args.first().map(String::as_str) {
            Some("create") => {
                let id = self.uuid.find(&stdout).unwrap().as_str().to_owned();
                let append = self
                    .env
                    .root()
                    .join("sessions")
                    .join(&id)
                    .join("incoming.ndjson");
                self.session = Some((id, append));
            }
            Some("clean") => self.session = None,
            _ => {}
        }
        if !expect.is_empty() {
            assert_shape(self, expect, &stdout, &format!("{origin}: `{cmd}`"));
        }
    }

    fn normalize(&self, line: &str) -> String {
        let line = line.replace(
            &self.env.root().display().to_string(),
            "~/.agent-debug-mode",
        );
        let line = self.uuid.replace_all(&line, "<ID>");
        let line = regex::Regex::new(r"\d+").unwrap().replace_all(&line, "N");
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

fn append_events(path: &std::path::Path, events: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(events.as_bytes()).unwrap();
}

/// The documented lines are the start of the actual output, line for line after
/// normalization; `...` skips any number of actual lines.
fn assert_shape(walk: &Walk<'_>, doc: &[String], actual: &str, what: &str) {
    let got: Vec<String> = actual.lines().map(|l| walk.normalize(l)).collect();
    let mut at = 0;
    let mut skipping = false;
    for d in doc {
        if d.trim() == "..." {
            skipping = true;
            continue;
        }
        let want = walk.normalize(d);
        if skipping {
            match got[at..].iter().position(|g| *g == want) {
                Some(p) => at += p,
                None => panic!(
                    "{what}: documented line {d:?} not found after `...`\nactual output:\n{actual}"
                ),
            }
            skipping = false;
        }
        assert_eq!(
            got.get(at).map(String::as_str),
            Some(want.as_str()),
            "{what}: documented line {d:?} differs from line {} of the actual output:\n{actual}",
            at + 1
        );
        at += 1;
    }
}

/// Walks one file; returns (commands run, outputs compared).
fn walk_file(env: &Env, file: &str, text: &str) -> (usize, usize) {
    let mut walk = Walk {
        env,
        session: None,
        uuid: regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
            .unwrap(),
    };
    let (mut ran, mut compared) = (0, 0);
    for step in steps(file, text) {
        match step {
            Step::Run {
                cmd,
                expect,
                origin,
            } => {
                walk.run(&cmd, &expect, &origin);
                ran += 1;
                compared += usize::from(!expect.is_empty());
            }
            Step::Reproduce => {
                let (_, append) = walk.session();
                append_events(&append, EXAMPLE_EVENTS);
            }
            Step::Probe { lang, code } => {
                let (language, helper) = match lang.as_str() {
                    "python" => ("python", "agent_debug_log("),
                    "ts" => ("typescript", "agentDebugLog("),
                    other => panic!("{file}: no check for a `{other}` block"),
                };
                assert!(
                    code.contains(helper),
                    "{file}: {lang} probe without {helper}"
                );
                assert!(
                    code.contains("region agent log") && code.contains("endregion"),
                    "{file}: {lang} probe outside region markers"
                );
                let ingest = if language == "python" { "file" } else { "http" };
                let template = env.ok(&["template", "--language", language, "--ingest", ingest]);
                assert!(
                    template.contains(helper),
                    "{file}: the {language} template does not define {helper}"
                );
            }
            Step::Excerpt(lines) => {
                // A `logs` warning on a session with two malformed records.
                let (id, append) = walk.new_session(true);
                append_events(&append, "{\"x\":1}\nnot json\n");
                let out = env.ok(&["logs", "--session", &id]);
                let got: Vec<String> = out.lines().map(|l| walk.normalize(l)).collect();
                for l in lines.iter().filter(|l| !l.trim().is_empty()) {
                    let l = l.replace("<id>", &id);
                    assert!(
                        got.contains(&walk.normalize(&l)),
                        "{file}: excerpt line {l:?} is not in `logs` output:\n{out}"
                    );
                }
            }
            Step::Envelope(doc) => {
                let doc: Value = serde_json::from_str(&doc)
                    .unwrap_or_else(|e| panic!("{file}: the envelope is not JSON: {e}"));
                let (id, _) = walk.session();
                let got = env.json(&["logs", "--session", &id]);
                let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
                assert_eq!(keys(&doc), keys(&got), "{file}: envelope fields");
                assert_eq!(
                    keys(&doc["scope"]),
                    keys(&got["scope"]),
                    "{file}: scope fields"
                );
                assert_eq!(doc["schemaVersion"], got["schemaVersion"]);
            }
        }
    }
    (ran, compared)
}

#[test]
fn skill_file_commands_run_and_print_what_the_docs_show() {
    let env = Env::new();
    let (mut ran, mut compared) = (0, 0);
    for rel in [
        "skills/agentic-debug-mode/SKILL.md",
        "skills/agentic-debug-mode/REFERENCE.md",
        "skills/agentic-debug-mode/EXAMPLES.md",
        "crates/debug-mode/README.md",
    ] {
        let (file, text) = repo_file(rel);
        let (n, c) = walk_file(&env, &file, &text);
        assert!(n > 0, "{file}: no command found");
        ran += n;
        compared += c;
    }
    assert!(ran >= 30, "only {ran} commands found in the docs");
    assert!(compared >= 4, "only {compared} documented outputs compared");
    eprintln!("ran {ran} documented commands; compared {compared} documented outputs");
}

#[test]
fn skill_and_examples_use_pretty_output_only() {
    for rel in [
        "skills/agentic-debug-mode/SKILL.md",
        "skills/agentic-debug-mode/EXAMPLES.md",
    ] {
        let (file, text) = repo_file(rel);
        assert!(
            !text.contains("--json"),
            "{file} mentions --json (reference only)"
        );
    }
}

#[test]
fn reference_lists_every_error_code_and_exit_code() {
    let (_, text) = repo_file("skills/agentic-debug-mode/REFERENCE.md");
    for (code, exit) in debug_mode::error::ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str(), c.exit_code()))
    {
        assert!(
            text.contains(&format!("`{code}`")),
            "REFERENCE.md lacks {code}"
        );
        assert!(
            text.contains(&format!("| {exit} |")),
            "REFERENCE.md has no row for exit code {exit}"
        );
    }
}
