#![allow(unused)] // only the trait error matters here
use saap::{EventUnion, StepError, StopEvent, UserMessageEvent, agent};

// A union's variants hold event types (or other unions), not plain data.
#[derive(EventUnion)]
enum Input {
    Message(UserMessageEvent),
    Text(String),
}

struct Agent;

#[agent]
impl Agent {
    #[step]
    async fn answer(inputs: Vec<Input>) -> Result<StopEvent, StepError> {
        let _ = inputs;
        Ok(StopEvent {})
    }
}

fn main() {}
