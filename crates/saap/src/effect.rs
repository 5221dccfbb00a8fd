//! Journaled effects (DESIGN §8, issue 21 §6): a step body's outside call — a model, a tool,
//! an HTTP POST — made through [`StepCtx::effect`] is recorded in the run's effect journal
//! under a content key (its name and a digest of its canonical input JSON). When the
//! execution runs again (after a crash, a killed worker), each call takes the recorded
//! results for its key first-in first-out instead of calling out again: the call is made
//! once per execution, whatever the interleaving of concurrent calls.
//!
//! ```
//! use saap::{Event, Required, Step, StepCtx, StepError, StopEvent, UserMessageEvent, Workflow};
//!
//! #[derive(Event, serde::Serialize, serde::Deserialize, Clone, Debug)]
//! #[event(parent = StopEvent)]
//! struct Answered { text: String }
//!
//! async fn answer(q: Required<UserMessageEvent>, ctx: StepCtx) -> Result<Answered, StepError> {
//!     // Recorded under ("shout", {"text": …}); a re-run of this execution gets the recorded
//!     // string back and does not call out again.
//!     let text: String = ctx
//!         .effect("shout", &serde_json::json!({ "text": q.message }), || async {
//!             Ok::<_, std::io::Error>(q.message.to_uppercase())
//!         })
//!         .await?;
//!     Ok(Answered { text })
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let wf = Workflow::builder("Shouter").step(Step::new("answer", answer)).build().unwrap();
//! let engine = saap::Engine::in_memory(wf);
//! let run = engine.run(UserMessageEvent::new("hi")).await.unwrap(); // to its end
//! let snap = engine.snapshot(&run).unwrap();
//! assert_eq!(snap.events_of::<Answered>()[0].text, "HI");
//! # }
//! ```
//!
//! Must not decide anything about the run: a failed or refused effect is the body's error,
//! which the body returns or handles like any other.

use crate::backend::effects::Replayed;
use crate::backend::{EffectAt, EffectOutcome, EffectRecord, EffectTake, StoreError};
use crate::context::{ContextError, StepCtx};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fmt::{Debug, Display};
use std::future::Future;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Why [`StepCtx::effect`] did not return a result. `E` is the call's own error.
#[derive(Debug, thiserror::Error)]
pub enum EffectError<E: Debug + Display> {
    /// The call failed (recorded as failed evidence; a re-run calls out again).
    #[error("effect `{name}` failed: {error}")]
    Failed { name: String, error: E },
    /// The run's effect journal is full: no new call starts.
    #[error(
        "SAAP-E016: run `{run_id}` recorded {entries} effects ({bytes} bytes), the most one run may ({max_entries} effects or {max_bytes} bytes); split the job: delegate parts of it to child runs (`AgentInTheLoopRequestEvent`) or start a new run per part, or raise the engine option `effect_limits`"
    )]
    JournalFull {
        run_id: String,
        entries: u64,
        bytes: u64,
        max_entries: u64,
        max_bytes: u64,
    },
    /// The recorded result no longer decodes as the type asked for (the body changed since).
    #[error(
        "SAAP-E017: the recorded result of effect `{name}` does not decode as the type this body asks for ({message}); the body changed since the run recorded it: ask for the recorded type, or give the effect a new name so that it is called anew"
    )]
    Recorded { name: String, message: String },
    /// The input or the result cannot be written as JSON.
    #[error(
        "SAAP-E018: the {what} of effect `{name}` cannot be written as JSON ({message}); an effect's input and result must serialize to JSON (no maps with non-string keys, no NaN)"
    )]
    Json {
        name: String,
        what: &'static str,
        message: String,
    },
    /// The journal could not be read or written (the result of a call that was made is then
    /// not recorded: a re-run calls out again).
    #[error("the effect journal failed for effect `{name}`: {error}")]
    Store { name: String, error: StoreError },
    /// The run or its engine is gone.
    #[error(transparent)]
    Context(#[from] ContextError),
    /// In a replay: the call failed when the run was recorded (the recorded message; a
    /// replay never calls out). Says what [`EffectError::Failed`] said then.
    #[error("effect `{name}` failed: {message}")]
    FailedWhenRecorded { name: String, message: String },
    /// In a replay: the recorded run made no such call in this execution — the body now
    /// calls with another input, or more often, than when the run was recorded.
    #[error(
        "SAAP-E023: effect `{name}` was not called with this input by this execution when the run was recorded, and a replay never calls out; the body now asks for something the recorded run did not (its code or its inputs changed): the replay diverges here"
    )]
    NotRecorded { name: String },
}

