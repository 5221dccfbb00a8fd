#![allow(unused)] // only the macro's error matters here
// The seeds' "context smuggle": keeping state on the agent between steps.
use saap::{Required, StepError, StopEvent, UserMessageEvent, agent};

struct Remembering {
    seen: Vec<String>,
}

#[agent]
impl Remembering {
    #[step]
    async fn remember(&mut self, q: Required<UserMessageEvent>) -> Result<StopEvent, StepError> {
        self.seen.push(q.message.clone());
        Ok(StopEvent {})
    }
}

fn main() {}
