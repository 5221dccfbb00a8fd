//! Cancelling bodies that run away from their run (NATS `Steps::Shared`, DESIGN §8): the
//! run's owner announces a cancelled run on core NATS (`saap.cancel.{Class}.{run}`,
//! [`cancel_subject`]); every worker of the class hears it and cancels the token its
//! bodies of that run see ([`crate::StepCtx::cancellation`]). Best effort, as a local
//! cancel is for a body already running: a body that starts after the notice passed is not
//! told, and what any of them returns is kept as after-stop evidence. Must not decide
//! anything: the owner's core already ended the run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The subject a cancelled run of `class` is announced on (`None`: a run id that is not one
/// subject token).
pub(super) fn cancel_subject(class: &str, run_id: &str) -> Option<String> {
    let one_token = !run_id.is_empty()
        && run_id.len() <= 128
        && !run_id
            .chars()
            .any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace());
    one_token.then(|| format!("saap.cancel.{class}.{run_id}"))
}

/// The subjects every cancelled run of `class` is announced on.
pub(super) fn cancel_filter(class: &str) -> String {
    format!("saap.cancel.{class}.*")
}

/// The tokens of the runs whose bodies run here, each shared by its bodies.
#[derive(Default)]
pub(super) struct BodyCancels {
    runs: Mutex<HashMap<Arc<str>, (CancellationToken, usize)>>,
}

/// Held while a body runs: its run's token, given back when dropped.
pub(super) struct BodyCancel<'a> {
    cancels: &'a BodyCancels,
    run_id: Arc<str>,
    token: CancellationToken,
}

impl BodyCancels {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, (CancellationToken, usize)>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A body of run `run_id` starts here.
    pub(super) fn enter(&self, run_id: &Arc<str>) -> BodyCancel<'_> {
        let mut runs = self.lock();
        let entry = runs
            .entry(run_id.clone())
            .or_insert_with(|| (CancellationToken::new(), 0));
        entry.1 += 1;
        BodyCancel {
            cancels: self,
            run_id: run_id.clone(),
            token: entry.0.clone(),
        }
    }

    /// Run `run_id` was cancelled: its bodies here are told.
    pub(super) fn cancel(&self, run_id: &str) {
        if let Some((token, _)) = self.lock().get(run_id) {
            token.cancel();
        }
    }
}

impl BodyCancel<'_> {
    /// The token the body sees.
    pub(super) fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

impl Drop for BodyCancel<'_> {
    fn drop(&mut self) {
        let mut runs = self.cancels.lock();
        if let Some(entry) = runs.get_mut(&self.run_id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                runs.remove(&self.run_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_every_body_of_its_run_and_no_other() {
        let cancels = BodyCancels::default();
        let (r1, r2): (Arc<str>, Arc<str>) = ("r1".into(), "r2".into());
        let a = cancels.enter(&r1);
        let b = cancels.enter(&r1);
        let c = cancels.enter(&r2);
        cancels.cancel("r1");
        assert!(a.token().is_cancelled() && b.token().is_cancelled());
        assert!(!c.token().is_cancelled());
        drop((a, b, c));
        assert!(cancels.lock().is_empty(), "tokens are given back");
        // A cancel of a run with no body here is nothing.
        cancels.cancel("r3");
        assert_eq!(cancel_subject("C", "r.1"), None);
        assert_eq!(
            cancel_subject("C", "abc").as_deref(),
            Some("saap.cancel.C.abc")
        );
    }
}