impl StepCtx {
    /// Calls out once per execution: runs `call` and records its result in the run's
    /// effect journal under the content key (`name`, canonical JSON of `input`), durably
    /// before returning it. When this execution runs again (a crash, a lost worker), the
    /// recorded results for the key are returned first-in first-out instead of calling
    /// again; a result that failed is kept as evidence but called anew. The result returned
    /// is always the recorded JSON decoded as `T`, on the first run as on a re-run.
    ///
    /// The window between the call returning and its record being durable remains: a crash
    /// inside it makes the call again (at-least-once, narrowed to that window).
    ///
    /// Errors: [`EffectError::Failed`] (the call's own error), `SAAP-E016` (the run's
    /// journal is full, [`crate::EngineOptions::effect_limits`]), `SAAP-E017` (a recorded
    /// result of another type), `SAAP-E018` (not JSON), a store failure.
    pub async fn effect<I, T, E, F, Fut>(
        &self,
        name: &str,
        input: &I,
        call: F,
    ) -> Result<T, EffectError<E>>
    where
        I: Serialize + ?Sized,
        T: Serialize + DeserializeOwned,
        E: Debug + Display,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let json = |what, e: serde_json::Error| EffectError::Json {
            name: name.to_string(),
            what,
            message: e.to_string(),
        };
        let store = |error| EffectError::Store {
            name: name.to_string(),
            error,
        };
        let decode = |v: &serde_json::Value| {
            T::deserialize(v).map_err(|e| EffectError::Recorded {
                name: name.to_string(),
                message: e.to_string(),
            })
        };
        let mut input = serde_json::to_value(input).map_err(|e| json("input", e))?;
        input.sort_all_objects();
        let key = content_key(name, &input);
        let host = self.run.host()?;
        let backend = host.backend();
        let at = EffectAt {
            run_id: self.run_id().into(),
            execution: self.execution.0,
            attempt: self.attempt,
        };
        if let Some(served) = host.replayed_effect(&at, &key) {
            let name = name.to_string();
            return match served {
                Replayed::Ok(v) => decode(&v),
                Replayed::Failed(message) => Err(EffectError::FailedWhenRecorded { name, message }),
                Replayed::NotRecorded => Err(EffectError::NotRecorded { name }),
            };
        }
        match backend.effect_take(&at, &key).wait().await.map_err(store)? {
            EffectTake::Recorded(v) => return decode(&v),
            EffectTake::Fresh { entries, bytes } => {
                let limits = host.effect_limits();
                if entries >= limits.max_entries || bytes >= limits.max_bytes {
                    return Err(EffectError::JournalFull {
                        run_id: at.run_id.to_string(),
                        entries,
                        bytes,
                        max_entries: limits.max_entries,
                        max_bytes: limits.max_bytes,
                    });
                }
            }
        }
        let started = Instant::now();
        let result = call().await;
        let took_ns = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        // The answer is the recorded JSON decoded (as a re-run gets it), made before the
        // record takes the JSON.
        let (outcome, answer) = match result {
            Ok(v) => match serde_json::to_value(&v) {
                Ok(v) => {
                    let decoded = decode(&v);
                    (EffectOutcome::Ok(v), decoded)
                }
                Err(e) => (EffectOutcome::Failed(e.to_string()), Err(json("result", e))),
            },
            Err(error) => (
                EffectOutcome::Failed(error.to_string()),
                Err(EffectError::Failed {
                    name: name.to_string(),
                    error,
                }),
            ),
        };
        let record = EffectRecord {
            seq: 0,
            execution: at.execution,
            attempt: at.attempt,
            name: name.to_string(),
            key,
            input,
            outcome,
            at_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
            took_ns,
        };
        backend
            .effect_record(&at.run_id, record)
            .wait()
            .await
            .map_err(store)?;
        answer
    }
}

/// The content key of an effect: its name and the first 128 bits of the SHA-256 of its
/// canonical input JSON (keys sorted), in hex. Stable across builds and versions (no std
/// hasher), short whatever the input's size.
pub(crate) fn content_key(name: &str, canonical_input: &serde_json::Value) -> String {
    let digest = Sha256::digest(canonical_input.to_string().as_bytes());
    let mut key = String::with_capacity(name.len() + 33);
    key.push_str(name);
    key.push('|');
    for b in &digest[..16] {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_key_ignores_the_order_of_object_keys_and_names_the_effect() {
        let mut a = serde_json::json!({"b": 1, "a": {"y": [1, 2], "x": null}});
        let mut b = serde_json::json!({"a": {"x": null, "y": [1, 2]}, "b": 1});
        a.sort_all_objects();
        b.sort_all_objects();
        assert_eq!(content_key("llm", &a), content_key("llm", &b));
        assert_ne!(content_key("llm", &a), content_key("tool", &a));
        assert!(content_key("llm", &a).starts_with("llm|"));
        assert_eq!(content_key("llm", &a).len(), "llm|".len() + 32);
        let c = serde_json::json!({"a": {"x": null, "y": [2, 1]}, "b": 1});
        assert_ne!(content_key("llm", &a), content_key("llm", &c));
    }
}
