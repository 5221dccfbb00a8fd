//! What a run did, turned into spans: the run's root span ([`run_span`]) and, per step
//! execution, a `CHAIN` span with a child span per semantic event among its outputs
//! ([`execution_spans`]).
//!
//! Semantic events are read with the protocol's own types, and their attributes are the
//! protocol's `to_semantic_convention()`: this module adds only the saap and session keys,
//! the span tree and the timing. `LLMCostEvent` is not a span: its `llm.cost.*` go on the LLM
//! span it prices. This module is pure: it must not read a clock, draw ids, log or do I/O.

use std::sync::OnceLock;

use saap_protocol::Hierarchy;
use saap_protocol::semantic::{
    AgentEvent, AttributeValue, Attributes, ChainEvent, EmbeddingEvent, GuardEvent, LLMCostEvent,
    LLMEvent, LLMStopEvent, RerankerEvent, RetrieverEvent, SemanticEvent, ToolEvent, keys,
};
use serde_json::{Map, Value};

use crate::ids::{SpanId, TraceId};
use crate::span::{Span, SpanStatus, bound_attributes};

/// `saap.run_id`: the run.
pub const SAAP_RUN_ID: &str = "saap.run_id";
/// `saap.thread_id`: the run's thread.
pub const SAAP_THREAD_ID: &str = "saap.thread_id";
/// `saap.agent`: the workflow (agent class) that ran.
pub const SAAP_AGENT: &str = "saap.agent";
/// `saap.step`: the step of an execution.
pub const SAAP_STEP: &str = "saap.step";
/// `saap.execution`: the execution's number in its run.
pub const SAAP_EXECUTION: &str = "saap.execution";
/// `saap.attempt`: the attempt (0 for the first).
pub const SAAP_ATTEMPT: &str = "saap.attempt";
/// `saap.event_name`: the event a child span was made from.
pub const SAAP_EVENT_NAME: &str = "saap.event_name";
/// `saap.event_id`: its id.
pub const SAAP_EVENT_ID: &str = "saap.event_id";
/// `saap.parse_error`: why the event's fields could not be read as its semantic type.
pub const SAAP_PARSE_ERROR: &str = "saap.parse_error";

const JSON: &str = "application/json";

/// One event as the engine or a store holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct EventData {
    /// The class name (`_event_name`).
    pub name: String,
    /// Its id: 24 hex digits, or empty when not known.
    pub id: String,
    /// The event's class fields (a JSON object).
    pub fields: Value,
}

/// What is known about a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts {
    /// The run.
    pub run_id: String,
    /// Its thread (the span's `session.id`).
    pub thread_id: String,
    /// The workflow / agent class name.
    pub agent: String,
    /// When it started (ns since the Unix epoch).
    pub start_unix_nano: u64,
    /// When it ended, or now while it is live.
    pub end_unix_nano: u64,
    /// The event that started it.
    pub start_event: Option<EventData>,
    /// The stop or exception event; `None` while live.
    pub end_event: Option<EventData>,
    /// Whether it ended with an error.
    pub failed: bool,
}

/// What is known about one execution of a step.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionFacts {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The step's name.
    pub step: String,
    /// The execution's number in the run.
    pub execution: u32,
    /// The attempt (1 for the first).
    pub attempt: u32,
    /// When it started (ns since the Unix epoch).
    pub start_unix_nano: u64,
    /// When it ended.
    pub end_unix_nano: u64,
    /// The events bound to it.
    pub inputs: Vec<EventData>,
    /// The events it returned, in order.
    pub outputs: Vec<EventData>,
    /// The display events it showed that a span reads, in order: each `LLMCostEvent` prices
    /// the LLM span of the same turn (the n-th cost the n-th model call), or the execution's
    /// span when it returned no model call. (Chunks and the like need not be passed.)
    pub shown: Vec<EventData>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// `{"_event_name": name, ...fields}` (fields that are not an object go under `_fields`).
