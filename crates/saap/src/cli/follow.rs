//! Following a run until it ends or waits for outside input, and the report printed then
//! (text or `--json`): its status, timeline, display events and counts.

use super::fail::{Fail, engine_fail, internal, io};
#[cfg(feature = "nats")]
use super::reader::{NatsReader, read_view};
use crate::engine::Engine;
use crate::history::RunOutcome;
#[cfg(feature = "nats")]
use crate::history::StoredRunView;
use crate::snapshot::RunSnapshot;
#[cfg(feature = "nats")]
use crate::workflow::Workflow;
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

/// Follows a run by looking at its last journal message every 100 ms and reading the
/// journal again when it changed (the NATS engine: the run lives in worker processes), printing display events after `from` and the end as `follow` does.
#[cfg(feature = "nats")]
pub(super) async fn follow_stored(
    workflow: &Workflow,
    reader: &NatsReader,
    run_id: &str,
    from: usize,
    sent: saap_dispatch::EventId,
    timeout: f64,
    json_lines: bool,
) -> Result<u8, Fail> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));

    let mut shown = from;
    let mut out = std::io::stdout();
    let mut mid_line = false;
    let mut last_seq = None;
    let mut current: Option<RunSnapshot> = None;
    loop {
        // Re-read and rebuild the run only when its journal has a new message.
        let seq = reader
            .nats
            .last_journal_seq(run_id)
            .await
            .map_err(|e| internal(e.to_string()))?;
        if current.is_none() || seq != last_seq {
            last_seq = seq;
            let snap = view_snapshot(read_view(workflow, reader, run_id).await?);
            for at in shown..snap.run.log().len() {
                if snap.run.log()[at].id == sent {
                    continue;
                }
                mid_line = show_display(&snap, at, json_lines, &mut out, mid_line).map_err(io)?;
            }
            shown = shown.max(snap.run.log().len());
            let ended = snap.run.is_terminated() && snap.running() == 0;
            // A run paused on its budget waits for a person (`resume`), not for this process.
            let paused = snap.run.budget_spent() && snap.running() == 0;
            current = Some(snap);
            if ended || paused {
                break;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let snap = current.ok_or_else(|| internal(format!("run `{run_id}` vanished")))?;
    if mid_line {
        writeln!(out).map_err(io)?;
    }
    report(&snap, run_id, timeout, json_lines, &mut out)
}

/// A rebuilt stored run as a snapshot (payloads by position; the ExceptionEvent the core
/// made for a failed step carries the step's error).
#[cfg(feature = "nats")]
pub(super) fn view_snapshot(view: StoredRunView) -> RunSnapshot {
    let payloads = (0..view.run.log().len())
        .map(|seq| {
            let id = view.run.log()[seq].id;
            view.payloads
                .get(&id)
                .cloned()
                .unwrap_or_else(|| crate::event::Payload::from_json(view.fields(seq as u32)))
        })
        .collect();
    RunSnapshot {
        run_id: view.run_id,
        thread_id: view.thread_id,
        run: view.run,
        payloads,
        failure: None,
        display_by: view.display_by,
    }
}

/// Streams a run's display events from `from` on until it ends or `timeout` passes, then
/// prints how it stands. Exit code: 0 stopped, 1 failed or still live.
pub(super) async fn follow(
    engine: &Engine,
    run_id: &str,
    from: usize,
    sent: Option<saap_dispatch::EventId>,
    timeout: f64,
    json_lines: bool,
) -> Result<u8, Fail> {
    let mut watch = engine.watch(run_id).map_err(engine_fail)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
    let mut shown = from;
    let mut out = std::io::stdout();
    let mut mid_line = false;
    let snap = loop {
        let snap = engine
            .snapshot(run_id)
            .ok_or_else(|| internal(format!("run `{run_id}` vanished from the engine")))?;
        for seq in shown..snap.run.log().len() {
            if Some(snap.run.log()[seq].id) == sent {
                continue; // the event this command sent
            }
            mid_line = show_display(&snap, seq, json_lines, &mut out, mid_line).map_err(io)?;
        }
        shown = shown.max(snap.run.log().len());
        let ended = snap.run.is_terminated() && snap.running() == 0;
        // A run paused on its budget waits for a person (`resume`), not for this process.
        let paused = snap.run.budget_spent() && snap.running() == 0;
        if ended || paused || snap.failure.is_some() {
            break snap;
        }
        match tokio::time::timeout_at(deadline, watch.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => break snap,
        }
    };
    if mid_line {
        writeln!(out).map_err(io)?;
    }
    // The end is reported only once it is durable.
    if snap.run.is_terminated() {
        let _ = tokio::time::timeout_at(deadline, engine.wait_for_end(run_id)).await;
    }
    report(&snap, run_id, timeout, json_lines, &mut out)
}

/// Prints how a followed run stands (the result line, or what it waits for) and returns the
/// exit code: 0 stopped, 1 failed or still live.
pub(super) fn report(
    snap: &RunSnapshot,
    run_id: &str,
    timeout: f64,
    json_lines: bool,
    out: &mut impl Write,
) -> Result<u8, Fail> {
    let outcome = RunOutcome::of(&snap.run);
    let result = terminal(snap);
    if json_lines {
        let line = json!({
            "run_id": run_id,
            "thread_id": snap.thread_id,
            "status": outcome.as_str(),
            "state": snap.run.progress().as_str(),
            "result": result.as_ref().map(|(n, f)| json!({"event": n, "fields": f})),
            "executions": counts_json(&snap.run),
            "waiting_for": (outcome == RunOutcome::Live).then(|| snap.waiting_for()),
        });
        writeln!(out, "{line}").map_err(io)?;
    } else {
        match &result {
            Some((n, f)) => {
                writeln!(out, "{n} {f}").map_err(io)?;
                eprintln!(
                    "run {run_id} {} ({}); executions: {}",
                    outcome.as_str(),
                    n,
                    counts_text(&snap.run)
                );
            }
            None if snap.run.budget_spent() => {
                eprintln!(
                    "run {run_id} is paused: its budget is spent; it stays stored: `show {run_id}` reads it, `resume {run_id}` continues it.\n{}",
                    snap.waiting_for()
                );
            }
            None => {
                eprintln!(
                    "run {run_id} is still live after {timeout}s; it stays stored: `show {run_id}` reads it, `send {run_id} --event JSON` continues it.\n{}",
                    snap.waiting_for()
                );
            }
        }
    }
    Ok(match outcome {
        RunOutcome::Stopped => 0,
        _ => 1,
    })
}

/// Prints the event at `seq` if it is a display event that does not end the run. Returns
/// whether the output is in the middle of a line (after streamed chunks).
pub(super) fn show_display(
    snap: &RunSnapshot,
    seq: usize,
    json_lines: bool,
    out: &mut impl Write,
    mid_line: bool,
) -> std::io::Result<bool> {
    let e = snap.run.log()[seq];
    if !e.kind.is_display() || e.kind.is_terminal() || e.kind.is_start() {
        return Ok(mid_line);
    }
    let name = snap.run.type_name(e.ty);
    let fields = snap.payloads.get(seq).map(|p| (**p).clone());
    let fields = fields.unwrap_or(Value::Null);
    if json_lines {
        writeln!(
            out,
            "{}",
            json!({"display": {"event": name, "event_id": e.id.to_string(), "fields": fields}})
        )?;
        return Ok(false);
    }
    if name == "ChunkEvent"
        && let Some(chunk) = fields.get("chunk").and_then(Value::as_str)
    {
        write!(out, "{chunk}")?;
        out.flush()?;
        return Ok(true);
    }
    if mid_line {
        writeln!(out)?;
    }
    match semantic_line(name, &fields) {
        Some(line) => writeln!(out, "[{name}] {line}")?,
        None => writeln!(out, "[{name}] {fields}")?,
    }
    out.flush()?;
    Ok(false)
}

/// A model call, tool call or cost in one line (their JSON runs to kilobytes: messages,
/// schemas); `None` for any other event, or one whose fields do not parse.
#[cfg(feature = "llm")]
fn semantic_line(name: &str, fields: &Value) -> Option<String> {
    use crate::semantic::{LLMCostEvent, LLMEvent, ToolEvent};
    let cut = |s: &str| {
        let s = s.replace('\n', " ");
        match s.char_indices().nth(160) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    let n = |v: Option<i64>| v.map_or("?".to_string(), |n| n.to_string());
    match name {
        "LLMEvent" | "LLMStopEvent" => {
            let e: LLMEvent = serde_json::from_value(fields.clone()).ok()?;
            let mut line = format!(
                "{}: {} prompt + {} completion tokens",
                e.chat_model_name.as_deref().unwrap_or("model"),
                n(e.token_count_prompt),
                n(e.token_count_completion)
            );
            if let Some(f) = &e.finish_reason {
                line.push_str(&format!(", finish {f}"));
            }
            if let Some(ms) = e.latency_ms {
                line.push_str(&format!(", {ms:.0} ms"));
            }
            Some(line)
        }
        "ToolEvent" => {
            let e: ToolEvent = serde_json::from_value(fields.clone()).ok()?;
            let args = e
                .parameters
                .map(|p| Value::Object(p).to_string())
                .unwrap_or_default();
            let arrow = if e.is_error == Some(true) {
                "→ error:"
            } else {
                "→"
            };
            Some(format!(
                "{}({}) {arrow} {}",
                e.name.as_deref().unwrap_or("tool"),
                cut(&args),
                cut(e.result.as_deref().unwrap_or(""))
            ))
        }
        "LLMCostEvent" => {
            let e: LLMCostEvent = serde_json::from_value(fields.clone()).ok()?;
            Some(format!(
                "{}: ${:.8} ({} prompt + {} completion tokens)",
                e.llm_name,
                e.prompt_tokens_costs + e.completion_tokens_costs + e.embedding_tokens_costs,
                e.prompt_token_count,
                e.completion_token_count
            ))
        }
        _ => None,
    }
}

#[cfg(not(feature = "llm"))]
fn semantic_line(_name: &str, _fields: &Value) -> Option<String> {
    None
}

pub(super) fn terminal(snap: &RunSnapshot) -> Option<(String, Value)> {
    match snap.run.status() {
        saap_dispatch::RunStatus::Terminated { by } => {
            let ty = snap.run.log()[by as usize].ty;
            let fields = snap
                .payloads
                .get(by as usize)
                .map(|p| (**p).clone())
                .unwrap_or(Value::Null);
            Some((snap.run.type_name(ty).to_string(), fields))
        }
        _ => None,
    }
}

pub(super) fn counts(run: &saap_dispatch::Run) -> Vec<(String, usize)> {
    run.spec()
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), run.execution_count(i as u32)))
        .collect()
}

pub(super) fn counts_text(run: &saap_dispatch::Run) -> String {
    counts(run)
        .iter()
        .map(|(n, c)| format!("{n} ×{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn counts_json(run: &saap_dispatch::Run) -> Value {
    Value::Object(
        counts(run)
            .into_iter()
            .map(|(n, c)| (n, Value::from(c)))
            .collect(),
    )
}
