//! One agent class to a [`WorkflowSpec`](saap_dispatch::spec::WorkflowSpec): its `@step`
//! methods (own and inherited from package base classes; in name order, as the Python SDK
//! lists them), each parameter read by
//! [`crate::annotation`], the return annotation as outputs, the decorator options
//! (`precondition`, `max_executions_per_run`, `stop_on_error`) and the precondition's event
//! parameters as the types it reads. Everything it cannot read becomes a `SAAP107` finding.
//!
//! It keeps where each step, parameter and precondition is written, so that the spec checks'
//! findings can point at `file:line:column`. It does not look into step bodies
//! ([`crate::body`] does).

use crate::annotation::{ParamShape, param_shape, return_shape};
use crate::package::Sym;
use crate::rules::{self, NOT_INJECTABLE, PRECONDITION_UNBOUND, UNRESOLVED};
use crate::source::Location;
use crate::types::{Classifier, TypeClass};
use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use saap_dispatch::check::Finding;
use saap_dispatch::spec::{OutputMax, ParamKind, ParamSpec, PreconditionSpec, StepSpec};
use std::collections::BTreeMap;

/// A finding with the place it points at.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LocatedFinding {
    #[serde(flatten)]
    pub finding: Finding,
    pub location: Location,
}

/// One parameter of a step as read.
pub struct StepParam<'p> {
    pub name: String,
    pub shape: ParamShape,
    pub location: Location,
    pub annotation: Option<&'p Expr>,
}

/// One `@step` method as read.
pub struct StepSource<'p> {
    pub file: usize,
    pub func: &'p StmtFunctionDef,
    pub params: Vec<StepParam<'p>>,
    pub has_precondition: bool,
    pub location: Location,
    pub precondition_location: Option<Location>,
}

/// An agent class as read: the spec, the steps' sources and what could not be read.
pub struct AgentSource<'p> {
    pub name: String,
    pub location: Location,
    pub file: usize,
    pub class: &'p StmtClassDef,
    pub steps: Vec<(StepSpec, StepSource<'p>)>,
    pub findings: Vec<LocatedFinding>,
}

/// Whether a decorator is `@step`, `@step(...)` or `@x.step(...)`.
pub fn is_named_decorator(e: &Expr, name: &str) -> bool {
    let head = match e {
        Expr::Call(c) => &*c.func,
        other => other,
    };
    match head {
        Expr::Name(n) => n.id.as_str() == name,
        Expr::Attribute(a) => a.attr.as_str() == name,
        _ => false,
    }
}

/// Whether a function is a `@step`.
pub fn is_step(f: &StmtFunctionDef) -> bool {
    f.decorator_list
        .iter()
        .any(|d| is_named_decorator(&d.expression, "step"))
}

/// Reads the agent class at (file, statement).
pub fn read_agent<'p>(
    cx: &mut Classifier<'p>,
    file: usize,
    stmt: usize,
) -> Option<AgentSource<'p>> {
    let pkg = cx.pkg;
    let class = pkg.class(file, stmt)?;
    let location = pkg.files[file].at(&class.name);
    let mut methods: BTreeMap<String, (usize, &'p StmtClassDef, &'p StmtFunctionDef)> =
        BTreeMap::new();
    collect_steps(cx, file, stmt, 0, &mut methods);
    let mut agent = AgentSource {
        name: class.name.to_string(),
        location,
        file,
        class,
        steps: Vec::new(),
        findings: Vec::new(),
    };
    for (_, (f, owner, func)) in methods {
        let step = read_step(cx, &mut agent.findings, f, owner, func);
        agent.steps.push(step);
    }
    Some(agent)
}

/// Steps of a class and of its package base classes (a subclass's method wins).
fn collect_steps<'p>(
    cx: &mut Classifier<'p>,
    file: usize,
    stmt: usize,
    depth: usize,
    out: &mut BTreeMap<String, (usize, &'p StmtClassDef, &'p StmtFunctionDef)>,
) {
    let pkg = cx.pkg;
    let Some(class) = pkg.class(file, stmt) else {
        return;
    };
    if depth < 16
        && let Some(args) = &class.arguments
    {
        for base in args.args.iter() {
            if let Sym::Class(bf, bi) = pkg.resolve(file, crate::types::strip_subscript(base))
                && (bf, bi) != (file, stmt)
            {
                collect_steps(cx, bf, bi, depth + 1, out);
            }
        }
    }
    for s in &class.body {
        if let Stmt::FunctionDef(f) = s {
            if is_step(f) {
                out.insert(f.name.to_string(), (file, class, f));
            } else {
                out.remove(f.name.as_str());
            }
        }
    }
}

