//! Turns stored bytes into [`Message`]s: SAAP event envelopes (saap's and the Python
//! implementation's, one wire format), saap journal entries, or, when neither fits, the raw
//! payload with the reason it does not decode.
//!
//! Must not fail: a message that does not decode is reported inside the message, never as an
//! error, so that one bad message never hides the rest of a page. Every input is bounded by
//! [`DecodeLimits`] and every raw excerpt is cut.

use crate::model::{Address, EventView, Flags, JournalView, Message, Undecodable};
use crate::timefmt::format_ns;
use saap_protocol::{AgentEventSubject, Classification, DecodeLimits, EventEnvelope, Hierarchy};
use serde_json::Value;
use std::sync::OnceLock;

/// Bytes of a raw payload shown for an undecodable message.
pub const RAW_EXCERPT: usize = 2048;
/// Headers kept per message.
pub const MAX_HEADERS: usize = 32;
/// Bytes kept per header value.
pub const MAX_HEADER_VALUE: usize = 256;

/// The types every decode resolves against: the built-in hierarchy and the Python agent
/// package's events.
pub fn hierarchy() -> &'static Hierarchy {
    static H: OnceLock<Hierarchy> = OnceLock::new();
    H.get_or_init(Hierarchy::builtin_with_agent_package)
}

/// The decode limits (saap-protocol's defaults).
pub fn limits() -> &'static DecodeLimits {
    static L: OnceLock<DecodeLimits> = OnceLock::new();
    L.get_or_init(DecodeLimits::default)
}

/// Flags from a classification.
pub fn flags(c: Classification) -> Flags {
    Flags {
        control: c.control,
        display: c.display,
        start: c.start,
        stop: c.stop,
        exception: c.exception,
    }
}

/// The view of a decoded envelope.
pub fn event_view(e: &EventEnvelope) -> EventView {
    EventView {
        event_id: e.event_id.to_string(),
        event_name: e.event_name.clone(),
        known_type: e.known_type.clone().filter(|k| *k != e.event_name),
        created_at: e.created_at,
        created: Some(format_ns(e.created_at)),
        flags: flags(e.classification()),
        json: e.to_json(),
    }
}

/// The subject's parts, when it is an agent event subject.
pub fn address_of(subject: &str) -> Address {
    match AgentEventSubject::parse(subject) {
        Ok(s) => {
            let r = s.run();
            Address {
                agent_class: Some(r.agent_class().to_owned()),
                agent_id: Some(r.agent_id().to_owned()),
                thread_id: Some(r.thread_id().to_owned()),
                display_id: Some(r.display_id().to_owned()),
                run_id: Some(r.run_id().to_owned()),
                kind: Some(s.kind().as_token().to_owned()),
                event_name: Some(s.event_name().to_owned()),
            }
        }
        Err(_) => Address::default(),
    }
}

/// The raw excerpt of a payload that did not decode.
pub fn undecodable(kind: &str, reason: String, payload: &[u8]) -> Undecodable {
    let cut = payload.len().min(RAW_EXCERPT);
    Undecodable {
        kind: kind.to_owned(),
        reason,
        raw: String::from_utf8_lossy(&payload[..cut]).into_owned(),
        raw_bytes: payload.len(),
    }
}

/// Cuts a header value.
pub fn clip_header(v: &str) -> String {
    if v.len() <= MAX_HEADER_VALUE {
        return v.to_owned();
    }
    let mut end = MAX_HEADER_VALUE;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &v[..end])
}

/// A message of a stream: an event on an agent subject, a journal message on a saap journal
/// stream, else whatever decodes as an event; raw with the reason otherwise.
pub fn stream_message(
    seq: u64,
    time: Option<String>,
    subject: &str,
    headers: Vec<(String, String)>,
    payload: &[u8],
) -> Message {
    let mut m = Message {
        seq,
        time,
        subject: Some(subject.to_owned()),
        address: address_of(subject),
        headers,
        event: None,
        journal: Vec::new(),
        undecodable: None,
        after_stop: false,
    };
    if subject.starts_with("saap.journal.") {
        match journal_message(payload) {
            Ok(entries) => m.journal = entries,
            Err(reason) => {
                m.undecodable = Some(undecodable("not_a_journal_message", reason, payload))
            }
        }
        if let Some(run) = subject.split('.').nth(3) {
            m.address.agent_class = subject.split('.').nth(2).map(str::to_owned);
            m.address.run_id = Some(run.to_owned());
        }
        return m;
    }
    match EventEnvelope::decode(payload, hierarchy(), limits()) {
        Ok(e) => m.event = Some(event_view(&e)),
        Err(e) => m.undecodable = Some(undecodable(e.kind(), e.to_string(), payload)),
    }
    m
}

/// The entries of one message of a `saap_journal_*` stream (`{"m"?, "b": [{"x", "e", "r"}]}`).
pub fn journal_message(payload: &[u8]) -> Result<Vec<JournalView>, String> {
    if payload.len() > limits().max_bytes.saturating_mul(4) {
        return Err(format!(
            "{} bytes, more than this reader's bound",
            payload.len()
        ));
    }
    let v: Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    let batches = v
        .get("b")
        .and_then(Value::as_array)
        .ok_or("no `b` list of journal entries")?;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let index = b.get("x").and_then(Value::as_u64).unwrap_or(0);
        let entry = b.get("e").cloned().unwrap_or(Value::Null);
        let records = b
            .get("r")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (view, _) = journal_entry(index, &entry, records);
        out.push(view);
    }
    Ok(out)
}

