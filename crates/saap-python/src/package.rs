//! The package as a whole: every parsed module, what each top-level name of a module is bound
//! to (a class, a function, an import, an integer constant), and the resolution of a name or
//! dotted name used in one module to what it denotes, across the package's files.
//!
//! Resolution follows `import` and `from … import` (relative and absolute) into the package's
//! own modules; a name imported from outside the package is known only by its name
//! ([`Sym::External`]), which [`crate::types`] classifies. It never guesses a binding.

use crate::source::SourceFile;
use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use std::collections::HashMap;

/// How far re-exports are followed (`from .a import X` where `a` re-exports it…).
const MAX_HOPS: usize = 16;

/// What a module-level name is bound to.
#[derive(Debug, Clone)]
enum Binding {
    Class(usize),
    Function(usize),
    /// `from module import name`.
    Import {
        module: String,
        name: String,
    },
    /// `import a.b as c` (c → `a.b`), `import a.b` (a → `a`).
    Module(String),
    Int(u32),
}

/// What a name used in a module denotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sym {
    /// A class defined at the top level of a package file: (file, statement index).
    Class(usize, usize),
    /// A function defined at the top level of a package file.
    Function(usize, usize),
    /// A module of the package (by file) or outside it (by dotted name).
    PackageModule(usize),
    ExternalModule(String),
    /// A name from outside the package (or a Python builtin), known by its name only.
    External {
        name: String,
        module: String,
    },
    Int(u32),
    /// Nothing the analysis can follow.
    Unknown,
}

/// Every module of the input with its top-level bindings.
pub struct Package {
    pub files: Vec<SourceFile>,
    names: Vec<HashMap<String, Binding>>,
}

impl Package {
    pub fn new(files: Vec<SourceFile>) -> Package {
        let names = files.iter().map(bindings).collect();
        Package { files, names }
    }

    /// The class statement a [`Sym::Class`] points at.
    pub fn class(&self, file: usize, stmt: usize) -> Option<&StmtClassDef> {
        self.files
            .get(file)?
            .ast
            .body
            .get(stmt)?
            .as_class_def_stmt()
    }

    /// The function statement a [`Sym::Function`] points at.
    pub fn function(&self, file: usize, stmt: usize) -> Option<&StmtFunctionDef> {
        self.files
            .get(file)?
            .ast
            .body
            .get(stmt)?
            .as_function_def_stmt()
    }

    /// Every top-level class: (file, statement index).
    pub fn classes(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (f, file) in self.files.iter().enumerate() {
            for (i, s) in file.ast.body.iter().enumerate() {
                if s.is_class_def_stmt() {
                    out.push((f, i));
                }
            }
        }
        out
    }

    /// What `expr` (a name or a dotted name) denotes in file `file`.
    pub fn resolve(&self, file: usize, expr: &Expr) -> Sym {
        match expr {
            Expr::Name(n) => self.resolve_name(file, n.id.as_str(), 0),
            Expr::Attribute(a) => match self.resolve(file, &a.value) {
                Sym::PackageModule(m) => self.resolve_name(m, a.attr.as_str(), 0),
                Sym::ExternalModule(m) => {
                    let dotted = format!("{m}.{}", a.attr.as_str());
                    match self.module_file(&dotted) {
                        Some(f) => Sym::PackageModule(f),
                        None => Sym::External {
                            name: a.attr.to_string(),
                            module: m,
                        },
                    }
                }
                _ => Sym::Unknown,
            },
            _ => Sym::Unknown,
        }
    }

    /// What the top-level name `name` of file `file` denotes.
    pub fn resolve_name(&self, file: usize, name: &str, hops: usize) -> Sym {
        if hops > MAX_HOPS {
            return Sym::Unknown;
        }
        let Some(binding) = self.names.get(file).and_then(|n| n.get(name)) else {
            // Python builtins and names used without an import (as in the guide's
            // snippets) are known by their name only.
            return Sym::External {
                name: name.to_string(),
                module: String::new(),
            };
        };
        match binding {
            Binding::Class(i) => Sym::Class(file, *i),
            Binding::Function(i) => Sym::Function(file, *i),
            Binding::Int(n) => Sym::Int(*n),
            Binding::Module(m) => match self.module_file(m) {
                Some(f) => Sym::PackageModule(f),
                None => Sym::ExternalModule(m.clone()),
            },
            Binding::Import { module, name } => {
                let module = self.absolute(file, module);
                match self.module_file(&module) {
                    Some(f) => {
                        if self.names.get(f).is_some_and(|n| n.contains_key(name)) {
                            self.resolve_name(f, name, hops + 1)
                        } else if let Some(sub) = self.module_file(&format!("{module}.{name}")) {
                            Sym::PackageModule(sub)
                        } else {
                            Sym::Unknown
                        }
                    }
                    None => match self.module_file(&format!("{module}.{name}")) {
                        Some(sub) => Sym::PackageModule(sub),
                        None => Sym::External {
                            name: name.clone(),
                            module,
                        },
                    },
                }
            }
        }
    }

