//! The constraints only step *bodies* show (seed 000, "Engineering Constraint Violations"):
//! state kept on `self` between steps (context smuggle, `SAAP101`), a config checked inside a
//! step to decide whether an optional input should have arrived (config lie, `SAAP102`), and
//! background tasks that can publish after the run stopped (`SAAP105`).
//!
//! Syntactic and conservative: a pattern is reported only when the source shows it plainly;
//! nothing here changes the spec.

use crate::agent::{AgentSource, LocatedFinding, is_step, optional_and_config_params};
use crate::rules::{self, CONFIG_LIE, CONTEXT_SMUGGLE, FIRE_AND_FORGET};
use crate::source::SourceFile;
use ruff_python_ast::visitor::{Visitor, walk_expr, walk_stmt};
use ruff_python_ast::{Expr, ExprContext, Stmt, StmtFunctionDef};
use std::collections::BTreeMap;

/// Methods that change a container in place (`self.items.append(x)`).
const MUTATORS: &[&str] = &[
    "append",
    "extend",
    "insert",
    "update",
    "add",
    "pop",
    "remove",
    "clear",
    "setdefault",
    "discard",
    "popitem",
    "sort",
    "reverse",
];

/// Runs the body checks of one agent class.
pub fn check_bodies(agent: &AgentSource, src: &SourceFile) -> Vec<LocatedFinding> {
    let mut out = Vec::new();
    context_smuggle(agent, src, &mut out);
    for (spec, step) in &agent.steps {
        let file_src = src_for(step.file, agent, src);
        let Some(file_src) = file_src else { continue };
        if !step.has_precondition {
            config_lie(&spec.name, step, file_src, &mut out);
        }
        let mut tasks = Tasks { found: Vec::new() };
        for s in &step.func.body {
            tasks.visit_stmt(s);
        }
        for (at, what) in tasks.found {
            out.push(LocatedFinding {
                finding: rules::finding(
                    &FIRE_AND_FORGET,
                    Some(&spec.name),
                    None,
                    format!("step `{}` starts a background task with `{what}`", spec.name),
                    "R4: the run ends when a stop event is appended; a task the step did not await can still publish afterwards (events after stop), and its failure never becomes an ExceptionEvent",
                    format!(
                        "await the work inside `{}` and return its result as an event",
                        spec.name
                    ),
                ),
                location: file_src.location(at),
            });
        }
    }
    out
}

/// Inherited steps live in other files; only steps of the agent's own file are read here.
fn src_for<'a>(file: usize, agent: &AgentSource, src: &'a SourceFile) -> Option<&'a SourceFile> {
    (file == agent.file).then_some(src)
}

/// What one method does with `self.X`.
#[derive(Default)]
struct SelfUse {
    this: String,
    /// attribute → first write (offset).
    writes: BTreeMap<String, ruff_text_size::TextSize>,
    reads: BTreeMap<String, ruff_text_size::TextSize>,
}

impl SelfUse {
    fn self_attr<'e>(&self, e: &'e Expr) -> Option<&'e str> {
        match e {
            Expr::Attribute(a) => match &*a.value {
                Expr::Name(n) if n.id.as_str() == self.this => Some(a.attr.as_str()),
                _ => None,
            },
            _ => None,
        }
    }

    fn write_target(&mut self, t: &Expr) {
        let target = match t {
            Expr::Subscript(s) => &*s.value,
            other => other,
        };
        if let Some(attr) = self.self_attr(target) {
            self.writes
                .entry(attr.to_string())
                .or_insert(ruff_text_size::Ranged::start(t));
        }
        if let Expr::Tuple(tup) = t {
            for e in &tup.elts {
                self.write_target(e);
            }
        }
    }
}

impl<'a> Visitor<'a> for SelfUse {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Assign(a) => a.targets.iter().for_each(|t| self.write_target(t)),
            Stmt::AugAssign(a) => self.write_target(&a.target),
            Stmt::AnnAssign(a) => self.write_target(&a.target),
            Stmt::Delete(d) => d.targets.iter().for_each(|t| self.write_target(t)),
            _ => {}
        }
        walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr
            && let Expr::Attribute(m) = &*c.func
            && MUTATORS.contains(&m.attr.as_str())
        {
            self.write_target(&m.value);
        }
        if let Expr::Attribute(a) = expr
            && a.ctx == ExprContext::Load
            && let Some(attr) = self.self_attr(expr)
        {
            self.reads
                .entry(attr.to_string())
                .or_insert(ruff_text_size::Ranged::start(&a.attr));
        }
        walk_expr(self, expr);
    }
}

fn self_use(f: &StmtFunctionDef) -> Option<SelfUse> {
    let first = f
        .parameters
        .posonlyargs
        .iter()
        .chain(&f.parameters.args)
        .next()?;
    let mut u = SelfUse {
        this: first.parameter.name.to_string(),
        ..SelfUse::default()
    };
    for s in &f.body {
        u.visit_stmt(s);
    }
    Some(u)
}

