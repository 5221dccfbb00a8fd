//! Run budgets in the engine (DESIGN §8, issue 21 §5): the budget a run starts with
//! ([`crate::EngineOptions::run_budget`], granted in the start event's journal entry) and
//! resuming a run whose budget is spent ([`crate::Engine::resume`], a journaled grant). The
//! core decides what is held and what a grant releases; this builds the grants. Must not
//! hold or release executions itself.

use super::apply::Input;
use super::error::EngineError;
use super::ids::unix_nanos;
use super::incoming::Incoming;
use super::options::duration_ns;
use super::shared::Shared;
use saap_dispatch::Run;
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

    /// [`crate::Engine::resume`].
    pub(super) async fn resume_run(
        self: &Arc<Self>,
        run_id: &str,
        raise: Raise,
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
        let grant = resume_grant(&slot.lock().run, slot.run_id(), raise)?;
        let applied = self.apply_to_launch(&slot, Input::Budget(grant))?;
        // What the grant started is what it released.
        let released = applied.started.len() as u32;
        self.launch(&slot, applied).await?;
        Ok(Resumed { released, grant })
    }
}

/// The grant that resumes `run`: what `raise` says, and each spent part it does not name
/// granted again as the run first had it. Refused for a run that is not paused on its budget.
fn resume_grant(run: &Run, run_id: &str, raise: Raise) -> Result<BudgetGrant, EngineError> {
    let state = run.progress().as_str().to_string();
    let not_paused = |hint: &str| EngineError::NotPaused {
        run_id: run_id.to_string(),
        state: state.clone(),
        hint: hint.to_string(),
    };
    if run.is_terminated() {
        return Err(not_paused(
            "it has ended, so nothing of it can run again: start a new run",
        ));
    }
    let Some(budget) = run.budget().filter(|_| run.budget_spent()) else {
        return Err(not_paused(
            "nothing is held for its budget, so there is nothing to resume (a run that waits for an event goes on when it gets one: `send`)",
        ));
    };
    let executions_spent = budget
        .max_executions
        .is_some_and(|max| run.executions().len() as u32 > max);
    let executions = raise.executions.or(if executions_spent {
        budget.first.executions
    } else {
        None
    });
    let wall_ns = raise.time.map(duration_ns).or(if budget.wall_spent {
        budget.first.wall_ns
    } else {
        None
    });
    if executions_spent && executions.is_none() {
        return Err(EngineError::BadRaise(
            "the run spent its executions and started with no executions budget to grant again: say how many more (`--raise executions=N`, `Raise::executions`)".into(),
        ));
    }
    if budget.wall_spent && wall_ns.is_none() {
        return Err(EngineError::BadRaise(
            "the run's wall time ended and it started with no time budget to grant again: say how much more (`--raise time=30m`, `Raise::time`)".into(),
        ));
    }
    let tokens_spent = budget.tokens.held_from.is_some();
    let tokens = raise.tokens.or(if tokens_spent {
        budget.first.tokens
    } else {
        None
    });
    let cost_spent = budget.cost_micros.held_from.is_some();
    let cost_micros = raise
        .cost
        .map(crate::context::cost_micros)
        .or(if cost_spent {
            budget.first.cost_micros
        } else {
            None
        });
    if tokens_spent && tokens.is_none() {
        return Err(EngineError::BadRaise(
            "the run used up its tokens and started with no token budget to grant again: say how many more (`--raise tokens=N`, `Raise::tokens`)".into(),
        ));
    }
    if cost_spent && cost_micros.is_none() {
        return Err(EngineError::BadRaise(
            "the run's model calls reached their cost and it started with no cost budget to grant again: say how much more (`--raise cost=2.50`, `Raise::cost`)".into(),
        ));
    }
    Ok(BudgetGrant {
        executions,
        wall_ns,
        tokens,
        cost_micros,
        now_ns: unix_nanos(),
    })
}
