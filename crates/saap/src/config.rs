//! Typed configuration injected into steps: the agent's config ([`Config<C>`]) and a step's
//! own config ([`StepConfig<S>`]).
//!
//! A run's config travels with its start event, in the reserved field `_config` (a JSON
//! object), so it is journaled with the run and a resumed run sees the same values:
//!
//! ```json
//! {"_event_name": "UserMessageEvent", "message": "hi",
//!  "_config": {"top_k": 3, "steps": {"answer": {"style": "short"}}}}
//! ```
//!
//! The agent config is `_config` merged over `C::default()` (objects merge key by key, the
//! submitted value wins, anything else is replaced); a step config is
//! `_config.steps.<step name>` merged over `S::default()`. Both are checked when the run
//! starts ([`AgentConfig::validate`] and deserialization): a start event whose config does
//! not fit is refused with `SAAP-C001`/`SAAP-C002` before the run exists. A config that
//! still fails inside a step (a type the workflow did not declare) fails that execution,
//! which ends the run with an ExceptionEvent naming the problem.
//!
//! ```
//! use saap::config::{AgentConfig, Config};
//! #[derive(Default, serde::Serialize, serde::Deserialize)]
//! struct RagConfig { top_k: usize }
//! impl AgentConfig for RagConfig {
//!     fn validate(&self) -> Result<(), String> {
//!         if self.top_k == 0 { return Err("top_k must be at least 1".into()); }
//!         Ok(())
//!     }
//! }
//! ```

use crate::event::Payload;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::ops::Deref;
use std::sync::Arc;

/// The reserved start-event field that carries the run's config.
pub const CONFIG_FIELD: &str = "_config";

/// A config type: plain data with defaults, and an optional check of its values.
pub trait AgentConfig: Serialize + DeserializeOwned + Default + Send + Sync + 'static {
    /// Checks the values (ranges, names); an error says what is wrong and what to write.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Why a run's config was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "SAAP-C001: the agent configuration is invalid: {message}; fix `{CONFIG_FIELD}` in the start event (fields of `{config}`)"
    )]
    Agent { config: String, message: String },
    #[error(
        "SAAP-C002: the configuration of step `{step}` is invalid: {message}; fix `{CONFIG_FIELD}.steps.{step}` in the start event (fields of `{config}`)"
    )]
    Step {
        step: String,
        config: String,
        message: String,
    },
}

impl ConfigError {
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::Agent { .. } => "SAAP-C001",
            ConfigError::Step { .. } => "SAAP-C002",
        }
    }
}

/// The agent's config, injected into a step by its type: `cfg: Config<RagConfig>`.
#[derive(Debug, Clone)]
pub struct Config<C>(Arc<C>);

impl<C> Deref for Config<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C> Config<C> {
    pub fn new(value: C) -> Config<C> {
        Config(Arc::new(value))
    }
}

/// A step's own config (`_config.steps.<step>`), injected by type: `s: StepConfig<Style>`.
#[derive(Debug, Clone)]
pub struct StepConfig<S>(Arc<S>);

impl<S> Deref for StepConfig<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

impl<S> StepConfig<S> {
    pub fn new(value: S) -> StepConfig<S> {
        StepConfig(Arc::new(value))
    }
}

/// Merges `over` into `base`: objects key by key (recursively), anything else replaced.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

pub(crate) fn short_type<T>() -> String {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full).to_string()
}

fn typed<C: AgentConfig>(submitted: Option<&Value>) -> Result<C, String> {
    let mut value = serde_json::to_value(C::default())
        .map_err(|e| format!("its defaults cannot be encoded: {e}"))?;
    if let Some(s) = submitted {
        if !s.is_object() {
            return Err(format!("expected a JSON object, got `{s}`"));
        }
        merge(&mut value, s);
    }
    let c: C = serde_json::from_value(value).map_err(|e| e.to_string())?;
    c.validate()?;
    Ok(c)
}

/// The agent config of a run, from its start event's fields.
pub fn agent_config<C: AgentConfig>(start_fields: &Value) -> Result<C, ConfigError> {
    typed(start_fields.get(CONFIG_FIELD)).map_err(|message| ConfigError::Agent {
        config: short_type::<C>(),
        message,
    })
}

