//! The runtime's layout rules (issue 18), checked on the source so that they hold as the
//! code grows: the files of every crate import one way (no circle among them, through
//! re-exports, test code apart), and no source file grows past ~1,500 lines of code (its
//! unit tests apart). Reads and parses files only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Source files allowed past the size limit, each with why (none today: keep it so).
const TOO_LONG_FOR_NOW: &[&str] = &[];

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

/// A crate's module files, by module path (`engine/apply`; the root is ``).
struct ModuleTree {
    files: BTreeMap<String, PathBuf>,
}

/// Whether attributes carry `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The directory that holds the files of `path`'s child modules.
fn child_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    match path.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => dir,
        Some(stem) => dir.join(stem),
        None => dir,
    }
}

fn join(module: &[String]) -> String {
    module.join("/")
}

impl ModuleTree {
    /// The modules reachable from `root` (`lib.rs` or `main.rs`) through `mod NAME;`,
    /// leaving out test-only modules.
    fn from_root(root: &Path) -> ModuleTree {
        let mut files = BTreeMap::new();
        let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
        while let Some((module, path)) = todo.pop() {
            let text = std::fs::read_to_string(&path).expect("readable module file");
            let file = syn::parse_file(&text).expect("a module file that parses");
            for item in &file.items {
                if let syn::Item::Mod(m) = item
                    && m.content.is_none()
                    && !is_test_only(&m.attrs)
                {
                    let name = m.ident.to_string();
                    let dir = child_dir(&path);
                    let flat = dir.join(format!("{name}.rs"));
                    let nested = dir.join(&name).join("mod.rs");
                    let child = if flat.exists() { flat } else { nested };
                    let mut child_module = module.clone();
                    child_module.push(name);
                    todo.push((child_module, child));
                }
            }
            files.insert(join(&module), path);
        }
        ModuleTree { files }
    }
}

/// What one file names: the paths it uses and the names it re-exports.
#[derive(Default)]
struct Names {
    /// Each path with how many inline modules (`mod x { … }`) of the file it is written in.
    paths: Vec<(usize, Vec<String>)>,
    reexports: BTreeMap<String, Vec<String>>,
    /// Inline modules around the item being visited.
    inline: usize,
}

/// The paths of a `use` tree, each with its last name as imported.
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, n.ident.to_string()));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), String::new())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Names {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            self.inline += 1;
            syn::visit::visit_item_mod(self, m);
            self.inline -= 1;
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if is_test_only(&u.attrs) {
            return;
        }
        let mut found = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut found);
        let public = !matches!(u.vis, syn::Visibility::Inherited);
        for (path, name) in found {
            if public && self.inline == 0 && !name.is_empty() && name != "self" {
                self.reexports.insert(name, path.clone());
            }
            self.paths.push((self.inline, path));
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            self.paths.push((
                self.inline,
                p.segments.iter().map(|s| s.ident.to_string()).collect(),
            ));
        }
        syn::visit::visit_path(self, p);
    }
}