    /// The package files `file` imports, directly or through the files it imports
    /// (itself included).
    pub fn reachable_files(&self, file: usize) -> std::collections::BTreeSet<usize> {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![file];
        while let Some(f) = stack.pop() {
            if !seen.insert(f) {
                continue;
            }
            let Some(names) = self.names.get(f) else {
                continue;
            };
            for b in names.values() {
                match b {
                    Binding::Import { module, name } => {
                        let m = self.absolute(f, module);
                        stack.extend(self.module_file(&m));
                        stack.extend(self.module_file(&format!("{m}.{name}")));
                    }
                    Binding::Module(m) => stack.extend(self.module_file(m)),
                    _ => {}
                }
            }
        }
        seen
    }

    /// A relative module (`.events`, `..x`) made absolute from file `file`.
    fn absolute(&self, file: usize, module: &str) -> String {
        let level = module.chars().take_while(|c| *c == '.').count();
        if level == 0 {
            return module.to_string();
        }
        let Some(f) = self.files.get(file) else {
            return module.to_string();
        };
        let mut parts: Vec<&str> = f.module.split('.').collect();
        let is_init = f.shown.ends_with("__init__.py");
        let up = if is_init { level - 1 } else { level };
        for _ in 0..up {
            parts.pop();
        }
        let rest = &module[level..];
        if !rest.is_empty() {
            parts.push(rest);
        }
        parts.join(".")
    }

    /// The package file of a dotted module name: exact, else one whose name is a dotted
    /// suffix of it or the other way round (the folder given may sit above or below the
    /// import root).
    fn module_file(&self, dotted: &str) -> Option<usize> {
        if dotted.is_empty() {
            return None;
        }
        let suffix = |long: &str, short: &str| long.ends_with(&format!(".{short}"));
        self.files
            .iter()
            .position(|f| f.module == dotted)
            .or_else(|| {
                self.files
                    .iter()
                    .position(|f| suffix(dotted, &f.module) || suffix(&f.module, dotted))
            })
    }
}

fn bindings(file: &SourceFile) -> HashMap<String, Binding> {
    let mut names = HashMap::new();
    for (i, s) in file.ast.body.iter().enumerate() {
        bind(s, Some(i), &mut names, 0);
    }
    names
}

/// Records what statement `s` binds at module level; `index` is its place in the module body
/// (`None` inside an `if`/`try`, where only imports are taken).
fn bind(s: &Stmt, index: Option<usize>, names: &mut HashMap<String, Binding>, depth: usize) {
    match s {
        Stmt::ClassDef(c) => {
            if let Some(i) = index {
                names.insert(c.name.to_string(), Binding::Class(i));
            }
        }
        Stmt::FunctionDef(f) => {
            if let Some(i) = index {
                names.insert(f.name.to_string(), Binding::Function(i));
            }
        }
        Stmt::Import(imp) => {
            for a in &imp.names {
                let full = a.name.to_string();
                match &a.asname {
                    Some(alias) => {
                        names.insert(alias.to_string(), Binding::Module(full));
                    }
                    None => {
                        let first = full.split('.').next().unwrap_or_default().to_string();
                        names.insert(first.clone(), Binding::Module(first));
                    }
                }
            }
        }
        Stmt::ImportFrom(imp) => {
            let dots = ".".repeat(imp.level as usize);
            let module = format!(
                "{dots}{}",
                imp.module.as_ref().map(|m| m.as_str()).unwrap_or("")
            );
            for a in &imp.names {
                let local = a.asname.as_ref().unwrap_or(&a.name).to_string();
                names.insert(
                    local,
                    Binding::Import {
                        module: module.clone(),
                        name: a.name.to_string(),
                    },
                );
            }
        }
        Stmt::Assign(a) => {
            if let ([Expr::Name(target)], Some(n)) = (a.targets.as_slice(), int_literal(&a.value)) {
                names.insert(target.id.to_string(), Binding::Int(n));
            }
        }
        Stmt::AnnAssign(a) => {
            if let (Expr::Name(target), Some(n)) =
                (a.target.as_ref(), a.value.as_deref().and_then(int_literal))
            {
                names.insert(target.id.to_string(), Binding::Int(n));
            }
        }
        Stmt::If(s) if depth < 2 => {
            for b in &s.body {
                bind(b, None, names, depth + 1);
            }
            for clause in &s.elif_else_clauses {
                for b in &clause.body {
                    bind(b, None, names, depth + 1);
                }
            }
        }
        Stmt::Try(t) if depth < 2 => {
            for b in &t.body {
                bind(b, None, names, depth + 1);
            }
        }
        _ => {}
    }
}

/// A non-negative integer literal that fits in `u32`.
pub fn int_literal(e: &Expr) -> Option<u32> {
    match e {
        Expr::NumberLiteral(n) => match &n.value {
            ruff_python_ast::Number::Int(i) => i.as_u32(),
            _ => None,
        },
        _ => None,
    }
}