fn unresolved(
    findings: &mut Vec<LocatedFinding>,
    location: Location,
    step: &str,
    param: Option<&str>,
    message: String,
    fix: String,
) {
    findings.push(LocatedFinding {
        finding: rules::finding(
            &UNRESOLVED,
            Some(step),
            param,
            message,
            "saap checks the dispatch from the types it can read; what it cannot read it leaves out, so a finding that depends on it may be missing",
            fix,
        ),
        location,
    });
}

/// A parameter of a plain type (`str`, `int`, …) without a default: the dispatcher binds
/// events and injects the DI table's types, nothing else (reference notes §3.7).
fn not_injectable(
    findings: &mut Vec<LocatedFinding>,
    location: Location,
    step: &str,
    param: &str,
    annotation: &str,
    what: &str,
) {
    findings.push(LocatedFinding {
        finding: rules::finding(
            &NOT_INJECTABLE,
            Some(step),
            Some(param),
            format!(
                "`{param}: {annotation}` of the {what} of `{step}` is neither an event nor something the dispatcher injects"
            ),
            "the Python dispatcher binds event parameters and injects the types of its table (configs, contexts, displayer, locale, memory, topics, user identity); for anything else it passes nothing, the call fails with a TypeError and, with stop_on_error, the run ends with an ExceptionEvent",
            format!(
                "read `{param}` from an event or the config instead, or give it a default (`{param}: {annotation} = ...`)"
            ),
        ),
        location,
    });
}