pub fn event_json(event: &EventData) -> Value {
    let mut object = Map::new();
    object.insert("_event_name".into(), Value::String(event.name.clone()));
    match &event.fields {
        Value::Object(fields) => {
            for (k, v) in fields {
                if k != "_event_name" {
                    object.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Null => {}
        other => {
            object.insert("_fields".into(), other.clone());
        }
    }
    Value::Object(object)
}

/// The run's root span.
pub fn run_span(run: &RunFacts) -> Span {
    let mut a = Attributes::new();
    a.set(keys::OPENINFERENCE_SPAN_KIND, "AGENT");
    a.set(keys::SESSION_ID, run.thread_id.as_str());
    a.set(SAAP_RUN_ID, run.run_id.as_str());
    a.set(SAAP_THREAD_ID, run.thread_id.as_str());
    a.set(SAAP_AGENT, run.agent.as_str());
    if let Some(start) = &run.start_event {
        a.set(keys::INPUT_VALUE, event_json(start).to_string());
        a.set(keys::INPUT_MIME_TYPE, JSON);
    }
    if let Some(end) = &run.end_event {
        a.set(keys::OUTPUT_VALUE, event_json(end).to_string());
        a.set(keys::OUTPUT_MIME_TYPE, JSON);
    }
    let status = if run.failed {
        SpanStatus::Error(match &run.end_event {
            Some(end) => failure_message(end),
            None => "the run failed".to_owned(),
        })
    } else if run.end_event.is_some() {
        SpanStatus::Ok
    } else {
        SpanStatus::Unset
    };
    Span {
        trace_id: TraceId::of_run(&run.run_id),
        span_id: SpanId::of_run(&run.run_id),
        parent_span_id: None,
        name: run.agent.clone(),
        start_unix_nano: run.start_unix_nano,
        end_unix_nano: run.end_unix_nano.max(run.start_unix_nano),
        attributes: bound_attributes(a),
        status,
    }
}

/// The exception event's `message` or `error` field, else its JSON.
fn failure_message(event: &EventData) -> String {
    for key in ["message", "error"] {
        match event.fields.get(key) {
            Some(Value::String(s)) if !s.is_empty() => return s.clone(),
            Some(Value::Null) | None => {}
            Some(Value::String(_)) => {}
            Some(other) => return other.to_string(),
        }
    }
    event_json(event).to_string()
}

/// The semantic kinds an output can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Llm,
    LlmStop,
    Retriever,
    Reranker,
    Embedding,
    Tool,
    Guard,
    Chain,
    Agent,
    Cost,
}

impl Kind {
    /// Most specific first: `LLMStopEvent` is an `LLMEvent`.
    const ALL: [(Kind, &'static str); 10] = [
        (Kind::Cost, LLMCostEvent::EVENT_NAME),
        (Kind::LlmStop, LLMStopEvent::EVENT_NAME),
        (Kind::Llm, LLMEvent::EVENT_NAME),
        (Kind::Retriever, RetrieverEvent::EVENT_NAME),
        (Kind::Reranker, RerankerEvent::EVENT_NAME),
        (Kind::Embedding, EmbeddingEvent::EVENT_NAME),
        (Kind::Tool, ToolEvent::EVENT_NAME),
        (Kind::Guard, GuardEvent::EVENT_NAME),
        (Kind::Chain, ChainEvent::EVENT_NAME),
        (Kind::Agent, AgentEvent::EVENT_NAME),
    ];

    /// The kind of event `name`: the name itself, or a built-in subtype of it
    /// (`GuardAcceptEvent` is a `GuardEvent`, `RefusalStopEvent` an `LLMStopEvent`).
    fn of(name: &str) -> Option<Kind> {
        if let Some((kind, _)) = Kind::ALL.iter().find(|(_, n)| *n == name) {
            return Some(*kind);
        }
        let hierarchy = builtin_hierarchy();
        Kind::ALL
            .iter()
            .find(|(_, n)| hierarchy.is_subtype_of(name, n))
            .map(|(kind, _)| *kind)
    }

    fn span_kind(self) -> &'static str {
        match self {
            Kind::Llm | Kind::LlmStop | Kind::Cost => "LLM",
            Kind::Retriever => "RETRIEVER",
            Kind::Reranker => "RERANKER",
            Kind::Embedding => "EMBEDDING",
            Kind::Tool => "TOOL",
            Kind::Guard => "GUARDRAIL",
            Kind::Chain => "CHAIN",
            Kind::Agent => "AGENT",
        }
    }
}

fn builtin_hierarchy() -> &'static Hierarchy {
    static HIERARCHY: OnceLock<Hierarchy> = OnceLock::new();
    HIERARCHY.get_or_init(Hierarchy::builtin_with_agent_package)
}

/// A semantic event read from its fields, with what its span needs.
struct Parsed {
    attributes: Attributes,
    /// The span's name when it is not the kind.
    name: Option<String>,
    /// How long it took, in nanoseconds, when known.
    duration_nanos: Option<u64>,
    /// Why it failed, when it did.
    error: Option<String>,
}

fn parse<T: SemanticEvent>(fields: &Value) -> Result<T, String> {
    serde_json::from_value::<T>(fields.clone()).map_err(|e| e.to_string())
}

fn parse_llm(event: LLMEvent) -> Parsed {
    let duration_nanos = event
        .latency_ms
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| (ms * 1_000_000.0) as u64);
    Parsed {
        attributes: event.to_semantic_convention(),
        name: event.chat_model_name.clone().filter(|n| !n.is_empty()),
        duration_nanos,
        error: None,
    }
}

