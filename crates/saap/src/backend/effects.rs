//! Journaled effects as a store keeps them (DESIGN §8): what a step body's outside call
//! (`StepCtx::effect`) returned, under its content key, per run and execution. The store is
//! the one place that knows which recorded results an attempt has consumed, so clones of a
//! step's context, concurrent calls and a body re-run after a crash all agree.
//!
//! Plain data and the rules every store follows; the stores implement them, the context
//! calls them. Nothing here calls out or decides how a run goes on.

use serde::{Deserialize, Serialize};

/// Where an effect is called: which execution of which run, in which attempt (1 on the first
/// run, higher when the execution runs again after a crash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectAt {
    pub run_id: std::sync::Arc<str>,
    pub execution: u32,
    pub attempt: u32,
}

/// What [`super::Backend::effect_take`] found for a content key.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectTake {
    /// The oldest successful result recorded for this key in this execution that the attempt
    /// had not consumed yet; it is now consumed by the attempt.
    Recorded(serde_json::Value),
    /// None left: the caller calls out. The run's effect journal holds `entries` records of
    /// `bytes` bytes so far (what the journal caps are checked against).
    Fresh { entries: u64, bytes: u64 },
}

/// How an effect call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectOutcome {
    /// Its result, as JSON: returned again instead of calling out when the execution runs
    /// again.
    Ok(serde_json::Value),
    /// It failed with this message: kept as evidence, never returned again (a re-run calls
    /// out anew).
    Failed(String),
}

/// One journaled effect call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// Its place in the run's effect journal (0, 1, … in the order they were recorded).
    pub seq: u64,
    pub execution: u32,
    /// The attempt that called out.
    pub attempt: u32,
    /// The name the body gave the effect.
    pub name: String,
    /// The content key: the name and a digest of the canonical input.
    pub key: String,
    /// The input, as canonical JSON (object keys sorted).
    pub input: serde_json::Value,
    pub outcome: EffectOutcome,
    /// When the call returned (nanoseconds since the Unix epoch) and how long it took.
    pub at_ns: u64,
    pub took_ns: u64,
}

impl EffectRecord {
    /// The bytes it takes in the journal (input and outcome as JSON text), what the
    /// journal's size cap counts.
    pub fn size(&self) -> u64 {
        let outcome = match &self.outcome {
            EffectOutcome::Ok(v) => json_len(v),
            EffectOutcome::Failed(m) => m.len() as u64,
        };
        json_len(&self.input) + outcome
    }
}

/// An effect as a store that keeps whole records holds it (in memory, in a NATS value): the
/// record, the attempt that last consumed it, and its size (the journal cap's count).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeptEffect {
    pub record: EffectRecord,
    pub taken: u32,
    #[serde(default)]
    pub size: u64,
}

impl KeptEffect {
    /// A record just made by attempt `record.attempt` (which consumed it by making it).
    pub(crate) fn new(record: EffectRecord) -> KeptEffect {
        KeptEffect {
            taken: record.attempt,
            size: record.size(),
            record,
        }
    }
}

/// The rule of [`super::Backend::effect_take`] over the kept effects of one run: the oldest
/// successful record of `key` in `at`'s execution that `at`'s attempt has not consumed is
/// consumed and returned, else how full the journal is.
pub(crate) fn take_kept(kept: &mut [KeptEffect], at: &EffectAt, key: &str) -> EffectTake {
    let next = kept.iter_mut().find(|k| {
        k.record.execution == at.execution
            && k.record.key == key
            && k.taken < at.attempt
            && matches!(k.record.outcome, EffectOutcome::Ok(_))
    });
    if let Some(k) = next
        && let EffectOutcome::Ok(v) = &k.record.outcome
    {
        k.taken = at.attempt;
        return EffectTake::Recorded(v.clone());
    }
    EffectTake::Fresh {
        entries: kept.len() as u64,
        bytes: kept.iter().map(|k| k.size).sum(),
    }
}

/// The JSON text length of a value, counted as it is written (no text is made).
pub(crate) fn json_len(v: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, v) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// How much one run's effect journal may hold: once it holds `max_entries` records or
/// `max_bytes` bytes, no new call starts (the step fails with `SAAP-E016`). Recorded
/// results are always returned; a call that was made is always recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectLimits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

impl Default for EffectLimits {
    fn default() -> Self {
        EffectLimits {
            max_entries: 5_000,
            max_bytes: 8 << 20,
        }
    }
}