/// Which module files each module file of a crate imports from: paths through `crate::`,
/// `self::`, `super::` and child modules, followed through re-exports to the file that
/// defines the item. Test-only code is left out.
fn module_imports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    use syn::visit::Visit;
    let tree = ModuleTree::from_root(root);
    let mut names: BTreeMap<String, Names> = BTreeMap::new();
    for (module, path) in &tree.files {
        let text = std::fs::read_to_string(path).expect("readable module file");
        let file = syn::parse_file(&text).expect("a module file that parses");
        let mut n = Names::default();
        n.visit_file(&file);
        names.insert(module.clone(), n);
    }
    // The module an absolute path (segments under the crate root) names, through re-exports.
    fn target(
        abs: &[String],
        tree: &ModuleTree,
        names: &BTreeMap<String, Names>,
        depth: usize,
    ) -> Option<String> {
        for n in (0..=abs.len()).rev() {
            let module = join(&abs[..n]);
            if !tree.files.contains_key(&module) {
                continue;
            }
            if depth < 8
                && let Some(next) = abs.get(n)
                && let Some(to) = names.get(&module).and_then(|m| m.reexports.get(next))
            {
                // Re-exported from another crate: no file of this one.
                let mut rest = absolute(&abs[..n], to, tree)?;
                rest.extend_from_slice(&abs[n + 1..]);
                return Some(target(&rest, tree, names, depth + 1).unwrap_or(module));
            }
            return Some(module);
        }
        None
    }
    // A path written in `module`, made absolute; `None` for other crates' paths.
    fn absolute(module: &[String], path: &[String], tree: &ModuleTree) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut base = module[..module.len().saturating_sub(1)].to_vec();
                let mut rest = rest;
                while let Some((s, r)) = rest.split_first() {
                    if s != "super" {
                        break;
                    }
                    base.pop();
                    rest = r;
                }
                base.extend_from_slice(rest);
                return Some(base);
            }
            _ => {
                let mut child = module.to_vec();
                child.push(first.clone());
                if !tree.files.contains_key(&join(&child)) {
                    return None;
                }
                return Some(module.iter().chain(path).cloned().collect());
            }
        };
        abs.extend_from_slice(rest);
        Some(abs)
    }
    let mut graph = BTreeMap::new();
    for (module, n) in &names {
        let here: Vec<String> = if module.is_empty() {
            Vec::new()
        } else {
            module.split('/').map(String::from).collect()
        };
        let uses: BTreeSet<String> = n
            .paths
            .iter()
            .filter_map(|(inline, p)| {
                // `self::` and `super::` inside an inline module: its file first.
                let mut p: &[String] = p;
                let mut levels = *inline;
                while levels > 0 && p.first().is_some_and(|s| s == "super" || s == "self") {
                    if p[0] == "self" {
                        return None;
                    }
                    p = &p[1..];
                    levels -= 1;
                }
                if levels < *inline && p.first().is_none_or(|s| s != "super") {
                    return None;
                }
                absolute(&here, p, &tree)
            })
            .filter_map(|abs| target(&abs, &tree, &names, 0))
            .filter(|t| t != module)
            .collect();
        graph.insert(module.clone(), uses);
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

/// Every crate's library and binary roots.
fn crate_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).expect("crates/") {
        let src = krate.expect("entry").path().join("src");
        for root in ["lib.rs", "main.rs"] {
            if src.join(root).is_file() {
                roots.push(src.join(root));
            }
        }
    }
    roots.sort();
    roots
}

#[test]
fn the_files_of_every_crate_import_one_way() {
    let roots = crate_roots();
    assert!(
        roots.len() >= 7,
        "expected the workspace's crates: {roots:?}"
    );
    for root in roots {
        let graph = module_imports(&root);
        if let Some(circle) = a_circle(&graph) {
            panic!(
                "{}: files import each other in a circle: {}; move what both need into a file below them",
                root.display(),
                circle
                    .iter()
                    .map(|m| if m.is_empty() { "(root)" } else { m.as_str() })
                    .collect::<Vec<_>>()
                    .join(" -> ")
            );
        }
    }
}

#[test]
fn the_step_context_uses_only_the_engines_plain_data() {
    // The check above sees through re-exports: the engine's files are found as importing
    // each other, and the authoring API's context only the engine's plain-data files.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let graph = module_imports(&root);
    let apply = &graph["engine/apply"];
    assert!(
        apply.contains("engine/slot") && apply.contains("engine/shared"),
        "{apply:?}"
    );
    let context = &graph["context"];
    assert!(
        context.iter().all(|m| !m.starts_with("engine")
            || ["engine/error", "engine/ids", "engine/run_names"].contains(&m.as_str())),
        "the step context may use only the engine's plain data: {context:?}"
    );
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
fn a_circle_through_a_re_export_is_found_and_test_code_is_left_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n");
    write("a.rs", "use crate::b::B;\npub struct A(B);\n");
    write("b.rs", "pub struct B;\nfn f(_: crate::A) {}\n");
    write(
        "c.rs",
        "pub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\nmod inner {\n    use super::C;\n}\n",
    );
    let graph = module_imports(&src.join("lib.rs"));
    assert_eq!(
        a_circle(&graph),
        Some(vec!["a".into(), "b".into(), "a".into()]),
        "{graph:?}"
    );
    assert!(
        graph["c"].is_empty(),
        "test and inline-module code: {graph:?}"
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
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
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
