//! What a class is, for the analysis: an event type (with its event parents), an agent, a
//! config, an injectable the dispatcher provides, a plain value type, or something saap
//! cannot follow (with the reason, which becomes a finding — never a guess).
//!
//! Package classes are classified through their bases, across files; names from outside the
//! package are classified by name: the protocol's built-in event hierarchy, the Python SDK's
//! `Agent`, config bases and dependency-injection table (seed 000, "DI-injectable types").

use crate::package::{Package, Sym};
use saap_protocol::hierarchy::Hierarchy;
use std::collections::HashMap;

/// Types the Python dispatcher injects by annotation (seed 000's DI table, reference notes
/// §3.7). A parameter of one of these is not an event parameter.
pub const INJECTABLES: &[&str] = &[
    "RunContext",
    "ThreadContext",
    "EventDisplayer",
    "LocaleHandler",
    "AgentLocaleHandler",
    "AgentMemory",
    "AgentInstanceTopic",
    "AgentClassTopic",
    "PartialAgentTopic",
    "UserIdentity",
    "AccessChecker",
    "Redis",
    "type",
];

/// Config bases of the Python SDK.
pub const CONFIG_BASES: &[&str] = &["AgentConfig", "StepConfig", "Form"];

/// Value types and typing helpers that are never events.
const PLAIN: &[&str] = &[
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "dict",
    "set",
    "tuple",
    "object",
    "Any",
    "None",
    "BaseModel",
    "Generic",
    "ABC",
    "Protocol",
    "Self",
    "Enum",
    "StrEnum",
    "IntEnum",
    "TypedDict",
    "NamedTuple",
    "Dict",
    "Set",
    "Tuple",
    "Literal",
];

/// The kind of a type name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeClass {
    /// An event type, by its wire name (the class name).
    Event(String),
    Agent,
    Config,
    Injectable,
    Plain,
    /// Cannot be followed; the text says why.
    Unknown(String),
}

/// Classifies package classes (memoised) and outside names.
pub struct Classifier<'p> {
    pub pkg: &'p Package,
    builtin: Hierarchy,
    memo: HashMap<(usize, usize), TypeClass>,
}

impl<'p> Classifier<'p> {
    pub fn new(pkg: &'p Package) -> Classifier<'p> {
        Classifier {
            pkg,
            builtin: Hierarchy::builtin(),
            memo: HashMap::new(),
        }
    }

    /// Whether `name` is a built-in event type of the protocol.
    pub fn is_builtin_event(&self, name: &str) -> bool {
        self.builtin.contains(name)
    }

    /// What the symbol denotes as a type; `shown` is how the source wrote it.
    pub fn classify(&mut self, sym: &Sym, shown: &str) -> TypeClass {
        self.classify_depth(sym, shown, 0)
    }

    fn classify_depth(&mut self, sym: &Sym, shown: &str, depth: usize) -> TypeClass {
        match sym {
            Sym::Class(f, i) => self.class(*f, *i, depth),
            Sym::External { name, module } => self.by_name(name, module),
            Sym::Function(..) => TypeClass::Unknown(format!("`{shown}` is a function, not a type")),
            Sym::Int(_) => TypeClass::Unknown(format!("`{shown}` is a number, not a type")),
            Sym::PackageModule(_) | Sym::ExternalModule(_) => {
                TypeClass::Unknown(format!("`{shown}` is a module, not a type"))
            }
            Sym::Unknown => TypeClass::Unknown(format!(
                "`{shown}` names nothing saap can find in the package"
            )),
        }
    }

    fn by_name(&self, name: &str, module: &str) -> TypeClass {
        if self.builtin.contains(name) {
            TypeClass::Event(name.to_string())
        } else if name == "Agent" {
            TypeClass::Agent
        } else if CONFIG_BASES.contains(&name) {
            TypeClass::Config
        } else if INJECTABLES.contains(&name) {
            TypeClass::Injectable
        } else if PLAIN.contains(&name) {
            TypeClass::Plain
        } else if module.is_empty() {
            TypeClass::Unknown(format!(
                "`{name}` is neither defined nor imported in this module, and is not a built-in event or injectable"
            ))
        } else {
            TypeClass::Unknown(format!(
                "`{name}` comes from `{module}`, outside the package, and is not a built-in event or injectable; check the package folder instead of the file"
            ))
        }
    }

    /// A package class, classified through its bases.
    pub fn class(&mut self, f: usize, i: usize, depth: usize) -> TypeClass {
        if let Some(c) = self.memo.get(&(f, i)) {
            return c.clone();
        }
        let Some(cls) = self.pkg.class(f, i) else {
            return TypeClass::Unknown("a class saap lost track of".into());
        };
        if depth > 32 {
            return TypeClass::Unknown(format!(
                "the bases of `{}` nest too deep to follow",
                cls.name
            ));
        }
        // Guards against a class that (through imports) derives from itself.
        self.memo.insert(
            (f, i),
            TypeClass::Unknown(format!("`{}` derives from itself", cls.name)),
        );
        let name = cls.name.to_string();
        let mut result = TypeClass::Plain;
        let mut unknown: Option<String> = None;
        let bases: Vec<_> = cls
            .arguments
            .as_ref()
            .map(|a| a.args.to_vec())
            .unwrap_or_default();
        for base in &bases {
            let base = strip_subscript(base);
            let sym = self.pkg.resolve(f, base);
            let shown = self.pkg.files[f].snippet(base);
            match self.classify_depth(&sym, &shown, depth + 1) {
                TypeClass::Event(_) => {
                    result = TypeClass::Event(name.clone());
                    break;
                }
                TypeClass::Agent => result = TypeClass::Agent,
                TypeClass::Config if result != TypeClass::Agent => result = TypeClass::Config,
                TypeClass::Unknown(why) => {
                    unknown.get_or_insert(why);
                }
                _ => {}
            }
        }
        if result == TypeClass::Plain
            && let Some(why) = unknown
        {
            result = TypeClass::Unknown(format!(
                "`{name}` derives from a base saap cannot follow: {why}"
            ));
        }
        self.memo.insert((f, i), result.clone());
        result
    }

    /// The direct event parents of an event class of the package, by name.
    pub fn event_parents(&mut self, f: usize, i: usize) -> Vec<String> {
        let Some(cls) = self.pkg.class(f, i) else {
            return Vec::new();
        };
        let bases: Vec<_> = cls
            .arguments
            .as_ref()
            .map(|a| a.args.to_vec())
            .unwrap_or_default();
        let mut parents = Vec::new();
        for base in &bases {
            let base = strip_subscript(base);
            let sym = self.pkg.resolve(f, base);
            let shown = self.pkg.files[f].snippet(base);
            if let TypeClass::Event(n) = self.classify(&sym, &shown) {
                parents.push(n);
            }
        }
        parents
    }
}

/// `Base[T]` → `Base` (generic bases such as `HumanInTheLoopResponseEvent[Request]`).
pub fn strip_subscript(e: &ruff_python_ast::Expr) -> &ruff_python_ast::Expr {
    match e {
        ruff_python_ast::Expr::Subscript(s) => &s.value,
        _ => e,
    }
}
