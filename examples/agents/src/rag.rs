//! A retrieval agent with fan-out/fan-in and a scripted model.
//!
//! ```text
//! UserMessageEvent → plan → SearchRequested ×3 → search (×3, parallel) → Retrieved ×3
//!   → rank (FixedList<Retrieved, 3>) → ContextReady → answer (+ the question) → Answered (stop)
//! ```

use crate::event;
use saap::{
    ChunkEvent, FixedList, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow,
    WorkflowBuilder,
};

event!(
    /// One search to run (fan-out).
    SearchRequested, "ControlEvent" { source: String, query: String }
);
event!(
    /// Documents found by one search.
    Retrieved, "ControlEvent" { source: String, docs: Vec<String> }
);
event!(
    /// The ranked context for the answer (fan-in).
    ContextReady, "ControlEvent" { docs: Vec<String> }
);
event!(
    /// The answer; ends the run.
    Answered, "StopEvent" { text: String, sources: Vec<String> }
);

/// The sources searched in parallel (the fixed list's size must match).
pub const SOURCES: [&str; 3] = ["handbook", "faq", "tickets"];

fn corpus(source: &str) -> &'static [&'static str] {
    match source {
        "handbook" => &[
            "Passwords are reset from Settings > Security > Reset password.",
            "Accounts lock after five failed sign-ins.",
        ],
        "faq" => &["A reset link is valid for 30 minutes."],
        _ => &["Ticket 4711: reset link expired; user requested a new one."],
    }
}

/// A deterministic stand-in for a language model: answers from the context it is given.
pub struct ScriptedModel;

impl ScriptedModel {
    pub fn complete(question: &str, docs: &[String]) -> Vec<String> {
        let mut out = vec![format!("You asked: \"{question}\". ")];
        for d in docs.iter().take(3) {
            out.push(format!("{d} "));
        }
        out.push("(answered from the retrieved context)".to_string());
        out
    }
}

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_string)
        .collect()
}

/// The retrieval steps both workflows share: plan, search ×3 (fan-out), rank (fan-in).
pub(crate) fn retrieval(builder: WorkflowBuilder) -> WorkflowBuilder {
    builder
        .event::<ChunkEvent>()
        .step(Step::new(
            "plan",
            |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
                Ok::<_, StepError>(
                    SOURCES
                        .iter()
                        .map(|s| SearchRequested {
                            source: s.to_string(),
                            query: q.message.clone(),
                        })
                        .collect::<Vec<_>>(),
                )
            },
        ))
        .step(Step::new(
            "search",
            |r: Required<SearchRequested>, _ctx: StepCtx| async move {
                let terms = words(&r.query);
                let docs = corpus(&r.source)
                    .iter()
                    .filter(|d| words(d).iter().any(|w| terms.contains(w)))
                    .map(|d| d.to_string())
                    .collect();
                Ok::<_, StepError>(Retrieved {
                    source: r.source.clone(),
                    docs,
                })
            },
        ))
        .step(Step::new(
            "rank",
            |found: FixedList<Retrieved, 3>, _ctx: StepCtx| async move {
                let mut docs: Vec<String> = found.iter().flat_map(|r| r.docs.clone()).collect();
                docs.sort_by_key(|d| d.len());
                Ok::<_, StepError>(ContextReady { docs })
            },
        ))
}

pub fn workflow() -> Workflow {
    let built = retrieval(
        Workflow::builder("RagAgent")
            .description("Retrieval agent: fan-out to three sources, fan-in, scripted answer"),
    )
    .step(Step::new(
        "answer",
        |(c, q): (Required<ContextReady>, Required<UserMessageEvent>), ctx: StepCtx| async move {
            let mut text = String::new();
            for chunk in ScriptedModel::complete(&q.message, &c.docs) {
                ctx.display(&ChunkEvent {
                    chunk: chunk.clone(),
                })
                .await
                .map_err(|e| StepError::new(e.to_string()))?;
                text.push_str(&chunk);
            }
            Ok::<_, StepError>(Answered {
                text,
                sources: SOURCES.iter().map(|s| s.to_string()).collect(),
            })
        },
    ))
    .build();
    match built {
        Ok(w) => w,
        // The declarations above are static: a failure is a bug in this example.
        Err(e) => panic!("RagAgent is invalid: {e}"),
    }
}