fn read_step<'p>(
    cx: &mut Classifier<'p>,
    findings: &mut Vec<LocatedFinding>,
    file: usize,
    owner: &'p StmtClassDef,
    func: &'p StmtFunctionDef,
) -> (StepSpec, StepSource<'p>) {
    let pkg = cx.pkg;
    let src = &pkg.files[file];
    let name = func.name.to_string();
    let mut spec = StepSpec::named(&name);
    spec.description = Some(format!("{}:{}", src.shown, src.at(&func.name).line));
    let mut source = StepSource {
        file,
        func,
        params: Vec::new(),
        has_precondition: false,
        location: src.at(&func.name),
        precondition_location: None,
    };
    // Parameters (the first is the instance unless the method is static).
    let is_static = func
        .decorator_list
        .iter()
        .any(|d| is_named_decorator(&d.expression, "staticmethod"));
    let all: Vec<_> = func
        .parameters
        .posonlyargs
        .iter()
        .chain(&func.parameters.args)
        .chain(&func.parameters.kwonlyargs)
        .collect();
    let skip = usize::from(!is_static && !all.is_empty());
    for p in all.into_iter().skip(skip) {
        let pname = p.parameter.name.to_string();
        let location = src.at(&p.parameter);
        let Some(ann) = p.parameter.annotation.as_deref() else {
            unresolved(
                findings,
                location.clone(),
                &name,
                Some(&pname),
                format!("parameter `{pname}` of step `{name}` has no annotation"),
                format!(
                    "annotate `{pname}` with its event type (`{pname}: MyEvent`) or the injectable it receives"
                ),
            );
            continue;
        };
        let shape = param_shape(cx, file, ann);
        match &shape {
            ParamShape::Event { kind, types, size } => spec.params.push(ParamSpec {
                name: pname.clone(),
                kind: *kind,
                types: types.clone(),
                size: *size,
            }),
            ParamShape::Unresolved(why) => unresolved(
                findings,
                src.at(ann),
                &name,
                Some(&pname),
                format!(
                    "cannot read the annotation `{}` of `{pname}` in step `{name}`: {why}",
                    src.snippet(ann)
                ),
                "write the event type as a class defined or imported in the package (`T`, `T | None`, `list[T]`, `FixedList(T, N)`), or check the whole package folder".into(),
            ),
            ParamShape::NotEvent(TypeClass::Plain) if p.default.is_none() => {
                not_injectable(findings, src.at(ann), &name, &pname, &src.snippet(ann), "step")
            }
            ParamShape::NotEvent(_) => {}
        }
        source.params.push(StepParam {
            name: pname,
            shape,
            location,
            annotation: Some(ann),
        });
    }
    // Outputs.
    match func.returns.as_deref() {
        None => unresolved(
            findings,
            src.at(&func.name),
            &name,
            None,
            format!(
                "step `{name}` has no return annotation; the checks take it as returning no event"
            ),
            format!(
                "annotate what `{name}` returns (`-> MyEvent`, `-> A | B`, `-> list[A]`, `-> None`)"
            ),
        ),
        Some(ret) => {
            let shape = return_shape(cx, file, ret);
            for why in &shape.unresolved {
                unresolved(
                    findings,
                    src.at(ret),
                    &name,
                    None,
                    format!(
                        "cannot read the return annotation `{}` of step `{name}`: {why}",
                        src.snippet(ret)
                    ),
                    "return event classes defined or imported in the package".into(),
                );
            }
            spec.outputs.extend(shape.single.iter().cloned());
            for t in &shape.listed {
                if !spec.outputs.contains(t) {
                    spec.outputs.push(t.clone());
                }
                spec.output_max.insert(t.clone(), OutputMax::Unbounded);
            }
            if shape.listed.len() > 1 {
                spec.returns_together.push(shape.listed.clone());
            }
        }
    }
    // Decorator options.
    let options = func
        .decorator_list
        .iter()
        .find_map(|d| match &d.expression {
            Expr::Call(c) if is_named_decorator(&d.expression, "step") => Some(c),
            _ => None,
        });
    if let Some(call) = options {
        for kw in call.arguments.keywords.iter() {
            let Some(arg) = kw.arg.as_ref().map(|a| a.as_str()) else {
                continue;
            };
            let at = src.at(&kw.value);
            match arg {
                "max_executions_per_run" => match &kw.value {
                    Expr::NoneLiteral(_) => {}
                    v => match crate::package::int_literal(v).or(match pkg.resolve(file, v) {
                        Sym::Int(n) => Some(n),
                        _ => None,
                    }) {
                        Some(n) => spec.max_executions_per_run = Some(n),
                        None => unresolved(
                            findings,
                            at,
                            &name,
                            None,
                            format!(
                                "cannot read `max_executions_per_run={}` of step `{name}`; the checks take the step as unlimited",
                                src.snippet(v)
                            ),
                            "write the limit as a number or a module-level constant".into(),
                        ),
                    },
                },
                "stop_on_error" => match &kw.value {
                    Expr::BooleanLiteral(b) => spec.stop_on_error = b.value,
                    v => unresolved(
                        findings,
                        at,
                        &name,
                        None,
                        format!(
                            "cannot read `stop_on_error={}` of step `{name}`; the checks take the default (True)",
                            src.snippet(v)
                        ),
                        "write `stop_on_error=True` or `stop_on_error=False`".into(),
                    ),
                },
                "precondition" => {
                    source.has_precondition = true;
                    source.precondition_location = Some(at.clone());
                    spec.precondition = Some(read_precondition(
                        cx, findings, file, owner, &kw.value, &name, at,
                    ));
                }
                _ => {}
            }
        }
    }
    (spec, source)
}

