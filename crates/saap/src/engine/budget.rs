//! Run budgets in the engine (DESIGN §8, issue 21 §5): the budget a run starts with
//! ([`crate::EngineOptions::run_budget`], granted in the start event's journal entry) and
//! resuming a run whose budget is spent ([`crate::Engine::resume`], a journaled grant). The
//! core decides what is held, what a grant releases and what a resume grants;
//! this reads the clock, and says a refusal for a person. Must not
//! hold or release executions itself.

use super::apply::Input;
use super::error::EngineError;
use super::ids::unix_nanos;
use super::incoming::Incoming;
use super::options::duration_ns;
use super::shared::Shared;
use saap_dispatch::run::budget::BudgetGrant;
use std::sync::Arc;
use std::time::Duration;

/// More budget for a run that spent its own ([`crate::Engine::resume`]). A part left `None`
/// is granted again as the run first had it when that part is spent, and left as it is
/// otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Raise {
    /// This many more executions.
    pub executions: Option<u32>,
    /// This much more wall time, from now.
    pub time: Option<Duration>,
    /// This many more model tokens.
    pub tokens: Option<u64>,
    /// This much more model cost, in the price table's currency.
    pub cost: Option<f64>,
}

impl Raise {
    /// The amounts it names as the core's grant made at `now_ns` (a part left `None` is the
    /// core's to fill in: [`saap_dispatch::Run::resume_grant`]).
    pub fn grant(&self, now_ns: u64) -> BudgetGrant {
        BudgetGrant {
            executions: self.executions,
            wall_ns: self.time.map(duration_ns),
            tokens: self.tokens,
            cost_micros: self.cost.map(crate::context::cost_micros),
            now_ns,
        }
    }
}

/// What a resume did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumed {
    /// Held executions that now run.
    pub released: u32,
    /// The grant made: executions added, wall time added (nanoseconds), when.
    pub grant: BudgetGrant,
}

impl Shared {
    /// The input that starts a run with start event `ev`: with the engine's run budget when
    /// it has one.
    pub(super) fn start_input(&self, ev: Incoming) -> Input {
        match self.opts.run_budget.grant(unix_nanos()) {
            Some(budget) => Input::Start { ev, budget },
            None => Input::Append(ev),
        }
    }

    /// [`crate::Engine::resume`] (with `seen`: [`crate::Engine::resume_seen`]).
    pub(super) async fn resume_run(
        self: &Arc<Self>,
        run_id: &str,
        raise: Raise,
        seen: Option<u32>,
    ) -> Result<Resumed, EngineError> {
        if raise.executions == Some(0)
            || raise.time == Some(Duration::ZERO)
            || raise.tokens == Some(0)
            || raise.cost.is_some_and(|c| !(c.is_finite() && c > 0.0))
        {
            return Err(EngineError::BadRaise(
                "a raise must add something: at least one execution or token, some time, a cost above 0"
                    .into(),
            ));
        }
        let slot = self.slot_or_ended(run_id).await?;
        let named = raise.grant(unix_nanos());
        // The core decides the grant under the run's lock, and the grant is applied under
        // it too: two resumes of one pause cannot both grant.
        let (grant, applied) = {
            let mut st = slot.lock();
            let grant = st.run.resume_grant(named, seen).map_err(|refused| {
                EngineError::resume_refused(run_id, st.run.progress().as_str(), refused)
            })?;
            let bind = self.launch_bind();
            let applied = self.apply_in(&slot, &mut st, Input::Budget(grant), Vec::new(), bind)?;
            (grant, applied)
        };
        // What the grant started is what it released.
        let released = applied.started.len() as u32;
        self.launch(&slot, applied).await?;
        Ok(Resumed { released, grant })
    }
}
