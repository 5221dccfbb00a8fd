#![allow(unused)] // only the macro's error matters here
use saap::{Required, UserMessageEvent, agent};

struct Agent;

#[agent]
impl Agent {
    #[step]
    async fn listen(q: Required<UserMessageEvent>) {
        let _ = q;
    }
}

fn main() {}
