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

/// What a replay's body gets for an effect call (`saap::replay`): what the recorded run
/// got, never a call out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Replayed {
    /// The recorded result.
    Ok(serde_json::Value),
    /// The call failed when the run was recorded, with this message.
    Failed(String),
    /// The recorded run made no such call here (the body now asks for something else).
    NotRecorded,
}

/// A recorded run's effect journal, served to its replay: each attempt of an execution gets
/// what it got when recorded — first the successful results earlier attempts recorded, then
/// the calls it made itself, failures included, first-in first-out per key (the rule of
/// [`take_kept`] seen from the recorded side).
#[derive(Debug, Default)]
pub(crate) struct RecordedEffects {
    records: Vec<EffectRecord>,
    /// Per record: the last attempt that consumed it in this replay (0: none).
    taken: Vec<u32>,
}

impl RecordedEffects {
    pub(crate) fn new(mut records: Vec<EffectRecord>) -> RecordedEffects {
        records.sort_by_key(|r| r.seq);
        RecordedEffects {
            taken: vec![0; records.len()],
            records,
        }
    }

    /// The next recorded outcome of `key` for `at`'s attempt.
    pub(crate) fn take(&mut self, at: &EffectAt, key: &str) -> Replayed {
        let next = self
            .records
            .iter()
            .zip(&self.taken)
            .position(|(r, &taken)| {
                r.execution == at.execution
                    && r.key == key
                    && taken < at.attempt
                    && (r.attempt == at.attempt
                        || (r.attempt < at.attempt && matches!(r.outcome, EffectOutcome::Ok(_))))
            });
        let Some(i) = next else {
            return Replayed::NotRecorded;
        };
        self.taken[i] = at.attempt;
        match &self.records[i].outcome {
            EffectOutcome::Ok(v) => Replayed::Ok(v.clone()),
            EffectOutcome::Failed(m) => Replayed::Failed(m.clone()),
        }
    }

    /// How many recorded outcomes the replay has served.
    pub(crate) fn served(&self) -> u64 {
        self.taken.iter().filter(|&&t| t > 0).count() as u64
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, attempt: u32, key: &str, outcome: EffectOutcome) -> EffectRecord {
        EffectRecord {
            seq,
            execution: 3,
            attempt,
            name: "llm".into(),
            key: key.into(),
            input: serde_json::Value::Null,
            outcome,
            at_ns: 0,
            took_ns: 0,
        }
    }

    fn at(attempt: u32) -> EffectAt {
        EffectAt {
            run_id: "r".into(),
            execution: 3,
            attempt,
        }
    }

    #[test]
    fn a_replayed_attempt_gets_what_it_got_when_recorded_failures_included() {
        let ok = |v: u64| EffectOutcome::Ok(serde_json::json!(v));
        let mut served = RecordedEffects::new(vec![
            rec(0, 1, "k", ok(1)),
            rec(1, 1, "k", EffectOutcome::Failed("HTTP 500".into())),
            rec(2, 2, "k", ok(2)),
            rec(3, 1, "other", ok(9)),
        ]);
        // Attempt 1: its own two calls, in order, then nothing more.
        assert_eq!(served.take(&at(1), "k"), Replayed::Ok(serde_json::json!(1)));
        assert_eq!(
            served.take(&at(1), "k"),
            Replayed::Failed("HTTP 500".into())
        );
        assert_eq!(served.take(&at(1), "k"), Replayed::NotRecorded);
        // Attempt 2: attempt 1's success first (its failure is never returned again),
        // then its own call.
        assert_eq!(served.take(&at(2), "k"), Replayed::Ok(serde_json::json!(1)));
        assert_eq!(served.take(&at(2), "k"), Replayed::Ok(serde_json::json!(2)));
        assert_eq!(served.take(&at(2), "k"), Replayed::NotRecorded);
        // Another execution recorded nothing.
        let elsewhere = EffectAt {
            execution: 4,
            ..at(1)
        };
        assert_eq!(served.take(&elsewhere, "other"), Replayed::NotRecorded);
        assert_eq!(served.served(), 3);
    }
}