/// A step's config of a run, from its start event's fields.
pub fn step_config<S: AgentConfig>(start_fields: &Value, step: &str) -> Result<S, ConfigError> {
    let submitted = start_fields
        .get(CONFIG_FIELD)
        .and_then(|c| c.get("steps"))
        .and_then(|s| s.get(step));
    typed(submitted).map_err(|message| ConfigError::Step {
        step: step.to_string(),
        config: short_type::<S>(),
        message,
    })
}

/// A check of a start event's fields, registered by the steps that inject a config.
pub(crate) type ConfigCheck = Arc<dyn Fn(&Value) -> Result<(), ConfigError> + Send + Sync>;

pub(crate) fn agent_check<C: AgentConfig>() -> ConfigCheck {
    Arc::new(|fields| agent_config::<C>(fields).map(|_| ()))
}

pub(crate) fn step_check<S: AgentConfig>(step: String) -> ConfigCheck {
    Arc::new(move |fields| step_config::<S>(fields, &step).map(|_| ()))
}

/// The fields of the event that started `run`: from the stored payloads, or from the
/// events being applied (the start event itself, on the run's first input).
pub(crate) fn start_payload(
    run: &saap_dispatch::Run,
    payloads: &[Payload],
    pending: &[(saap_dispatch::EventId, Payload)],
) -> Payload {
    run.start_seq()
        .and_then(|s| {
            payloads.get(s as usize).cloned().or_else(|| {
                let id = run.log().get(s as usize)?.id;
                pending
                    .iter()
                    .find(|(i, _)| *i == id)
                    .map(|(_, p)| p.clone())
            })
        })
        .unwrap_or_else(|| Payload::from_json(Value::Null))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[derive(Debug, Default, PartialEq, Serialize, serde::Deserialize)]
    struct Rag {
        top_k: usize,
        model: String,
        #[serde(default)]
        extra: Option<Value>,
    }
    impl AgentConfig for Rag {
        fn validate(&self) -> Result<(), String> {
            if self.top_k > 10 {
                return Err(format!("top_k is {}, at most 10 are allowed", self.top_k));
            }
            Ok(())
        }
    }

    #[test]
    fn submitted_values_are_merged_over_the_defaults() {
        let c: Rag = agent_config(&json!({"_config": {"top_k": 3}})).unwrap();
        assert_eq!(c.top_k, 3);
        assert_eq!(c.model, "");
        let none: Rag = agent_config(&json!({"message": "hi"})).unwrap();
        assert_eq!(none, Rag::default());
    }

    #[test]
    fn merge_is_recursive_and_the_submitted_value_wins() {
        let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        merge(&mut base, &json!({"a": {"c": [3]}, "e": 2}));
        assert_eq!(base, json!({"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}));
    }

    #[test]
    fn a_config_of_the_wrong_shape_or_values_is_refused_with_what_to_fix() {
        let e = agent_config::<Rag>(&json!({"_config": {"top_k": "three"}})).unwrap_err();
        assert_eq!(e.code(), "SAAP-C001");
        assert!(e.to_string().contains("invalid type"), "{e}");
        assert!(e.to_string().contains("fields of `Rag`"), "{e}");
        let e = agent_config::<Rag>(&json!({"_config": {"top_k": 11}})).unwrap_err();
        assert!(e.to_string().contains("at most 10"), "{e}");
        let e = agent_config::<Rag>(&json!({"_config": 5})).unwrap_err();
        assert!(e.to_string().contains("expected a JSON object"), "{e}");
    }

    #[test]
    fn a_step_config_is_read_from_its_step_entry() {
        let fields = json!({"_config": {"steps": {"answer": {"top_k": 2}}}});
        let s: Rag = step_config(&fields, "answer").unwrap();
        assert_eq!(s.top_k, 2);
        let other: Rag = step_config(&fields, "plan").unwrap();
        assert_eq!(other.top_k, 0);
        let bad = json!({"_config": {"steps": {"answer": {"top_k": 12}}}});
        let e = step_config::<Rag>(&bad, "answer").unwrap_err();
        assert_eq!(e.code(), "SAAP-C002");
        assert!(e.to_string().contains("_config.steps.answer"), "{e}");
    }
}
