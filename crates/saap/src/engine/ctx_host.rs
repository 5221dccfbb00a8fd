//! The engine as a step's context sees it ([`RunHost`], defined by the authoring API): the
//! store behind RunContext and ThreadContext, display events, the run's start event, the
//! workflow's resources. Must not decide anything: it finds the run by its id and hands over
//! to `apply`.

use super::shared::Shared;
use crate::backend::Backend;
use crate::config::start_payload;
use crate::context::{ContextError, RunHost};
use crate::event::Payload;
use saap_dispatch::ExecutionId;
use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

impl RunHost for Shared {
    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn show_display(
        self: Arc<Self>,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        name: &'static str,
        payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>> {
        let slot = self.slot(run_id).map_err(|_| ContextError::RunGone {
            run_id: run_id.to_string(),
        });
        Box::pin(async move {
            let slot = slot?;
            let n = slot.lock().next_display(execution, attempt);
            self.display(&slot, execution, n, name.into(), payload)
                .await
        })
    }

    fn start_fields(&self, run_id: &str) -> Result<Payload, ContextError> {
        let slot = self.slot(run_id).map_err(|_| ContextError::RunGone {
            run_id: run_id.to_string(),
        })?;
        let st = slot.lock();
        Ok(start_payload(&st.run, &st.payloads, &[]))
    }

    fn resource(&self, id: TypeId) -> Option<Arc<dyn Any + Send + Sync>> {
        self.workflow.inner.resources.get_any(id)
    }

    fn cancellation(&self, run_id: &str) -> Option<tokio_util::sync::CancellationToken> {
        let slot = self.slot(run_id).ok()?;
        Some(self.cancellation_token(&slot))
    }

    fn effect_limits(&self) -> crate::backend::EffectLimits {
        self.opts.effect_limits
    }

    fn report_usage(
        &self,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        tokens: u64,
        cost_micros: u64,
    ) {
        if let Ok(slot) = self.slot(run_id) {
            slot.lock()
                .add_usage(execution, attempt, tokens, cost_micros);
        }
    }
}
