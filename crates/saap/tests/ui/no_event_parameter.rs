#![allow(unused)] // only the macro's error matters here
use saap::{StepCtx, StepError, StopEvent, agent};

struct Agent;

#[agent]
impl Agent {
    #[step]
    async fn tick(ctx: StepCtx) -> Result<StopEvent, StepError> {
        let _ = ctx;
        Ok(StopEvent {})
    }
}

fn main() {}
