//! Run budgets (DESIGN §8): how many executions a run may run and until when. A budget is
//! granted by an input ([`Run::grant`], journaled: at the start with the start event, later
//! by a person resuming the run); once it is spent the run parks in `waiting: budget`.
//!
//! Parking never changes a decision: executions are still started as R1–R6 decide (their
//! records, counts and input sets are the same as without a budget), but those past the
//! budget are *held* — the engine is not handed them ([`Run::next_started`] and the other
//! take functions stop at the first held one) until a grant releases them. Executions are
//! numbered in start order, so the held ones are always a tail: everything from
//! `held_from` on. An executions budget spends when an execution past it is started; a
//! wall-time budget spends when a clock reading reaches its end (the engine is asked to
//! come back then through [`Run::next_due`]): executions already running finish, new ones
//! are held. Must not read a clock: time comes in with the grant and the clock inputs.

pub use super::{Budget, BudgetGrant, Meter};
use super::{ExecState, Run, push_record, waits};
use crate::ids::ExecutionId;
use crate::record::{BudgetLimit, Record};

/// Why [`Run::grant`] refused a grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("the run has ended: a budget cannot be granted to it")]
    RunEnded,
    #[error("a grant must give more executions, time, tokens or cost (it gave none)")]
    Empty,
}

/// A part of a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetPart {
    Executions,
    WallTime,
    Tokens,
    Cost,
}

/// Why [`Run::resume_grant`] has no grant for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeRefused {
    /// The run has ended.
    Ended,
    /// Its budget is not spent: nothing waits for a grant.
    NotSpent,
    /// This part is spent, the resume names no amount for it, and the run's first grant had
    /// none to give again.
    NoAmount(BudgetPart),
    /// The resume was asked of the run as it stood after `seen` grants, and it has had
    /// `grants` since: someone resumed it meanwhile (or this resume was delivered twice).
    Superseded { seen: u32, grants: u32 },
}

/// The amount a resume grants of one part: the one it names, else, for a spent part, the
/// run's first grant's.
fn again<T: Copy>(
    spent: bool,
    named: Option<T>,
    first: Option<T>,
    part: BudgetPart,
) -> Result<Option<T>, ResumeRefused> {
    match named.or(if spent { first } else { None }) {
        None if spent => Err(ResumeRefused::NoAmount(part)),
        amount => Ok(amount),
    }
}

/// A grant of `n` more to a meter: counted from its limit, or from what was used when it
/// had none; released when what was used is below the new limit.
fn grant_meter(m: &mut Meter, n: u64) {
    let max = m.max.unwrap_or(m.used).saturating_add(n);
    m.max = Some(max);
    if m.used < max {
        m.held_from = None;
    }
}

impl Run {
    /// Grants a budget (the first grant sets it, later ones add to it) and releases the
    /// held executions it now covers, recording `BudgetGranted`. Returns how many were
    /// released (taken with [`Run::next_started`] as if they had just started).
    pub fn grant(&mut self, grant: BudgetGrant) -> Result<u32, BudgetError> {
        if self.is_terminated() {
            return Err(BudgetError::RunEnded);
        }
        if grant.executions.is_none()
            && grant.wall_ns.is_none()
            && grant.tokens.is_none()
            && grant.cost_micros.is_none()
        {
            return Err(BudgetError::Empty);
        }
        let released_before = self.released_len();
        let b = waits(&mut self.waits).budget.get_or_insert_with(|| {
            Box::new(Budget {
                first: grant,
                ..Budget::default()
            })
        });
        b.grants = b.grants.saturating_add(1);
        if let Some(n) = grant.executions {
            b.max_executions = Some(
                b.max_executions
                    .unwrap_or(released_before)
                    .saturating_add(n),
            );
        }
        if let Some(w) = grant.wall_ns {
            b.until_ns = Some(grant.now_ns.saturating_add(w));
            b.wall_spent = false;
        }
        if let Some(n) = grant.tokens {
            grant_meter(&mut b.tokens, n);
        }
        if let Some(n) = grant.cost_micros {
            grant_meter(&mut b.cost_micros, n);
        }
        let record = Record::BudgetGranted {
            max_executions: b.max_executions,
            until_ns: b.until_ns,
            max_tokens: b.tokens.max,
            max_cost_micros: b.cost_micros.max,
        };
        self.held_from = b.held_from();
        push_record(&mut self.records, &mut self.rare, record);
        Ok(self.released_len() - released_before)
    }

    /// The grant that resumes a run whose budget is spent: the amounts `named` gives, and
    /// each spent part it leaves `None` granted again as the run's first grant had it (its
    /// clock reading is `named`'s). With `seen`, only if the run has had exactly that many
    /// grants ([`Budget::grants`]): a resume asked of a run as someone saw it paused is
    /// refused once another resume came first, so two resumes, or one delivered twice,
    /// grant once.
    pub fn resume_grant(
        &self,
        named: BudgetGrant,
        seen: Option<u32>,
    ) -> Result<BudgetGrant, ResumeRefused> {
        if self.is_terminated() {
            return Err(ResumeRefused::Ended);
        }
        let grants = self.budget().map_or(0, |b| b.grants);
        if let Some(seen) = seen.filter(|s| *s != grants) {
            return Err(ResumeRefused::Superseded { seen, grants });
        }
        let Some(b) = self.budget().filter(|_| self.budget_spent()) else {
            return Err(ResumeRefused::NotSpent);
        };
        let executions_spent = b
            .max_executions
            .is_some_and(|max| self.executions.len() as u32 > max);
        Ok(BudgetGrant {
            executions: again(
                executions_spent,
                named.executions,
                b.first.executions,
                BudgetPart::Executions,
            )?,
            wall_ns: again(
                b.wall_spent,
                named.wall_ns,
                b.first.wall_ns,
                BudgetPart::WallTime,
            )?,
            tokens: again(
                b.tokens.held_from.is_some(),
                named.tokens,
                b.first.tokens,
                BudgetPart::Tokens,
            )?,
            cost_micros: again(
                b.cost_micros.held_from.is_some(),
                named.cost_micros,
                b.first.cost_micros,
                BudgetPart::Cost,
            )?,
            now_ns: named.now_ns,
        })
    }