/// The precondition given to a step: its name and the event types its parameters read.
fn read_precondition(
    cx: &mut Classifier,
    findings: &mut Vec<LocatedFinding>,
    file: usize,
    owner: &StmtClassDef,
    value: &Expr,
    step: &str,
    at: Location,
) -> PreconditionSpec {
    let pkg = cx.pkg;
    let mut spec = PreconditionSpec {
        name: crate::annotation::dotted(value).unwrap_or_else(|| "<lambda>".into()),
        reads: Vec::new(),
        when: None,
    };
    let bindable_fix = "decorate the predicate with `@precondition()` and make it `async def`; annotate each parameter with an event type the step takes";
    if let Expr::Lambda(_) = value {
        findings.push(LocatedFinding {
            finding: rules::finding(
                &PRECONDITION_UNBOUND,
                Some(step),
                None,
                format!("the precondition of step `{step}` is a lambda"),
                "R5: the Python dispatcher awaits the predicate and binds event parameters only for `@precondition()`-decorated async functions; a lambda fails with a TypeError when awaited, so the step never runs",
                bindable_fix.into(),
            ),
            location: at,
        });
        return spec;
    }
    // A function of the class body, else a module-level one.
    let name = match value {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => Some(a.attr.as_str()),
        _ => None,
    };
    let in_class = name.and_then(|n| {
        owner.body.iter().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.as_str() == n => Some((file, f)),
            _ => None,
        })
    });
    let func = in_class.or_else(|| match pkg.resolve(file, value) {
        Sym::Function(ff, i) => pkg.function(ff, i).map(|f| (ff, f)),
        _ => None,
    });
    let Some((pf, func)) = func else {
        unresolved(
            findings,
            at,
            step,
            None,
            format!(
                "cannot find the precondition `{}` of step `{step}` in the package; the checks take it as reading nothing",
                spec.name
            ),
            "define the predicate in the agent's package (module level or in the class body)"
                .into(),
        );
        return spec;
    };
    let decorated = func
        .decorator_list
        .iter()
        .any(|d| is_named_decorator(&d.expression, "precondition"));
    let mut has_event_param = false;
    for p in func
        .parameters
        .posonlyargs
        .iter()
        .chain(&func.parameters.args)
        .chain(&func.parameters.kwonlyargs)
    {
        let Some(ann) = p.parameter.annotation.as_deref() else {
            continue;
        };
        match param_shape(cx, pf, ann) {
            ParamShape::Event { types, .. } => {
                has_event_param = true;
                for t in types {
                    if !spec.reads.contains(&t) {
                        spec.reads.push(t);
                    }
                }
            }
            ParamShape::Unresolved(why) => unresolved(
                findings,
                pkg.files[pf].at(ann),
                step,
                Some(p.parameter.name.as_str()),
                format!(
                    "cannot read the annotation of `{}` in precondition `{}`: {why}",
                    p.parameter.name, spec.name
                ),
                "annotate it with an event type the step takes".into(),
            ),
            ParamShape::NotEvent(TypeClass::Plain) if p.default.is_none() => not_injectable(
                findings,
                pkg.files[pf].at(ann),
                step,
                p.parameter.name.as_str(),
                &pkg.files[pf].snippet(ann),
                "precondition",
            ),
            ParamShape::NotEvent(_) => {}
        }
    }
    let loc = pkg.files[pf].at(&func.name);
    if has_event_param && !decorated {
        findings.push(LocatedFinding {
            finding: rules::finding(
                &PRECONDITION_UNBOUND,
                Some(step),
                None,
                format!(
                    "precondition `{}` of step `{step}` takes events but is not decorated with `@precondition()`",
                    spec.name
                ),
                "R5: the Python dispatcher binds a predicate's event parameters only when `@precondition()` recorded them; undecorated, they are never passed, the call fails and the step never runs",
                bindable_fix.into(),
            ),
            location: loc,
        });
    } else if !func.is_async {
        findings.push(LocatedFinding {
            finding: rules::finding(
                &PRECONDITION_UNBOUND,
                Some(step),
                None,
                format!("precondition `{}` of step `{step}` is not `async`", spec.name),
                "R5: the Python dispatcher awaits the predicate; awaiting a plain function's bool raises a TypeError, which aborts the evaluation of this and the later candidate steps",
                bindable_fix.into(),
            ),
            location: loc,
        });
    }
    spec
}

/// Where each spec finding points: a parameter, a step (its precondition for
/// precondition findings), else the class.
pub fn locate(agent: &AgentSource, f: Finding) -> LocatedFinding {
    let step = f
        .step
        .as_deref()
        .and_then(|s| agent.steps.iter().find(|(spec, _)| spec.name == s));
    let location = match step {
        None => agent.location.clone(),
        Some((_, src)) => {
            let by_param = f
                .param
                .as_deref()
                .and_then(|p| src.params.iter().find(|x| x.name == p))
                .map(|p| p.location.clone());
            let by_precondition = if f.rule.starts_with("precondition") {
                src.precondition_location.clone()
            } else {
                None
            };
            by_param
                .or(by_precondition)
                .unwrap_or_else(|| src.location.clone())
        }
    };
    LocatedFinding {
        finding: f,
        location,
    }
}

/// The names of a step's optional event parameters and of its config parameters.
pub fn optional_and_config_params(src: &StepSource) -> (Vec<String>, Vec<String>) {
    let mut optional = Vec::new();
    let mut config = Vec::new();
    for p in &src.params {
        match &p.shape {
            ParamShape::Event {
                kind: ParamKind::Optional,
                ..
            } => optional.push(p.name.clone()),
            ParamShape::NotEvent(TypeClass::Config) => config.push(p.name.clone()),
            _ => {}
        }
    }
    (optional, config)
}
