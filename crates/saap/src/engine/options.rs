//! What a user of the engine configures and gets back: [`EngineOptions`] and what opening
//! a store recovered ([`Recovery`]). Plain data: nothing here runs a run.

use super::error::EngineError;

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Largest outside event accepted, in bytes of JSON (default 1 MiB).
    pub max_event_bytes: usize,
    /// Run a step on the completing task when it is the only one that became ready, and on
    /// a current-thread runtime with the in-memory store let one driver poll a run's bodies
    /// in place (default true). With `false`, every execution runs on its own task.
    pub inline_single: bool,
    /// Keep ended runs in memory so that they can be inspected (default true). With
    /// `false`, a run leaves the engine's memory once it ended and no execution of it is
    /// running; the embedded store keeps them all. (`Engine::open` loads live runs only
    /// either way; [`Engine::stored_snapshot`] reads an ended one from the store.)
    pub keep_ended_runs: bool,
    /// With `keep_ended_runs: false`: the most bytes of an ended large run's tables (a
    /// fan-out of more than 256 events) the engine keeps for the next large run (default
    /// 16 MiB; 0 keeps none). Freed and made again, a 10,000-item fan-out's ~4 MB of
    /// tables go back to the system and are faulted in again by every such run; kept, an
    /// idle engine holds them.
    pub kept_table_bytes: usize,
    /// Export every run as an OpenTelemetry trace while it runs (DESIGN §9): a span per
    /// execution that runs here, child spans for the semantic events it returns, and the
    /// run's own span at its end, handed to this exporter's queue (spans are made on its
    /// thread; a full queue drops them and counts the drop, it never holds up a step).
    /// Default: none.
    #[cfg(feature = "otel")]
    pub telemetry: Option<saap_otel::Exporter>,
    /// How far ahead a step may set a timer ([`crate::Delayed`]); a completion with one due
    /// later fails the step with `SAAP-E011` (default 366 days).
    pub max_timer_horizon: std::time::Duration,
    /// How deep a tree of delegations may grow (a root run's children are 1 deep); a
    /// request that would start a run deeper fails its step with `SAAP-E014` (default 8:
    /// agents that delegate to each other in a cycle end there).
    pub max_delegation_depth: u32,
    /// How much one run's journal of effects (`StepCtx::effect`) may hold: once it holds
    /// this many records or bytes, a new call fails its step with `SAAP-E016` (default
    /// 5,000 records or 8 MiB).
    pub effect_limits: crate::backend::EffectLimits,
    /// The budget every run starts with (DESIGN §8; default: none). A run that spends it
    /// parks in `waiting_budget` — what it would run next is held, nothing is lost — until
    /// [`crate::Engine::resume`] grants more.
    pub run_budget: RunBudget,
}

/// How much a run may run before it waits for a person ([`EngineOptions::run_budget`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunBudget {
    /// The most executions the run may run (retries of one execution count once).
    pub max_executions: Option<u32>,
    /// The longest the run may run, from its start (wall-clock time: a run that waits
    /// spends it too). Executions running when it ends finish; later ones are held.
    pub max_wall_time: Option<std::time::Duration>,
    /// The most model tokens the run's executions may use (as `saap::llm` reports them, or
    /// a body with `StepCtx::report_usage`): counted as each execution completes; what runs
    /// after the budget is used up is held.
    pub max_tokens: Option<u64>,
    /// The most the run's model calls may cost, in the price table's currency (`Llm::
    /// with_prices`), counted like tokens.
    pub max_cost: Option<f64>,
}

impl RunBudget {
    /// No limit.
    pub fn is_unlimited(&self) -> bool {
        self.max_executions.is_none()
            && self.max_wall_time.is_none()
            && self.max_tokens.is_none()
            && self.max_cost.is_none()
    }

    /// The core's grant of this budget at the clock reading `now_ns` (none if unlimited).
    pub fn grant(&self, now_ns: u64) -> Option<saap_dispatch::run::budget::BudgetGrant> {
        (!self.is_unlimited()).then(|| saap_dispatch::run::budget::BudgetGrant {
            executions: self.max_executions,
            wall_ns: self.max_wall_time.map(duration_ns),
            tokens: self.max_tokens,
            cost_micros: self.max_cost.map(crate::context::cost_micros),
            now_ns,
        })
    }
}

/// A duration in nanoseconds, saturating.
pub(crate) fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_event_bytes: 1024 * 1024,
            inline_single: true,
            keep_ended_runs: true,
            kept_table_bytes: 16 << 20,
            #[cfg(feature = "otel")]
            telemetry: None,
            max_timer_horizon: std::time::Duration::from_secs(366 * 86_400),
            max_delegation_depth: 8,
            effect_limits: crate::backend::EffectLimits::default(),
            run_budget: RunBudget::default(),
        }
    }
}

/// What `Engine::open` found in the store.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Live runs rebuilt from their journals. (Ended runs are not loaded: they are read on
    /// demand, [`Engine::stored_snapshot`].)
    pub resumed_runs: usize,
    /// Executions that had started but not completed, now running again.
    pub retried_executions: usize,
    /// Child runs cancelled because their parent had ended and given them up while no
    /// process had both open (the parent's end was durable, the cancel it asked of the
    /// child was not).
    pub orphans_cancelled: usize,
    /// Runs that could not be rebuilt (they stay in the store untouched).
    pub failed: Vec<EngineError>,
}
