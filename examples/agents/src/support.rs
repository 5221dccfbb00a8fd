//! A support agent written with `#[agent]`: a typed agent config and a step config injected
//! by type, a precondition over the step's own inputs, and no agent state (steps take no
//! `self`).
//!
//! ```text
//! UserMessageEvent → triage (Config<SupportConfig>) → Triaged
//!   → reply (StepConfig<ReplyStyle>; runs only for non-urgent tickets) → Replied (stop)
//!   → escalate (runs only for urgent tickets) → Escalated (stop)
//! ```
//!
//! `support-agent run --message "my invoice is wrong" --config '{"urgent_words": ["invoice"]}'`

use saap::{
    AgentConfig, Config, Required, StepConfig, StepCtx, StepError, UserMessageEvent, agent,
};

/// The agent's settings (the run's `_config`, merged over these defaults).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SupportConfig {
    /// Words that make a ticket urgent.
    pub urgent_words: Vec<String>,
    /// Who urgent tickets go to.
    pub on_call: String,
}

impl Default for SupportConfig {
    fn default() -> Self {
        SupportConfig {
            urgent_words: vec!["down".into(), "outage".into()],
            on_call: "ops".into(),
        }
    }
}

impl AgentConfig for SupportConfig {
    fn validate(&self) -> Result<(), String> {
        if self.on_call.trim().is_empty() {
            return Err("on_call is empty; name the team that takes urgent tickets".into());
        }
        Ok(())
    }
}

/// The `reply` step's own settings (`_config.steps.reply`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplyStyle {
    pub signature: String,
}

impl AgentConfig for ReplyStyle {}

/// A ticket after triage.
#[derive(Debug, Clone, PartialEq, saap::Event, serde::Serialize, serde::Deserialize)]
pub struct Triaged {
    pub text: String,
    pub urgent: bool,
}

/// The answer to a non-urgent ticket; ends the run.
#[derive(Debug, Clone, PartialEq, saap::Event, serde::Serialize, serde::Deserialize)]
#[event(parent = StopEvent)]
pub struct Replied {
    pub text: String,
}

/// An urgent ticket handed to a team; ends the run.
#[derive(Debug, Clone, PartialEq, saap::Event, serde::Serialize, serde::Deserialize)]
#[event(parent = StopEvent)]
pub struct Escalated {
    pub to: String,
    pub text: String,
}

/// The agent: a unit struct, never instantiated; its steps are associated functions.
pub struct SupportAgent;

#[agent(config = SupportConfig, events = [saap::ThoughtEvent], description = "Triage a support request, then reply or escalate")]
impl SupportAgent {
    #[step(max_executions_per_run = 1)]
    async fn triage(
        request: Required<UserMessageEvent>,
        cfg: Config<SupportConfig>,
    ) -> Result<Triaged, StepError> {
        let lower = request.message.to_lowercase();
        let urgent = cfg
            .urgent_words
            .iter()
            .any(|w| lower.contains(&w.to_lowercase()));
        Ok(Triaged {
            text: request.message.clone(),
            urgent,
        })
    }

    #[step(precondition = Self::is_routine)]
    async fn reply(
        ticket: Required<Triaged>,
        style: StepConfig<ReplyStyle>,
        ctx: StepCtx,
    ) -> Result<Replied, StepError> {
        ctx.display(&saap::ThoughtEvent {
            thought: "routine request: answering directly".into(),
        })
        .await?;
        let mut text = format!("Thanks, we are on it: {}", ticket.text);
        if !style.signature.is_empty() {
            text.push_str(&format!(" — {}", style.signature));
        }
        Ok(Replied { text })
    }

    #[step(precondition = Self::is_urgent)]
    async fn escalate(
        ticket: Required<Triaged>,
        cfg: Config<SupportConfig>,
    ) -> Result<Escalated, StepError> {
        Ok(Escalated {
            to: cfg.on_call.clone(),
            text: ticket.text.clone(),
        })
    }

    fn is_routine(ticket: &Required<Triaged>) -> bool {
        !ticket.urgent
    }

    fn is_urgent(ticket: &Required<Triaged>) -> bool {
        ticket.urgent
    }
}
