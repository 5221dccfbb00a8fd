//! Semantic events as the Python implementation writes them (pydantic `model_dump` through
//! `json.dumps(default=str)`: every field written, `null` when unset, non-ASCII as `\uXXXX`,
//! computed `content` on messages, `_event_name`/`_parent_event_names` last) decode into the
//! typed events, give the expected attributes, and encode back to the same fields.

use saap_protocol::semantic::{
    GuardEvent, LLMCostEvent, LLMEvent, LLMStopEvent, RetrieverEvent, SemanticEvent, ToolEvent,
};
use saap_protocol::{DecodeLimits, EventEnvelope, EventId, Hierarchy};
use serde_json::Value;

fn decode(text: &str) -> EventEnvelope {
    EventEnvelope::decode_str(text, &Hierarchy::builtin(), &DecodeLimits::default())
        .expect("Python's JSON decodes")
}

/// Reads `text` as `T`, writes it back, and checks the fields are those Python wrote.
fn round_trip<T: SemanticEvent + std::fmt::Debug>(text: &str) -> T {
    let envelope = decode(text);
    let typed = T::from_envelope(&envelope).expect("reads as the typed event");
    let id: EventId = envelope.event_id;
    let back = typed
        .to_envelope(&Hierarchy::builtin(), id, envelope.created_at)
        .expect("writes back");
    assert_eq!(
        Value::Object(back.fields.clone()),
        Value::Object(envelope.fields.clone()),
        "fields differ after a round trip"
    );
    assert_eq!(back.event_name, T::EVENT_NAME);
    typed
}

const LLM_STOP: &str = r#"{"event_id": "65a0c0ffee0000000000abcd", "created_at": 1733130000123456789, "display_name": {"de": "LLM-Antwort", "en": "LLM answer", "fr": null, "it": null}, "display_description": null, "input_messages": [{"role": "system", "name": null, "tool_calls": null, "function_call_name": null, "function_call_arguments_json": null, "tool_call_id": null, "contents": [{"type": "text", "text": "Antworte kurz."}], "content": "Antworte kurz."}, {"role": "user", "name": null, "tool_calls": null, "function_call_name": null, "function_call_arguments_json": null, "tool_call_id": null, "contents": [{"type": "text", "text": "Wie gro\u00df ist Z\u00fcrich?"}], "content": "Wie gro\u00df ist Z\u00fcrich?"}], "output_messages": [{"role": "assistant", "name": null, "tool_calls": null, "function_call_name": null, "function_call_arguments_json": null, "tool_call_id": null, "contents": [{"type": "text", "text": "Etwa 420 000 Einwohner."}], "content": "Etwa 420 000 Einwohner."}], "invocation_parameters": {"model_name": "gpt-4o-mini", "temperature": 0.1}, "chat_model_name": "gpt-4o-mini", "provider": "OpenAILike", "system": null, "prompt_template": null, "prompt_template_variables": null, "prompt_template_version": null, "token_count_prompt": 31, "token_count_completion": 9, "token_count_total": 40, "tools": null, "trace_note": "kept", "_event_name": "LLMStopEvent", "_parent_event_names": ["LLMStopEvent", "LLMEvent", "SemanticEvent", "StopEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]}"#;

