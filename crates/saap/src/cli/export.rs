//! `<agent> export RUN`: one stored run sent as an OpenTelemetry trace to an OTLP
//! HTTP/protobuf receiver (Arize Phoenix, Langfuse, an OpenTelemetry collector), or printed
//! as JSON spans with `--dry-run`. The spans are those the engine exports live
//! (`crate::trace`). Reads the store, never writes it.

use super::args::ReadArgs;
use super::fail::{Fail, internal, invalid};
use super::reader::read_named_run;
use crate::trace::stored_run_spans;
use crate::workflow::Workflow;
use saap_otel::{OtlpConfig, Span, SpanStatus, TraceId};
use serde_json::{Value, json};
use std::io::Write;

#[derive(clap::Args)]
#[command(
    after_help = "RUN is a run id as printed by `run` and `runs` (a unique prefix is enough). The run is rebuilt
from its journal (no step runs) and sent as one trace: the run's span (AGENT), a span per step
execution (CHAIN) with its bound events and outputs, and child spans for the semantic events
its steps returned (LLM, TOOL, RETRIEVER…), with OpenInference attributes. The trace id starts
with the run id, and the span ids are the ones live export gives (EngineOptions::telemetry).

Where to: --endpoint, else the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces). Headers: --header for plain ones; secrets (API keys)
through OTEL_EXPORTER_OTLP_HEADERS (\"Authorization=Basic%20…\"), never on the command line.
Langfuse: --langfuse-url URL with LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY set.

Examples:
  export RUN --endpoint http://127.0.0.1:6006/v1/traces     to a local Arize Phoenix
  export RUN --dry-run --json                                the spans, printed, nothing sent
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 export RUN
  export RUN --langfuse-url https://cloud.langfuse.com

Exit codes: 0 exported, 2 unknown run id or bad endpoint/header, 3 database failure, a journal
that does not replay, or a receiver that refused the trace or cannot be reached."
)]
pub(super) struct ExportArgs {
    /// The run id (or a unique prefix of it).
    pub(super) run: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// The OTLP HTTP traces endpoint (a URL without a path gets /v1/traces).
    #[arg(long, value_name = "URL")]
    pub(super) endpoint: Option<String>,
    /// An extra HTTP header NAME=VALUE (repeatable). Not for secrets: use
    /// OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long, value_name = "NAME=VALUE")]
    pub(super) header: Vec<String>,
    /// Send to Langfuse at this base URL, authenticated with the LANGFUSE_PUBLIC_KEY and
    /// LANGFUSE_SECRET_KEY environment variables.
    #[arg(long, value_name = "URL", conflicts_with = "endpoint")]
    pub(super) langfuse_url: Option<String>,
    /// The trace's service.name (default: the agent's name).
    #[arg(long, value_name = "NAME")]
    pub(super) service_name: Option<String>,
    /// Print the spans instead of sending them.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Print JSON: {run_id, trace_id, spans, endpoint} (with --dry-run, `spans` lists them).
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn export_cmd(workflow: &Workflow, a: ExportArgs) -> Result<u8, Fail> {
    // The destination is checked before anything is read: a typo costs no replay.
    let config = if a.dry_run {
        None
    } else {
        Some(destination(workflow, &a)?)
    };
    let named = read_named_run(workflow, &a.from, &a.run).await?;
    let (run_id, stored) = (named.run_id, named.stored);
    let spans = stored_run_spans(&named.agent, &stored).map_err(|e| internal(e.to_string()))?;
    let trace_id = TraceId::of_run(&run_id).to_hex();
    let mut out = std::io::stdout().lock();
    let Some(config) = config else {
        if a.json {
            let doc = json!({
                "run_id": run_id,
                "trace_id": trace_id,
                "spans": spans.iter().map(span_json).collect::<Vec<_>>(),
                "endpoint": Value::Null,
            });
            writeln!(out, "{doc:#}").map_err(super::fail::io)?;
        } else {
            for s in &spans {
                let parent = s.parent_span_id.map_or("-".into(), |p| p.to_hex());
                writeln!(
                    out,
                    "{}  parent {parent}  {}  {} ms{}",
                    s.span_id.to_hex(),
                    s.name,
                    s.end_unix_nano.saturating_sub(s.start_unix_nano) / 1_000_000,
                    match &s.status {
                        SpanStatus::Error(m) => format!("  error: {m}"),
                        _ => String::new(),
                    }
                )
                .map_err(super::fail::io)?;
            }
        }
        return Ok(0);
    };
    let endpoint = config.endpoint.clone();
    let sent = tokio::task::spawn_blocking(move || saap_otel::export_spans(&config, &spans))
        .await
        .map_err(|e| internal(format!("the export stopped: {e}")))?
        .map_err(|e| internal(e.to_string()))?;
    if a.json {
        let doc = json!({
            "run_id": run_id,
            "trace_id": trace_id,
            "spans": sent,
            "endpoint": endpoint,
        });
        writeln!(out, "{doc:#}").map_err(super::fail::io)?;
    } else {
        writeln!(
            out,
            "exported run {run_id} as trace {trace_id}: {sent} spans to {endpoint}"
        )
        .map_err(super::fail::io)?;
    }
    Ok(0)
}

/// Where the spans go: the flags, else the standard environment variables.
fn destination(workflow: &Workflow, a: &ExportArgs) -> Result<OtlpConfig, Fail> {
    let mut config = if let Some(url) = &a.langfuse_url {
        let key = |var: &str| {
            std::env::var(var).map_err(|_| {
                invalid(format!(
                    "--langfuse-url needs the {var} environment variable (your Langfuse project's key)"
                ))
            })
        };
        OtlpConfig::langfuse(
            url,
            &key("LANGFUSE_PUBLIC_KEY")?,
            &key("LANGFUSE_SECRET_KEY")?,
        )
        .map_err(|e| invalid(e.to_string()))?
    } else {
        let from_env = OtlpConfig::from_env().map_err(|e| invalid(e.to_string()))?;
        match (&a.endpoint, from_env) {
            (Some(url), Some(env)) => {
                // The flag's endpoint, the environment's headers (its secrets stay there).
                let mut c = OtlpConfig::new(url.as_str()).map_err(|e| invalid(e.to_string()))?;
                c.headers = env.headers;
                c
            }
            (Some(url), None) => {
                OtlpConfig::new(url.as_str()).map_err(|e| invalid(e.to_string()))?
            }
            (None, Some(env)) => env,
            (None, None) => {
                return Err(invalid(
                    "no OTLP endpoint: pass --endpoint URL (a local Arize Phoenix: http://127.0.0.1:6006/v1/traces) or set OTEL_EXPORTER_OTLP_ENDPOINT; --dry-run prints the spans instead",
                ));
            }
        }
    };
    for h in &a.header {
        let Some((name, value)) = h.split_once('=') else {
            return Err(invalid(format!(
                "--header `{}` is not NAME=VALUE",
                h.chars().take(64).collect::<String>()
            )));
        };
        config = config
            .header(name.trim(), value.trim())
            .map_err(|e| invalid(e.to_string()))?;
    }
    let service = a.service_name.as_deref().unwrap_or(workflow.name());
    Ok(config.service_name(service))
}

/// A span as JSON, for `--dry-run --json`.
fn span_json(s: &Span) -> Value {
    json!({
        "trace_id": s.trace_id.to_hex(),
        "span_id": s.span_id.to_hex(),
        "parent_span_id": s.parent_span_id.map(|p| p.to_hex()),
        "name": s.name,
        "start_unix_nano": s.start_unix_nano,
        "end_unix_nano": s.end_unix_nano,
        "status": match &s.status {
            SpanStatus::Unset => json!({"code": "unset"}),
            SpanStatus::Ok => json!({"code": "ok"}),
            SpanStatus::Error(m) => json!({"code": "error", "message": m}),
        },
        "attributes": s.attributes,
    })
}