fn context_smuggle(agent: &AgentSource, src: &SourceFile, out: &mut Vec<LocatedFinding>) {
    let methods: Vec<(&StmtFunctionDef, SelfUse)> = agent
        .class
        .body
        .iter()
        .filter_map(|s| s.as_function_def_stmt())
        .filter_map(|f| self_use(f).map(|u| (f, u)))
        .collect();
    let mut reported = std::collections::BTreeSet::new();
    for (f, u) in &methods {
        if f.name.as_str() == "__init__" {
            continue;
        }
        for (attr, at) in &u.writes {
            let others: Vec<&str> = methods
                .iter()
                .filter(|(g, v)| {
                    g.name != f.name && (v.reads.contains_key(attr) || v.writes.contains_key(attr))
                })
                .map(|(g, _)| g.name.as_str())
                .collect();
            if others.is_empty() || !reported.insert(attr.clone()) {
                continue;
            }
            let step_word = if is_step(f) { "step" } else { "method" };
            out.push(LocatedFinding {
                finding: rules::finding(
                    &CONTEXT_SMUGGLE,
                    Some(f.name.as_str()),
                    None,
                    format!(
                        "{step_word} `{}` stores `self.{attr}`, which {} also use; the agent instance does not outlive one step",
                        f.name,
                        others
                            .iter()
                            .map(|o| format!("`{o}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    "DESIGN §4.6: the dispatcher creates a fresh agent instance for every execution, and consecutive steps may run in other processes; whatever one step stores on `self` is gone (or the `__init__` default) in the next",
                    format!(
                        "pass the value in an event the next step takes (or, for control-flow state only, `RunContext`: `await ctx.set(\"{attr}\", …)`)"
                    ),
                ),
                location: src.location(*at),
            });
        }
    }
}

fn config_lie(
    step: &str,
    s: &crate::agent::StepSource,
    src: &SourceFile,
    out: &mut Vec<LocatedFinding>,
) {
    let (optional, config) = optional_and_config_params(s);
    if optional.is_empty() || config.is_empty() {
        return;
    }
    let mut tests = Tests { found: Vec::new() };
    for st in &s.func.body {
        tests.visit_stmt(st);
    }
    for test in tests.found {
        let mut names = Names::default();
        names.visit_expr(test);
        let reads_config = names.attr_bases.iter().any(|n| config.contains(n));
        let Some(opt) = optional.iter().find(|o| names.names.contains(o)) else {
            continue;
        };
        if !reads_config {
            continue;
        }
        out.push(LocatedFinding {
            finding: rules::finding(
                &CONFIG_LIE,
                Some(step),
                Some(opt),
                format!(
                    "step `{step}` checks the config and whether `{opt}` arrived (`{}`) inside its body",
                    src.snippet(test)
                ),
                "R1/R5: the step already fired when its required inputs arrived; by the time the body reads the config, the dispatcher has decided, and the optional input may come later and run the step again",
                format!(
                    "move the condition into a `@precondition()` of `{step}` (it can take the config and `{opt}`), so the step waits for `{opt}` when the config says it will come"
                ),
            ),
            location: src.at(test),
        });
    }
}

struct Tests<'a> {
    found: Vec<&'a Expr>,
}

impl<'a> Visitor<'a> for Tests<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::If(s) => {
                self.found.push(&s.test);
                for c in &s.elif_else_clauses {
                    if let Some(t) = &c.test {
                        self.found.push(t);
                    }
                }
            }
            Stmt::While(w) => self.found.push(&w.test),
            _ => {}
        }
        walk_stmt(self, stmt);
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::If(e) = expr {
            self.found.push(&e.test);
        }
        walk_expr(self, expr);
    }
}

#[derive(Default)]
struct Names {
    names: Vec<String>,
    attr_bases: Vec<String>,
}

impl<'a> Visitor<'a> for Names {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(n) => self.names.push(n.id.to_string()),
            Expr::Attribute(a) => {
                if let Expr::Name(n) = &*a.value {
                    self.attr_bases.push(n.id.to_string());
                }
            }
            _ => {}
        }
        walk_expr(self, expr);
    }
}

/// `create_task(…)` / `ensure_future(…)` whose task nobody awaits: the call as a statement of
/// its own, or handed to a collection (`tasks.add(create_task(…))`). A task kept in a
/// variable may be awaited later and is not reported.
struct Tasks {
    found: Vec<(ruff_text_size::TextSize, String)>,
}

fn task_call(e: &Expr) -> Option<&'static str> {
    let Expr::Call(c) = e else { return None };
    let name = match &*c.func {
        Expr::Attribute(a) => a.attr.as_str(),
        Expr::Name(n) => n.id.as_str(),
        _ => return None,
    };
    match name {
        "create_task" => Some("create_task(...)"),
        "ensure_future" => Some("ensure_future(...)"),
        _ => None,
    }
}

impl<'a> Visitor<'a> for Tasks {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if let Stmt::Expr(e) = stmt
            && let Some(what) = task_call(&e.value)
        {
            self.found
                .push((ruff_text_size::Ranged::start(&*e.value), what.to_string()));
        }
        walk_stmt(self, stmt);
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr
            && let Expr::Attribute(a) = &*c.func
            && matches!(a.attr.as_str(), "add" | "append")
        {
            for arg in c.arguments.args.iter() {
                if let Some(what) = task_call(arg) {
                    self.found
                        .push((ruff_text_size::Ranged::start(arg), what.to_string()));
                }
            }
        }
        walk_expr(self, expr);
    }
}