#[test]
fn llm_stop_event_from_python() {
    let event: LLMStopEvent = round_trip(LLM_STOP);
    let llm = &event.0;
    assert_eq!(llm.chat_model_name.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(llm.token_count_total, Some(40));
    assert_eq!(llm.extra.get("trace_note"), Some(&Value::from("kept")));
    let inputs = llm.input_messages.as_ref().expect("inputs");
    assert_eq!(inputs[1].content(), "Wie groß ist Zürich?");

    let a = event.to_semantic_convention().with_session_id("t948a201");
    assert_eq!(a.get_str("openinference.span.kind"), Some("LLM"));
    assert_eq!(a.get_str("llm.model_name"), Some("gpt-4o-mini"));
    assert_eq!(a.get_str("llm.provider"), Some("OpenAILike"));
    assert_eq!(
        a.get_str("llm.input_messages.0.message.role"),
        Some("system")
    );
    assert_eq!(
        a.get_str("llm.input_messages.1.message.content"),
        Some("Wie groß ist Zürich?")
    );
    assert_eq!(
        a.get_str("llm.output_messages.0.message.role"),
        Some("assistant")
    );
    assert_eq!(
        a.get_str("llm.output_messages.0.message.content"),
        Some("Etwa 420 000 Einwohner.")
    );
    assert_eq!(a.get_str("session.id"), Some("t948a201"));
    assert!(a.get("llm.system").is_none(), "absent values are left out");

    // The stop event is also an LLMEvent (a subtype reads as its parent).
    let as_llm = LLMEvent::from_envelope(&decode(LLM_STOP)).expect("subtype reads as parent");
    assert_eq!(as_llm.token_count_prompt, Some(31));
    // It is classified as a stop event.
    assert!(decode(LLM_STOP).classification().stop);
}

const RETRIEVER: &str = r#"{"event_id": "65a0c0ffee0000000000abce", "created_at": 1733130000123456790, "display_name": null, "display_description": null, "nodes": [{"id": "n-1", "content": "Bern ist die Bundesstadt.", "type": "content", "content_type": "text", "document_id": "doc-7", "start_char_idx": null, "end_char_idx": null, "index": 3, "section_start_line": null, "section_end_line": null, "h1": "St\u00e4dte", "h2": null, "h3": null, "h4": null, "h5": null, "h6": null, "heading_level": null, "score": 0.87, "source": "wiki", "source_origin": null, "namespace": "ch", "document_title": "Schweiz", "language": "de", "version": 1, "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z", "inserted_at": "2024-01-02T00:00:00Z", "metadata": {}}], "_event_name": "RetrieverEvent", "_parent_event_names": ["RetrieverEvent", "SemanticEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]}"#;

#[test]
fn retriever_event_from_python() {
    let event: RetrieverEvent = round_trip(RETRIEVER);
    let nodes = event.nodes.as_ref().expect("nodes");
    assert_eq!(nodes[0].id, "n-1");
    assert_eq!(nodes[0].score, Some(0.87));
    let a = event.to_semantic_convention();
    assert_eq!(a.get_str("openinference.span.kind"), Some("RETRIEVER"));
    assert_eq!(a.get_str("retrieval.documents.0.document.id"), Some("n-1"));
    assert_eq!(
        a.get_str("retrieval.documents.0.document.content"),
        Some("Bern ist die Bundesstadt.")
    );
    let metadata: Value = serde_json::from_str(
        a.get_str("retrieval.documents.0.document.metadata")
            .expect("metadata"),
    )
    .expect("metadata is JSON");
    assert_eq!(metadata["document_id"], "doc-7");
    assert_eq!(metadata["namespace"], "ch");
}

const TOOL: &str = r#"{"event_id": "65a0c0ffee0000000000abcf", "created_at": 1733130000123456791, "display_name": null, "display_description": null, "tool_call_id": "call_abc", "name": "get_weather", "description": "Current weather for a city", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "parameters": {"city": "Z\u00fcrich"}, "_event_name": "ToolEvent", "_parent_event_names": ["ToolEvent", "SemanticEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]}"#;

#[test]
fn tool_event_from_python() {
    let event: ToolEvent = round_trip(TOOL);
    let a = event.to_semantic_convention();
    assert_eq!(a.get_str("openinference.span.kind"), Some("TOOL"));
    assert_eq!(a.get_str("tool.name"), Some("get_weather"));
    assert_eq!(a.get_str("tool.parameters"), Some(r#"{"city":"Zürich"}"#));
    assert_eq!(a.get_str("gen_ai.tool.call.id"), Some("call_abc"));
}

const COST: &str = r#"{"event_id": "65a0c0ffee0000000000abd0", "created_at": 1733130000123456792, "display_name": null, "display_description": null, "prompt_token_count": 31, "completion_token_count": 9, "embedding_token_count": 0, "prompt_tokens_costs": 4.65e-06, "completion_tokens_costs": 5.4e-06, "embedding_tokens_costs": 0.0, "llm_name": "openai/gpt-4o-mini", "user_id": null, "tenant_id": null, "_event_name": "LLMCostEvent", "_parent_event_names": ["LLMCostEvent", "CostEvent", "DisplayEvent"]}"#;

#[test]
fn llm_cost_event_from_python() {
    let event: LLMCostEvent = round_trip(COST);
    assert!((event.total_costs() - 1.005e-05).abs() < 1e-12);
    let a = event.to_semantic_convention();
    assert_eq!(a.get_str("llm.model_name"), Some("openai/gpt-4o-mini"));
    assert!(a.get("llm.cost.total").is_some());
    let envelope = decode(COST);
    assert!(envelope.classification().display && !envelope.classification().control);
}

#[test]
fn guard_subtypes_read_as_guard_events_and_other_types_are_refused() {
    let text = r#"{"event_id": "65a0c0ffee0000000000abd1", "created_at": 1, "display_name": null, "display_description": null, "reason": "no PII", "_event_name": "SensitiveInfoAcceptEvent", "_parent_event_names": ["SensitiveInfoAcceptEvent", "GuardAcceptEvent", "GuardEvent", "SemanticEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]}"#;
    let guard = GuardEvent::from_envelope(&decode(text)).expect("a guard subtype");
    assert_eq!(guard.extra.get("reason"), Some(&Value::from("no PII")));

    let err = ToolEvent::from_envelope(&decode(text)).expect_err("not a tool event");
    assert_eq!(err.kind(), "wrong_type");
}

#[test]
fn wrong_field_shapes_are_errors_not_panics() {
    let text = TOOL.replace(r#""name": "get_weather""#, r#""name": 42"#);
    let err = ToolEvent::from_envelope(&decode(&text)).expect_err("name must be text");
    assert_eq!(err.kind(), "invalid_fields");
    assert!(err.to_string().contains("ToolEvent"));
}