fn plain<T: SemanticEvent>(event: T) -> Parsed {
    Parsed {
        attributes: event.to_semantic_convention(),
        name: None,
        duration_nanos: None,
        error: None,
    }
}

fn parse_kind(kind: Kind, fields: &Value) -> Result<Parsed, String> {
    Ok(match kind {
        Kind::Llm => parse_llm(parse::<LLMEvent>(fields)?),
        Kind::LlmStop => parse_llm(parse::<LLMStopEvent>(fields)?.0),
        Kind::Retriever => plain(parse::<RetrieverEvent>(fields)?),
        Kind::Reranker => plain(parse::<RerankerEvent>(fields)?),
        Kind::Embedding => plain(parse::<EmbeddingEvent>(fields)?),
        Kind::Guard => plain(parse::<GuardEvent>(fields)?),
        Kind::Chain => plain(parse::<ChainEvent>(fields)?),
        Kind::Agent => plain(parse::<AgentEvent>(fields)?),
        Kind::Tool => {
            let tool = parse::<ToolEvent>(fields)?;
            let error = (tool.is_error == Some(true)).then(|| {
                tool.result
                    .clone()
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| "the tool call failed".to_owned())
            });
            Parsed {
                attributes: tool.to_semantic_convention(),
                name: tool.name.clone().filter(|n| !n.is_empty()),
                duration_nanos: None,
                error,
            }
        }
        Kind::Cost => plain(parse::<LLMCostEvent>(fields)?),
    })
}

/// Adds an `LLMCostEvent`'s attributes to a span: `llm.cost.*` summed with what is there
/// (two prices of one call add up), the other keys only where the span has none.
fn add_cost(target: &mut Attributes, cost: &Attributes) {
    for (key, value) in cost.iter() {
        if key.starts_with("llm.cost.") {
            let sum = match (target.get(key), value) {
                (Some(AttributeValue::Double(a)), AttributeValue::Double(b)) => {
                    AttributeValue::Double(a + b)
                }
                _ => value.clone(),
            };
            target.set(key, sum);
        } else if target.get(key).is_none() {
            target.set(key, value.clone());
        }
    }
}

/// Adds the cost event `fields` to the LLM span it prices, or, with none, its `llm.cost.*`
/// to the execution's attributes `exec` (a cost that does not parse is noted there).
fn price(llm: Option<&mut Span>, exec: &mut Attributes, fields: &Value) {
    let parsed = match parse_kind(Kind::Cost, fields) {
        Ok(parsed) => parsed,
        Err(message) => {
            exec.set(SAAP_PARSE_ERROR, message);
            return;
        }
    };
    match llm {
        Some(llm) => add_cost(&mut llm.attributes, &parsed.attributes),
        None => {
            let mut only_costs = Attributes::new();
            for (k, v) in parsed.attributes.iter() {
                if k.starts_with("llm.cost.") {
                    only_costs.set(k, v.clone());
                }
            }
            add_cost(exec, &only_costs);
        }
    }
}

