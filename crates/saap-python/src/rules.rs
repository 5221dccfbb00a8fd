//! The findings only Python source shows (codes `SAAP101`…), beside the spec checks of
//! `saap-dispatch` (`SAAP001`…) that run on the spec built from the source.
//!
//! [`RULES`] is the one list of these codes; `docs/checks.md` explains each. This module
//! only defines them and builds findings; the analyses live in their own modules.

use saap_dispatch::check::{Finding, Rule, Severity, rule};

pub const CONTEXT_SMUGGLE: Rule = rule(
    "SAAP101",
    Severity::Error,
    "context-smuggle",
    "state kept on `self` between steps",
);
pub const CONFIG_LIE: Rule = rule(
    "SAAP102",
    Severity::Error,
    "config-lie",
    "step body checks the config to decide whether an optional input should have arrived",
);
pub const FORM_MISMATCH: Rule = rule(
    "SAAP103",
    Severity::Error,
    "config-form-mismatch",
    "as_form() gives a config field a form element its annotation does not allow",
);
pub const PRECONDITION_UNBOUND: Rule = rule(
    "SAAP104",
    Severity::Warning,
    "precondition-not-bindable",
    "precondition that the dispatcher cannot call with its event parameters",
);
pub const FIRE_AND_FORGET: Rule = rule(
    "SAAP105",
    Severity::Warning,
    "fire-and-forget",
    "step starts a background task that can publish after the run stopped",
);
pub const STEPS_OUTSIDE_AGENT: Rule = rule(
    "SAAP106",
    Severity::Warning,
    "steps-outside-agent",
    "class with `@step` methods that does not derive from `Agent`",
);
pub const UNRESOLVED: Rule = rule(
    "SAAP107",
    Severity::Warning,
    "unresolved-annotation",
    "annotation or option saap cannot follow (left out of the checks)",
);
pub const SPEC_INVALID: Rule = rule(
    "SAAP108",
    Severity::Error,
    "agent-not-representable",
    "the agent's event types or steps do not form a valid workflow",
);

pub const NOT_INJECTABLE: Rule = rule(
    "SAAP109",
    Severity::Error,
    "not-injectable",
    "parameter that is neither an event nor something the dispatcher injects, without a default",
);

/// Every source-only check, in code order.
pub const RULES: &[Rule] = &[
    CONTEXT_SMUGGLE,
    CONFIG_LIE,
    FORM_MISMATCH,
    PRECONDITION_UNBOUND,
    FIRE_AND_FORGET,
    STEPS_OUTSIDE_AGENT,
    UNRESOLVED,
    SPEC_INVALID,
    NOT_INJECTABLE,
];

/// A finding of one of [`RULES`].
pub fn finding(
    rule: &Rule,
    step: Option<&str>,
    param: Option<&str>,
    message: String,
    why: &str,
    fix: String,
) -> Finding {
    Finding {
        code: rule.code,
        severity: rule.severity,
        rule: rule.rule,
        step: step.map(str::to_string),
        param: param.map(str::to_string),
        message,
        why: why.to_string(),
        fix,
    }
}
