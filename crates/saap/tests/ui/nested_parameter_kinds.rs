#![allow(unused)] // only the macro's error matters here
use saap::{StepError, StopEvent, UserMessageEvent, agent};

struct Agent;

// Parameter kinds do not nest: a list of optionals is just a list.
#[agent]
impl Agent {
    #[step]
    async fn answer(qs: Vec<Option<UserMessageEvent>>) -> Result<StopEvent, StepError> {
        let _ = qs;
        Ok(StopEvent {})
    }
}

fn main() {}
