//! Config classes against their forms (seed 000, "Form/Config Type Mismatch", issue 6): a
//! config field declared `Annotated[float | InputNumber, …]` must get an `InputNumber` from
//! `as_form()`, not an `InputText`. Reported as `SAAP103` at the keyword in `as_form()`.
//!
//! Only the plain pattern is read: `as_form` returning a call of the class (`cls(...)` or its
//! name) with keyword arguments whose values are calls of a form element.

use crate::agent::LocatedFinding;
use crate::annotation::dotted;
use crate::rules::{self, FORM_MISMATCH};
use crate::source::SourceFile;
use ruff_python_ast::visitor::{Visitor, walk_expr};
use ruff_python_ast::{Expr, Stmt, StmtClassDef};
use std::collections::HashMap;

/// Value types a field may hold besides form elements.
const VALUE_TYPES: &[&str] = &[
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "list",
    "dict",
    "set",
    "tuple",
    "None",
    "Any",
    "Literal",
    "Optional",
    "Union",
    "List",
    "Dict",
    "LocaleString",
];

/// Checks one config class (a package class deriving from `AgentConfig`/`StepConfig`/`Form`).
pub fn check_form(class: &StmtClassDef, src: &SourceFile) -> Vec<LocatedFinding> {
    // Field → the form element types its annotation allows.
    let mut fields: HashMap<String, (Vec<String>, String)> = HashMap::new();
    for s in &class.body {
        if let Stmt::AnnAssign(a) = s
            && let Expr::Name(n) = &*a.target
        {
            let mut names = Vec::new();
            type_names(&a.annotation, &mut names, 0);
            let elements: Vec<String> = names
                .into_iter()
                .filter(|n| !VALUE_TYPES.contains(&n.as_str()))
                .collect();
            fields.insert(n.id.to_string(), (elements, src.snippet(&*a.annotation)));
        }
    }
    let Some(as_form) = class.body.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == "as_form" => Some(f),
        _ => None,
    }) else {
        return Vec::new();
    };
    let mut calls = Calls {
        class: class.name.to_string(),
        found: Vec::new(),
    };
    for s in &as_form.body {
        calls.visit_stmt(s);
    }
    let mut out = Vec::new();
    for call in calls.found {
        let Expr::Call(c) = call else { continue };
        for kw in c.arguments.keywords.iter() {
            let Some(field) = kw.arg.as_ref().map(|a| a.to_string()) else {
                continue;
            };
            let Some((elements, declared)) = fields.get(&field) else {
                continue;
            };
            let Expr::Call(value) = &kw.value else {
                continue;
            };
            let Some(given) =
                dotted(&value.func).map(|d| d.rsplit('.').next().unwrap_or("").to_string())
            else {
                continue;
            };
            if elements.is_empty() || elements.contains(&given) {
                continue;
            }
            out.push(LocatedFinding {
                finding: rules::finding(
                    &FORM_MISMATCH,
                    None,
                    Some(&field),
                    format!(
                        "`{}.as_form()` sets `{field}` to `{given}(...)`, but the field is declared `{declared}`",
                        class.name
                    ),
                    "issue 6 (config errors): the form is validated against the field annotations when the agent starts and when a config is submitted; an element the annotation does not allow fails validation, so the agent does not start or rejects every config",
                    format!(
                        "set `{field}` to {} in `as_form()`, or change the field's annotation",
                        elements
                            .iter()
                            .map(|e| format!("`{e}(...)`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                ),
                location: src.at(&kw.value),
            });
        }
    }
    out
}

/// The type names in an annotation (`Annotated[float | InputNumber, …]` → float, InputNumber).
fn type_names(e: &Expr, out: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        return;
    }
    match e {
        Expr::Name(_) | Expr::Attribute(_) => {
            if let Some(d) = dotted(e) {
                out.push(d.rsplit('.').next().unwrap_or("").to_string());
            }
        }
        Expr::NoneLiteral(_) => out.push("None".into()),
        Expr::BinOp(b) => {
            type_names(&b.left, out, depth + 1);
            type_names(&b.right, out, depth + 1);
        }
        Expr::Subscript(s) => {
            let head = dotted(&s.value).unwrap_or_default();
            let head = head.rsplit('.').next().unwrap_or("");
            match (head, &*s.slice) {
                ("Annotated", Expr::Tuple(t)) => {
                    if let Some(first) = t.elts.first() {
                        type_names(first, out, depth + 1);
                    }
                }
                ("Optional" | "Union", Expr::Tuple(t)) => {
                    for x in &t.elts {
                        type_names(x, out, depth + 1);
                    }
                }
                ("Optional" | "Union", x) => type_names(x, out, depth + 1),
                _ => out.push(head.to_string()),
            }
        }
        _ => {}
    }
}

/// Calls of the class itself inside `as_form` (`cls(...)`, `MyConfig(...)`).
struct Calls<'a> {
    class: String,
    found: Vec<&'a Expr>,
}

impl<'a> Visitor<'a> for Calls<'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr
            && let Expr::Name(n) = &*c.func
            && (n.id.as_str() == "cls" || n.id.as_str() == self.class)
        {
            self.found.push(expr);
        }
        walk_expr(self, expr);
    }
}
