#![allow(unused)] // only the macro's error matters here
use saap::{Required, RunContext, StepError, StopEvent, UserMessageEvent, agent};

struct Agent;

#[agent]
impl Agent {
    #[step]
    async fn answer(q: Required<UserMessageEvent>, run: &RunContext) -> Result<StopEvent, StepError> {
        let _ = (q, run);
        Ok(StopEvent {})
    }
}

fn main() {}
