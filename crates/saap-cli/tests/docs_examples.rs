//! Every `saap …` example in README.md and docs/*.md runs (TESTING.md §8): each command line
//! in a shell code block is executed from the workspace root and must exit 0 or 1 (1 is
//! "problems found", which is what a broken example spec is for) with output on stdout.
//! Lines with placeholders (`SPEC`, `[--flag]`) are synopses, not examples, and are skipped.
//! A `saap mcp …` example is a server: it gets an MCP handshake and a `tools/list` on stdin,
//! then end of input, and must answer with its tools.
#![allow(clippy::unwrap_used)]

mod common;

use common::{saap, workspace_root};
use std::path::PathBuf;

/// The `saap` command lines of the shell code blocks of a markdown file.
fn examples(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_shell = false;
    for line in markdown.lines() {
        let t = line.trim();
        if let Some(lang) = t.strip_prefix("```") {
            in_shell = !in_shell && matches!(lang, "sh" | "bash" | "console" | "shell");
            continue;
        }
        if !in_shell {
            continue;
        }
        let t = t.strip_prefix("$ ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("saap ") else {
            continue;
        };
        let rest = rest.split("  #").next().unwrap_or("");
        let rest = rest.split(" | ").next().unwrap_or("").trim();
        if rest.contains('[') || rest.split_whitespace().any(|w| w == "SPEC" || w == "N") {
            continue;
        }
        out.push(rest.to_string());
    }
    out
}

/// An MCP client's first words: initialize, initialized, tools/list (one JSON-RPC message a
/// line, as the stdio transport frames them).
const MCP_HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"docs-test","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    "\n",
);

#[test]
fn every_saap_example_in_the_docs_runs() {
    let root = workspace_root();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut ran = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for example in examples(&text) {
            if example.starts_with("demo") {
                continue; // the demo has its own test
            }
            let mut cmd = saap();
            cmd.args(example.split_whitespace());
            if example.starts_with("mcp") {
                cmd.write_stdin(MCP_HANDSHAKE)
                    .timeout(std::time::Duration::from_secs(60));
            }
            let out = cmd.output().unwrap();
            if example.starts_with("mcp") {
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    stdout.contains("\"stream_view\"") && stdout.contains("\"check\""),
                    "{}: `saap {example}` did not list its tools: {stdout}\n{}",
                    file.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let code = out.status.code().unwrap_or(-1);
            assert!(
                code == 0 || code == 1,
                "{}: `saap {example}` exited {code}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                !out.stdout.is_empty(),
                "{}: `saap {example}` printed nothing",
                file.display()
            );
            ran += 1;
        }
    }
    assert!(
        ran >= 5,
        "expected the README's examples at least, ran {ran}"
    );
}