/// The classification bits the store keeps per event (`saap_dispatch::EventKind`, the
/// documented journal schema): control 1, display 2, start 4, stop 8, exception 16.
pub fn flags_of_bits(k: u64) -> Flags {
    Flags {
        control: k & 1 != 0,
        display: k & 2 != 0,
        start: k & 4 != 0,
        stop: k & 8 != 0,
        exception: k & 16 != 0,
    }
}

/// One journal entry (`{"i": {"in": …}, "pre": [...]}`) with its records, and the event it
/// appends (if it is an `append`). The event's JSON is the stored payload with the envelope
/// keys (`event_id`, `_event_name`) added.
pub fn journal_entry(
    index: u64,
    entry: &Value,
    records: Vec<Value>,
) -> (JournalView, Option<EventView>) {
    let input = entry.get("i").unwrap_or(&Value::Null);
    let kind = input.get("in").and_then(Value::as_str).unwrap_or("unknown");
    let mut view = JournalView {
        index,
        input: kind.to_owned(),
        execution: input.get("execution").and_then(Value::as_u64),
        outputs: Vec::new(),
        error: input
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned),
        preconditions: entry
            .get("pre")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_bool).collect())
            .unwrap_or_default(),
        records,
    };
    if let Some(outs) = input.get("outputs").and_then(Value::as_array) {
        view.outputs = outs.iter().map(stored_event).collect();
    }
    let event = input.get("event").map(stored_event);
    (view, event)
}

/// An event as a saap journal stores it (`{"id", "n", "k", "p"}`).
pub fn stored_event(e: &Value) -> EventView {
    let id = e.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
    let name = e.get("n").and_then(Value::as_str).unwrap_or("").to_owned();
    let flags = flags_of_bits(e.get("k").and_then(Value::as_u64).unwrap_or(0));
    let payload = e.get("p").cloned().unwrap_or(Value::Null);
    let created_at = payload.get("created_at").and_then(Value::as_i64);
    let mut json = serde_json::Map::new();
    json.insert("event_id".into(), Value::String(id.clone()));
    json.insert("_event_name".into(), Value::String(name.clone()));
    match payload {
        Value::Object(fields) => {
            for (k, v) in fields {
                json.entry(k).or_insert(v);
            }
        }
        Value::Null => {}
        other => {
            json.insert("payload".into(), other);
        }
    }
    EventView {
        event_id: id,
        event_name: name,
        known_type: None,
        created_at: created_at.unwrap_or(0),
        created: created_at.map(format_ns),
        flags,
        json: Value::Object(json),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PY: &str = r#"{"event_id": "65a1b2c3d4e5f60718293a4b", "created_at": 1767261600000000000, "_event_name": "AnswerStopEvent", "_parent_event_names": ["AnswerStopEvent", "StopEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"], "display_name": {"de": null, "en": "Answer", "fr": null, "it": null}, "display_description": null, "answer": "42"}"#;

    #[test]
    fn a_python_event_decodes_with_its_subject_parts() {
        let m = stream_message(
            7,
            None,
            "agent.QaAgent.a1.t1.d1.r1.control_event.AnswerStopEvent.65a1b2c3d4e5f60718293a4b",
            Vec::new(),
            PY.as_bytes(),
        );
        let e = m.event.unwrap();
        assert_eq!(e.event_name, "AnswerStopEvent");
        assert!(e.flags.stop && e.flags.control);
        assert_eq!(e.json["answer"], "42");
        assert_eq!(m.address.run_id.as_deref(), Some("r1"));
        assert!(m.undecodable.is_none());
    }

    #[test]
    fn garbage_is_kept_raw_with_the_reason() {
        let m = stream_message(
            1,
            None,
            "agent.A.a.t.d.r.control_event.X.y",
            Vec::new(),
            b"{not json",
        );
        let u = m.undecodable.unwrap();
        assert_eq!(u.kind, "not_json");
        assert_eq!(u.raw, "{not json");
        let big = vec![b'x'; 10_000];
        let m = stream_message(2, None, "other", Vec::new(), &big);
        assert_eq!(m.undecodable.unwrap().raw.len(), RAW_EXCERPT);
    }

    #[test]
    fn journal_entries_show_their_event_and_records() {
        let entry: Value = serde_json::from_str(
            r#"{"i":{"in":"append","event":{"id":"65a1b2c3d4e5f60718293a4b","n":"Q","k":5,"p":{"text":"hi"}}}}"#,
        )
        .unwrap();
        let (v, e) = journal_entry(
            0,
            &entry,
            vec![serde_json::json!({"record":"run_started","seq":0})],
        );
        assert_eq!(v.input, "append");
        let e = e.unwrap();
        assert!(e.flags.start && e.flags.control);
        assert_eq!(e.json["text"], "hi");
        let msg = br#"{"m":{"t":"t1","w":"W","f":1},"b":[{"x":0,"e":{"i":{"in":"retry","execution":3}},"r":[]}]}"#;
        let j = journal_message(msg).unwrap();
        assert_eq!(j[0].input, "retry");
        assert_eq!(j[0].execution, Some(3));
        let done: Value = serde_json::from_str(
            r#"{"i":{"in":"complete","execution":1,"attempt":1,"outputs":[{"id":"65a1b2c3d4e5f60718293a4c","n":"Done","k":9,"p":{}}]}}"#,
        )
        .unwrap();
        let (v, e) = journal_entry(1, &done, Vec::new());
        assert!(e.is_none());
        assert_eq!(v.outputs[0].event_name, "Done");
        assert!(v.outputs[0].flags.stop);
        assert_eq!(v.outputs[0].created, None);
    }
}
