#![allow(unused)] // only the macro's error matters here
use saap::{AgentConfig, Config, Required, StepError, StopEvent, UserMessageEvent, agent};

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct RagConfig {
    top_k: usize,
}
impl AgentConfig for RagConfig {}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Other {
    level: u8,
}
impl AgentConfig for Other {}

struct Agent;

#[agent(config = RagConfig)]
impl Agent {
    #[step]
    async fn answer(q: Required<UserMessageEvent>, cfg: Config<Other>) -> Result<StopEvent, StepError> {
        let _ = (q, cfg.level);
        Ok(StopEvent {})
    }
}

fn main() {}
