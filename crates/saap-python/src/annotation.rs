//! Reading type annotations the way the Python SDK does (reference notes §3.1): a parameter
//! annotation becomes an event parameter of a kind (`T`, `T | None` / `Optional[T]`,
//! `list[T]`, `FixedList(T, N)`, unions `A | B`, `Annotated[X, …]`, string annotations) or a
//! non-event parameter (config, injectable, plain value); a return annotation becomes the
//! step's outputs. What cannot be read is returned as [`ParamShape::Unresolved`] with the
//! reason, never guessed.

use crate::package::Sym;
use crate::types::{Classifier, TypeClass};
use ruff_python_ast::Expr;
use saap_dispatch::spec::ParamKind;

/// Deepest annotation nesting read (`Optional[list[Annotated[…]]]`…).
const MAX_DEPTH: usize = 16;

/// What a parameter annotation means for the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamShape {
    /// Not an event parameter (config, injectable, plain value).
    NotEvent(TypeClass),
    Event {
        kind: ParamKind,
        types: Vec<String>,
        size: Option<u32>,
    },
    Unresolved(String),
}

/// The outputs a return annotation declares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReturnShape {
    /// Alternatives, at most one event of each per execution.
    pub single: Vec<String>,
    /// Types returned as a list (any number per execution).
    pub listed: Vec<String>,
    /// What could not be read.
    pub unresolved: Vec<String>,
}

enum Member {
    None,
    Single(TypeClass),
    List(Vec<TypeClass>),
    Fixed(Vec<TypeClass>, Result<u32, String>),
    Unresolved(String),
}

/// Reads a parameter annotation written in file `file`.
pub fn param_shape(cx: &mut Classifier, file: usize, e: &Expr) -> ParamShape {
    let mut ms = Vec::new();
    members(cx, file, e, &mut ms, 0);
    let has_none = ms.iter().any(|m| matches!(m, Member::None));
    let mut singles = Vec::new();
    let mut lists: Vec<Vec<String>> = Vec::new();
    let mut fixed: Vec<(Vec<String>, Result<u32, String>)> = Vec::new();
    let mut unknown: Option<String> = None;
    let mut first_other: Option<TypeClass> = None;
    let split = |tcs: Vec<TypeClass>, unknown: &mut Option<String>| {
        let mut ev = Vec::new();
        for t in tcs {
            match t {
                TypeClass::Event(n) => ev.push(n),
                TypeClass::Unknown(why) => {
                    unknown.get_or_insert(why);
                }
                _ => {}
            }
        }
        ev
    };
    for m in ms {
        match m {
            Member::None => {}
            Member::Single(TypeClass::Event(n)) => singles.push(n),
            Member::Single(TypeClass::Unknown(why)) | Member::Unresolved(why) => {
                unknown.get_or_insert(why);
            }
            Member::Single(other) => {
                first_other.get_or_insert(other);
            }
            Member::List(tcs) => {
                let ev = split(tcs, &mut unknown);
                if !ev.is_empty() {
                    lists.push(ev);
                }
            }
            Member::Fixed(tcs, n) => {
                let ev = split(tcs, &mut unknown);
                fixed.push((ev, n));
            }
        }
    }
    if let Some(why) = unknown {
        return ParamShape::Unresolved(why);
    }
    match (singles.is_empty(), lists.len(), fixed.len()) {
        (true, 0, 0) => ParamShape::NotEvent(first_other.unwrap_or(TypeClass::Plain)),
        (false, 0, 0) => ParamShape::Event {
            kind: if has_none {
                ParamKind::Optional
            } else {
                ParamKind::Required
            },
            types: dedup(singles),
            size: None,
        },
        (true, 1, 0) => ParamShape::Event {
            kind: ParamKind::List,
            types: dedup(lists.concat()),
            size: None,
        },
        (true, 0, 1) => {
            let Some((types, n)) = fixed.pop() else {
                return ParamShape::Unresolved("an empty FixedList".into());
            };
            if types.is_empty() {
                return ParamShape::Unresolved("FixedList of a type that is not an event".into());
            }
            if has_none {
                // The SDK loses the size inside a union: it binds like an optional single.
                return ParamShape::Event {
                    kind: ParamKind::Optional,
                    types: dedup(types),
                    size: None,
                };
            }
            match n {
                Ok(n) if n > 0 => ParamShape::Event {
                    kind: ParamKind::FixedList,
                    types: dedup(types),
                    size: Some(n),
                },
                Ok(_) => ParamShape::Unresolved("FixedList of size 0".into()),
                Err(why) => ParamShape::Unresolved(why),
            }
        }
        _ => ParamShape::Unresolved(
            "the annotation mixes single events, lists and fixed lists in one union".into(),
        ),
    }
}

