#![allow(unused)] // only the macro's error matters here
use saap::{Required, Res, StepError, StopEvent, UserMessageEvent, agent};

struct Agent;

#[agent]
impl Agent {
    #[step]
    async fn answer(q: Required<UserMessageEvent>, pool: Res) -> Result<StopEvent, StepError> {
        let _ = q;
        Ok(StopEvent {})
    }
}

fn main() {}
