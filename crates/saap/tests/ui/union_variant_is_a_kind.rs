#![allow(unused)] // only the macro's error matters here
use saap::{EventUnion, StopEvent, UserMessageEvent};

// The kind goes on the parameter (`Vec<Input>`), not inside the union.
#[derive(EventUnion)]
enum Input {
    Messages(Vec<UserMessageEvent>),
    Stop(StopEvent),
}

fn main() {}