/// The execution's span, then one child span per semantic event among its outputs.
pub fn execution_spans(x: &ExecutionFacts) -> Vec<Span> {
    let trace_id = TraceId::of_run(&x.run_id);
    let exec_id = SpanId::of_execution(&x.run_id, x.execution, x.attempt);
    let exec_start = x.start_unix_nano;
    let exec_end = x.end_unix_nano.max(exec_start);

    let mut exec = Attributes::new();
    exec.set(keys::OPENINFERENCE_SPAN_KIND, "CHAIN");
    exec.set(keys::SESSION_ID, x.thread_id.as_str());
    exec.set(SAAP_RUN_ID, x.run_id.as_str());
    exec.set(SAAP_THREAD_ID, x.thread_id.as_str());
    exec.set(SAAP_STEP, x.step.as_str());
    exec.set(SAAP_EXECUTION, i64::from(x.execution));
    exec.set(SAAP_ATTEMPT, i64::from(x.attempt));
    exec.set(
        keys::INPUT_VALUE,
        Value::Array(x.inputs.iter().map(event_json).collect()).to_string(),
    );
    exec.set(keys::INPUT_MIME_TYPE, JSON);
    exec.set(
        keys::OUTPUT_VALUE,
        Value::Array(x.outputs.iter().map(event_json).collect()).to_string(),
    );
    exec.set(keys::OUTPUT_MIME_TYPE, JSON);

    let mut children: Vec<Span> = Vec::new();
    // The index in `children` of the last LLM span, which a following cost event prices.
    let mut last_llm: Option<usize> = None;
    let mut cursor = exec_start;
    for (index, output) in x.outputs.iter().enumerate() {
        let Some(kind) = Kind::of(&output.name) else {
            continue;
        };
        if kind == Kind::Cost {
            price(
                last_llm.and_then(|i| children.get_mut(i)),
                &mut exec,
                &output.fields,
            );
            continue;
        }
        let span_kind = kind.span_kind();
        let (mut attributes, name, duration, status) = match parse_kind(kind, &output.fields) {
            Ok(parsed) => {
                let status = match parsed.error {
                    Some(message) => SpanStatus::Error(message),
                    None => SpanStatus::Ok,
                };
                let name = parsed.name.unwrap_or_else(|| span_kind.to_owned());
                (parsed.attributes, name, parsed.duration_nanos, status)
            }
            Err(message) => {
                let mut a = Attributes::new();
                a.set(keys::OPENINFERENCE_SPAN_KIND, span_kind);
                a.set(keys::OUTPUT_VALUE, event_json(output).to_string());
                a.set(keys::OUTPUT_MIME_TYPE, JSON);
                a.set(SAAP_PARSE_ERROR, message);
                (a, span_kind.to_owned(), None, SpanStatus::Unset)
            }
        };
        attributes.set(keys::SESSION_ID, x.thread_id.as_str());
        attributes.set(SAAP_EVENT_NAME, output.name.as_str());
        if !output.id.is_empty() {
            attributes.set(SAAP_EVENT_ID, output.id.as_str());
        }
        let start = cursor.min(exec_end);
        let end = match duration {
            Some(d) => start.saturating_add(d).min(exec_end),
            None => start,
        };
        cursor = end;
        if matches!(kind, Kind::Llm | Kind::LlmStop) {
            last_llm = Some(children.len());
        }
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        children.push(Span {
            trace_id,
            span_id: SpanId::child(exec_id, index),
            parent_span_id: Some(exec_id),
            name,
            start_unix_nano: start,
            end_unix_nano: end,
            attributes,
            status,
        });
    }

    // The costs it showed: the n-th prices the n-th model call.
    let mut llm_spans = children
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(
                c.attributes.get_str(keys::OPENINFERENCE_SPAN_KIND),
                Some("LLM")
            )
        })
        .map(|(i, _)| i)
        .collect::<Vec<_>>()
        .into_iter();
    for shown in &x.shown {
        if Kind::of(&shown.name) != Some(Kind::Cost) {
            continue;
        }
        price(
            llm_spans.next().and_then(|i| children.get_mut(i)),
            &mut exec,
            &shown.fields,
        );
    }

    let exec_span = Span {
        trace_id,
        span_id: exec_id,
        parent_span_id: Some(SpanId::of_run(&x.run_id)),
        name: x.step.clone(),
        start_unix_nano: exec_start,
        end_unix_nano: exec_end,
        attributes: exec,
        status: match &x.error {
            Some(error) => SpanStatus::Error(error.clone()),
            None => SpanStatus::Ok,
        },
    };
    let mut spans = Vec::with_capacity(children.len() + 1);
    spans.push(exec_span);
    spans.extend(children);
    for span in &mut spans {
        span.attributes = bound_attributes(std::mem::take(&mut span.attributes));
    }
    spans
}

#[cfg(test)]
#[path = "run_spans_tests.rs"]
mod tests;