/// Reads a return annotation written in file `file`.
pub fn return_shape(cx: &mut Classifier, file: usize, e: &Expr) -> ReturnShape {
    let mut ms = Vec::new();
    members(cx, file, e, &mut ms, 0);
    let mut out = ReturnShape::default();
    for m in ms {
        match m {
            Member::None => {}
            Member::Single(TypeClass::Event(n)) => out.single.push(n),
            Member::Single(TypeClass::Unknown(why)) | Member::Unresolved(why) => {
                out.unresolved.push(why)
            }
            Member::Single(_) => {}
            Member::List(tcs) | Member::Fixed(tcs, _) => {
                for t in tcs {
                    match t {
                        TypeClass::Event(n) => out.listed.push(n),
                        TypeClass::Unknown(why) => out.unresolved.push(why),
                        _ => {}
                    }
                }
            }
        }
    }
    out.single = dedup(out.single);
    out.listed = dedup(out.listed);
    out
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

/// The last name of a name or dotted name (`typing.Optional` → `Optional`).
fn last_name(e: &Expr) -> Option<&str> {
    match e {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => Some(a.attr.as_str()),
        _ => None,
    }
}

/// A name or dotted name as written.
pub fn dotted(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => Some(format!("{}.{}", dotted(&a.value)?, a.attr)),
        _ => None,
    }
}

fn elements(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Tuple(t) => t.elts.iter().collect(),
        other => vec![other],
    }
}

fn members(cx: &mut Classifier, file: usize, e: &Expr, out: &mut Vec<Member>, depth: usize) {
    if depth > MAX_DEPTH {
        out.push(Member::Unresolved(
            "the annotation nests too deep to read".into(),
        ));
        return;
    }
    match e {
        Expr::NoneLiteral(_) => out.push(Member::None),
        Expr::BinOp(b) if b.op == ruff_python_ast::Operator::BitOr => {
            members(cx, file, &b.left, out, depth + 1);
            members(cx, file, &b.right, out, depth + 1);
        }
        Expr::StringLiteral(s) => {
            let text = s.value.to_str();
            match ruff_python_parser::parse_expression(text) {
                Ok(parsed) => members(cx, file, &parsed.syntax().body, out, depth + 1),
                Err(_) => out.push(Member::Unresolved(format!(
                    "the string annotation \"{text}\" is not a Python expression"
                ))),
            }
        }
        Expr::Subscript(s) => {
            let head = last_name(&s.value).unwrap_or("");
            let args = elements(&s.slice);
            match head {
                "Annotated" => {
                    if let Some(first) = args.first() {
                        members(cx, file, first, out, depth + 1);
                    }
                }
                "Optional" => {
                    for a in args {
                        members(cx, file, a, out, depth + 1);
                    }
                    out.push(Member::None);
                }
                "Union" => {
                    for a in args {
                        members(cx, file, a, out, depth + 1);
                    }
                }
                "list" | "List" | "Sequence" | "Iterable" => {
                    let mut inner = Vec::new();
                    for a in args {
                        members(cx, file, a, &mut inner, depth + 1);
                    }
                    out.push(Member::List(flatten(inner)));
                }
                "type" => out.push(Member::Single(TypeClass::Injectable)),
                _ => {
                    let sym = cx.pkg.resolve(file, &s.value);
                    let shown = dotted(&s.value).unwrap_or_else(|| "?".into());
                    match cx.classify(&sym, &shown) {
                        TypeClass::Event(n) => out.push(Member::Single(TypeClass::Event(n))),
                        TypeClass::Unknown(why) => out.push(Member::Unresolved(why)),
                        other => out.push(Member::Single(other)),
                    }
                }
            }
        }
        Expr::Call(c) if matches!(last_name(&c.func), Some("FixedList" | "ListOfSize")) => {
            let args = &c.arguments.args;
            let (Some(t), Some(n)) = (args.first(), args.get(1)) else {
                out.push(Member::Unresolved(
                    "FixedList needs two arguments: FixedList(EventType, N)".into(),
                ));
                return;
            };
            let mut inner = Vec::new();
            members(cx, file, t, &mut inner, depth + 1);
            let size = match crate::package::int_literal(n) {
                Some(v) => Ok(v),
                None => match cx.pkg.resolve(file, n) {
                    Sym::Int(v) => Ok(v),
                    _ => Err(format!(
                        "the size of `FixedList` is {}, not a number saap can read (write a literal or a module-level integer constant)",
                        dotted(n)
                            .map(|d| format!("`{d}`"))
                            .unwrap_or_else(|| "computed when the module runs".into())
                    )),
                },
            };
            out.push(Member::Fixed(flatten(inner), size));
        }
        Expr::Name(_) | Expr::Attribute(_) => {
            let sym = cx.pkg.resolve(file, e);
            let shown = dotted(e).unwrap_or_default();
            if shown == "None" {
                out.push(Member::None);
                return;
            }
            out.push(Member::Single(cx.classify(&sym, &shown)));
        }
        _ => out.push(Member::Unresolved(
            "the annotation is an expression saap cannot read as a type".into(),
        )),
    }
}

/// The element types of a list's members (`list[A | B]` → A, B).
fn flatten(inner: Vec<Member>) -> Vec<TypeClass> {
    let mut out = Vec::new();
    for m in inner {
        match m {
            Member::Single(t) => out.push(t),
            Member::Unresolved(why) => out.push(TypeClass::Unknown(why)),
            Member::None => {}
            Member::List(_) | Member::Fixed(..) => out.push(TypeClass::Unknown(
                "a list of lists is not an event parameter saap can read".into(),
            )),
        }
    }
    out
}
