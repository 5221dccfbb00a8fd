//! The runtime's layout rules (issue 18), checked on the source so that they hold as the
//! code grows: the files of a module tree import one way (no circle among siblings), and no
//! source file grows past ~1,500 lines of code (its unit tests apart). Reads files only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Source files allowed past the size limit for now, each with why (issue 18 lists them).
const TOO_LONG_FOR_NOW: &[&str] = &[
    // saap-dispatch's run state machine and explorer: to be split.
    "saap-dispatch/src/run.rs",
    "saap-dispatch/src/explore.rs",
    // debug-mode's session store: grown by the drop-in work of issue 24, to split.
    "debug-mode/src/store.rs",
];

const MAX_LINES: usize = 1_500;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comment lines and without its `#[cfg(test)] mod tests`.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source file");
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which sibling modules each file of a module directory names through `super::NAME::`.
fn sibling_imports(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let names: BTreeSet<String> = files
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(String::from))
        .filter(|n| n != "mod" && n != "tests")
        .collect();
    let mut graph = BTreeMap::new();
    for path in &files {
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !names.contains(name) || path.parent() != Some(dir) {
            continue;
        }
        let code = code_of(path);
        let uses: BTreeSet<String> = code
            .match_indices("super::")
            .filter_map(|(i, _)| {
                let rest = &code[i + "super::".len()..];
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (rest[word.len()..].starts_with("::") && names.contains(&word) && word != name)
                    .then_some(word)
            })
            .collect();
        graph.insert(name.to_string(), uses);
    }
    graph
}

/// A circle in `graph`, if there is one, as the files around it.
fn a_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut circle = path[i..].to_vec();
            circle.push(n.to_string());
            return Some(circle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_files_of_the_engine_and_the_agent_cli_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for tree in ["engine", "cli"] {
        let graph = sibling_imports(&src.join(tree));
        assert!(
            graph.len() > 5,
            "{tree}: expected a module tree, found {graph:?}"
        );
        if let Some(circle) = a_circle(&graph) {
            panic!(
                "src/{tree}: files import each other in a circle: {}; move what both need into a file below them",
                circle.join(" -> ")
            );
        }
    }
}

#[test]
fn a_circle_is_found_where_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        a_circle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn no_source_file_of_the_workspace_is_past_the_size_limit() {
    let crates = crates_dir();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).expect("crates/") {
        let src = krate.expect("entry").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "expected the workspace's sources");
    let mut too_long = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&crates).unwrap_or(&path);
        let rel = rel.to_string_lossy().replace('\\', "/");
        // Test modules and templates are not the code the limit is about.
        if rel.ends_with("/tests.rs") || rel.contains("/templates/") {
            continue;
        }
        // The code, not its unit tests.
        let text = std::fs::read_to_string(&path).expect("readable");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let lines = code.lines().count();
        if lines > MAX_LINES && !TOO_LONG_FOR_NOW.contains(&rel.as_str()) {
            too_long.push(format!("{rel} ({lines} lines)"));
        }
    }
    assert!(
        too_long.is_empty(),
        "source files past {MAX_LINES} lines: {}; split them by concept (docs/architecture.md)",
        too_long.join(", ")
    );
}