    /// The run's budget, if it was granted one.
    pub fn budget(&self) -> Option<&Budget> {
        self.waits.as_ref()?.budget.as_deref()
    }

    /// Whether the budget is spent: executions wait for it, or its wall time ended or its
    /// tokens or cost were used up (what the run does next would wait). Only a grant
    /// changes that.
    pub fn budget_spent(&self) -> bool {
        self.held().next().is_some()
            || self.budget().is_some_and(|b| {
                b.wall_spent || b.tokens.held_from.is_some() || b.cost_micros.held_from.is_some()
            })
    }

    /// What an execution's model calls used, reported with its completion (applied just
    /// before it, so that what the completion starts is held once the budget is spent).
    /// Counted against the run's token and cost budgets; a run without one keeps no count.
    /// Records `BudgetSpent` when a meter reaches its limit.
    pub fn use_budget(&mut self, tokens: u64, cost_micros: u64) {
        let next = self.executions.len() as u32;
        let Some(b) = self.waits.as_mut().and_then(|r| r.budget.as_mut()) else {
            return;
        };
        let mut spent = Vec::new();
        for (m, used, limit) in [
            (&mut b.tokens, tokens, BudgetLimit::Tokens { max: 0 }),
            (
                &mut b.cost_micros,
                cost_micros,
                BudgetLimit::Cost { max_micros: 0 },
            ),
        ] {
            m.used = m.used.saturating_add(used);
            if let Some(max) = m.max
                && m.used >= max
                && m.held_from.is_none()
            {
                m.held_from = Some(next);
                spent.push(match limit {
                    BudgetLimit::Tokens { .. } => BudgetLimit::Tokens { max },
                    _ => BudgetLimit::Cost { max_micros: max },
                });
            }
        }
        self.held_from = b.held_from();
        for limit in spent {
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::BudgetSpent {
                    limit,
                    held_from: ExecutionId(next),
                },
            );
        }
    }

    /// The executions started and held for the budget, in start order.
    pub fn held(&self) -> impl Iterator<Item = ExecutionId> + '_ {
        let from = (self.held_from as usize).min(self.executions.len());
        self.executions[from..]
            .iter()
            .enumerate()
            .filter(|(_, x)| x.state == ExecState::Running)
            .map(move |(i, _)| ExecutionId((from + i) as u32))
    }

    /// Whether `execution` is held for the budget (started, not released).
    pub fn is_held(&self, execution: ExecutionId) -> bool {
        execution.0 >= self.held_from
    }

    /// How many executions the engine may be handed: those before the first held one.
    #[inline(always)]
    pub(super) fn released_len(&self) -> u32 {
        (self.executions.len() as u32).min(self.held_from)
    }

    /// After execution `x` started: when the budget holds it, the record of the budget
    /// being spent, made by the first execution an executions budget holds. Inlined: one
    /// comparison when nothing is held.
    #[inline(always)]
    pub(super) fn note_held(&mut self, x: ExecutionId) {
        if x.0 >= self.held_from {
            self.execution_held(x);
        }
    }

    #[cold]
    #[inline(never)]
    fn execution_held(&mut self, x: ExecutionId) {
        let Some(b) = self.budget() else { return };
        // The wall time's end, or the tokens or cost used up, recorded the spending already.
        if b.wall_spent
            || b.tokens.held_from.is_some()
            || b.cost_micros.held_from.is_some()
            || b.max_executions != Some(x.0)
        {
            return;
        }
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::BudgetSpent {
                limit: BudgetLimit::Executions { max: x.0 },
                held_from: x,
            },
        );
    }

    /// When the wall time ends, if it has not ended yet (for [`Run::next_due`]).
    pub(super) fn wall_due(&self) -> Option<u64> {
        match self.budget() {
            Some(b) if !b.wall_spent && !self.is_terminated() => b.until_ns,
            _ => None,
        }
    }

    /// A clock reading at `now_ns`: when it reaches the wall time's end, the budget is
    /// spent — the executions started from now on are held — and `BudgetSpent` recorded.
    pub(super) fn spend_wall_time(&mut self, now_ns: u64) {
        let Some(until_ns) = self.wall_due().filter(|u| *u <= now_ns) else {
            return;
        };
        let next = self.executions.len() as u32;
        let Some(b) = waits(&mut self.waits).budget.as_mut() else {
            return;
        };
        b.wall_spent = true;
        b.wall_held_from = next;
        self.held_from = b.held_from();
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::BudgetSpent {
                limit: BudgetLimit::WallTime { until_ns },
                held_from: ExecutionId(next),
            },
        );
    }
}

impl Budget {
    /// The first execution the budget holds (`u32::MAX`: none).
    fn held_from(&self) -> u32 {
        let wall = if self.wall_spent {
            self.wall_held_from
        } else {
            u32::MAX
        };
        wall.min(self.max_executions.unwrap_or(u32::MAX))
            .min(self.tokens.held_from.unwrap_or(u32::MAX))
            .min(self.cost_micros.held_from.unwrap_or(u32::MAX))
    }
}
