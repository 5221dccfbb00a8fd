#![allow(unused)] // only the macro's error matters here
use saap::{Required, StepError, StopEvent, UserMessageEvent, agent};

struct Agent;

#[agent]
impl Agent {
    #[step(max_executions = 1)]
    async fn answer(q: Required<UserMessageEvent>) -> Result<StopEvent, StepError> {
        let _ = q;
        Ok(StopEvent {})
    }
}

fn main() {}
