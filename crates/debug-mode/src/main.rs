//! `debug-mode` command-line entry point. Data goes to stdout, diagnostics to stderr (with
//! `--json`, the error envelope too); the exit code comes from the error code (see
//! `error.rs`).

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use debug_mode::client::{self, Conn};
use debug_mode::error::reason;
use debug_mode::error::{DmError, ErrorCode};
use debug_mode::output::{self, Hint, Report};
use debug_mode::query::{self, Cursor, Job, LogsSnapshot, Position};
use debug_mode::store::{
    LogsOrder, LogsPage, LogsQuery, SessionSummary, SnapshotRef, StatusReport,
};
use debug_mode::{paths, service, templates, timefmt};

const AFTER_HELP: &str = "\
Workflow (one investigation = one session):
  debug-mode create                                   # prints Session ID, Ingest URL, Append Path
  debug-mode template --language python --ingest file # helper + call template to insert
  debug-mode reset --session <id>                     # clear evidence before reproducing
  debug-mode logs --session <id>                      # read the evidence
  debug-mode logs --session <id> --hypothesis H1      # only one hypothesis
  debug-mode query --session <id> 'select(.hypothesisId == \"H2\") | .data'
  debug-mode status --session <id>                    # malformed records and evidence health

Exit codes: 0 ok, 1 stale or invalid cursor/snapshot (restart paging), 2 invalid arguments
or unsupported language, 3 version incompatibility, 4 background service unavailable,
5 session not found, 6 evidence malformed or unreadable.";

#[derive(Parser, Debug)]
#[command(
    name = "debug-mode",
    version,
    about = "Evidence-first debugging: isolated sessions, language probes, and filtered runtime evidence.",
    after_help = AFTER_HELP,
    propagate_version = true,
    disable_help_subcommand = true
)]
struct Cli {
    /// Print the result as one JSON envelope on stdout (errors: on stderr) instead of pretty text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug)]
struct SessionArg {
    /// Session ID printed by `debug-mode create`.
    #[arg(long, value_name = "id")]
    session: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a new session; prints its Session ID, Ingest URL and Append Path.
    #[command(after_help = "Example:\n  debug-mode create")]
    Create,
    /// Print the helper and call template for one language and ingest method.
    #[command(
        after_help = "Examples:\n  debug-mode template --language typescript --ingest http\n  debug-mode template --language python --ingest file\n\nSupported: javascript+http, typescript+http, python, go, ruby, php, powershell,\ncsharp, swift, rust, cpp, c, java, kotlin (all +file)."
    )]
    Template {
        /// Language of the file to instrument (e.g. javascript, typescript, python, go, rust).
        #[arg(long, value_name = "language")]
        language: String,
        /// How events reach the session: `http` (Ingest URL) or `file` (Append Path).
        #[arg(long, value_name = "http|file")]
        ingest: String,
    },
    /// Clear the session's events, diagnostics and sequence numbers before a reproduction.
    #[command(
        after_help = "Example:\n  debug-mode reset --session 0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42"
    )]
    Reset(SessionArg),
    /// Show validated events by time, with pagination and hypothesis filters.
    #[command(
        after_help = "Examples:\n  debug-mode logs --session <id>\n  debug-mode logs --session <id> --hypothesis H1 --hypothesis H3\n  debug-mode logs --session <id> --offset 50 --limit 50\n  debug-mode logs --session <id> --order sequence"
    )]
    Logs {
        #[command(flatten)]
        session: SessionArg,
        /// Maximum number of events to show (1-1000).
        #[arg(long, value_name = "n", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: u64,
        /// Number of matching events to skip.
        #[arg(long, value_name = "n", default_value_t = 0)]
        offset: u64,
        /// Only events with this hypothesis label (repeatable).
        #[arg(long = "hypothesis", value_name = "label")]
        hypotheses: Vec<String>,
        /// Order: `timestamp` (probe time, then sequence) or `sequence` (accepted order).
        #[arg(long, value_name = "order", default_value = "timestamp", value_parser = ["timestamp", "sequence"])]
        order: String,
        /// Continue the view of an earlier page (printed in its next-page command); a reset
        /// makes it stale.
        #[arg(long, value_name = "snapshot")]
        snapshot: Option<String>,
    },
    /// Run a jaq (jq) program over the session's events.
    #[command(
        after_help = "The program runs once per event (streaming). Use --slurp to receive all events as one array.\nWith --cursor the program may be left out: the cursor carries it.\n\nExamples:\n  debug-mode query --session <id> 'select(.hypothesisId == \"H1\") | .data'\n  debug-mode query --session <id> '{h: .hypothesisId, hit: .data.hit}'\n  debug-mode query --session <id> --slurp 'group_by(.hypothesisId) | map({h: .[0].hypothesisId, n: length})'\n  debug-mode query --session <id> --cursor <cursor printed by the previous page>"
    )]
    Query {
        #[command(flatten)]
        session: SessionArg,
        /// The jaq program (quote it in single quotes); optional with --cursor.
        #[arg(value_name = "program", required_unless_present = "cursor")]
        program: Option<String>,
        /// Run the program once over an array of all events (capped) instead of per event.
        #[arg(long)]
        slurp: bool,
        /// Maximum results per page (1-1000).
        #[arg(long, value_name = "n", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: u64,
        /// Continue from a previous page (the cursor carries the program and its options).
        #[arg(long, value_name = "cursor")]
        cursor: Option<String>,
        /// Only events with this hypothesis label (repeatable).
        #[arg(long = "hypothesis", value_name = "label")]
        hypotheses: Vec<String>,
        /// Stop the query after this many milliseconds.
        #[arg(long, value_name = "ms", default_value_t = query::DEFAULT_TIMEOUT_MS, value_parser = clap::value_parser!(u64).range(100..=600_000))]
        timeout_ms: u64,
        /// Memory limit of the query in MiB.
        #[arg(long, value_name = "mb", default_value_t = query::DEFAULT_MEMORY_MB, value_parser = clap::value_parser!(u64).range(64..=16_384))]
        max_memory_mb: u64,
    },
    /// Evidence health and every malformed-record diagnostic.
    #[command(after_help = "Example:\n  debug-mode status --session <id>")]
    Status(SessionArg),
    /// List sessions created today (newest first, at most 20).
    #[command(after_help = "Examples:\n  debug-mode sessions\n  debug-mode sessions --all")]
    Sessions {
        /// Include sessions created before today.
        #[arg(long)]
        all: bool,
    },
    /// Permanently delete a session's evidence, diagnostics and metadata.
    #[command(after_help = "Example:\n  debug-mode clean --session <id>")]
    Clean(SessionArg),
    /// Stop the background service now (sessions are kept; the next command restarts it).
    Stop,
    #[command(name = "__service", hide = true)]
    Service,
    #[command(name = "__query-worker", hide = true)]
    QueryWorker,
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let wants_json = argv.iter().skip(1).any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                // `--version` prints the bare version, `--help` the help; both succeed, with
                // or without `--json`.
                ErrorKind::DisplayVersion => {
                    println!("{}", debug_mode::VERSION);
                    std::process::exit(0);
                }
                ErrorKind::DisplayHelp => {
                    let _ = e.print();
                    std::process::exit(0);
                }
                _ => {}
            }
            if wants_json {
                let rendered = e.render().to_string();
                let body = rendered.split("\nUsage:").next().unwrap_or(&rendered);
                let message = body
                    .trim_start_matches("error: ")
                    .split('\n')
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let err = DmError::new(
                    ErrorCode::InvalidArguments,
                    message,
                    "run `debug-mode --help` or `debug-mode <command> --help` for usage and examples",
                );
                eprintln!("{}", output::error_json(&err));
                std::process::exit(2);
            }
            let _ = e.print();
            std::process::exit(2);
        }
    };
    match cli.command {
        Command::Service => std::process::exit(run_service()),
        Command::QueryWorker => std::process::exit(query::worker_main()),
        _ => {}
    }
    init_cli_tracing();
    let json = cli.json;
    match run(cli.command) {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            let text = if json {
                format!("{}\n", report.to_json())
            } else {
                report.to_pretty()
            };
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Err(e) => {
            if json {
                eprintln!("{}", output::error_json(&e));
            } else {
                eprint!("{}", output::error_pretty(&e));
            }
            std::process::exit(e.code.exit_code());
        }
    }
}

fn init_cli_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DEBUG_MODE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

fn run_service() -> i32 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let result = (|| -> anyhow::Result<bool> {
        let root = paths::state_root()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(8)
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        rt.block_on(service::run(service::Config::from_env(root)))
    })();
    match result {
        Ok(_) => 0,
        Err(e) => {
            tracing::error!("service failed: {e:#}");
            4
        }
    }
}

fn connect() -> Result<(std::path::PathBuf, Conn), DmError> {
    let root = paths::state_root()?;
    let conn = client::ensure_service(&root)?;
    Ok((root, conn))
}

fn session_path(id: &str, op: &str) -> Result<String, DmError> {
    paths::validate_session_id(id)?;
    Ok(format!("/v1/sessions/{id}/{op}"))
}

fn run(cmd: Command) -> Result<Report, DmError> {
    match cmd {
        Command::Create => create(),
        Command::Template { language, ingest } => template(&language, &ingest),
        Command::Reset(s) => reset(&s.session),
        Command::Logs {
            session,
            limit,
            offset,
            hypotheses,
            order,
            snapshot,
        } => logs(LogsArgs {
            session: session.session,
            limit,
            offset,
            hypotheses,
            order: if order == "sequence" {
                LogsOrder::Sequence
            } else {
                LogsOrder::Timestamp
            },
            snapshot,
        }),
        Command::Query {
            session,
            program,
            slurp,
            limit,
            cursor,
            hypotheses,
            timeout_ms,
            max_memory_mb,
        } => run_query(QueryArgs {
            session: session.session,
            program,
            slurp,
            limit,
            cursor,
            hypotheses,
            timeout_ms,
            max_memory_mb,
        }),
        Command::Status(s) => status(&s.session),
        Command::Sessions { all } => sessions(all),
        Command::Clean(s) => clean(&s.session),
        Command::Stop => stop(),
        Command::Service | Command::QueryWorker => Err(DmError::new(
            ErrorCode::InvalidArguments,
            "internal command",
            "run `debug-mode --help`",
        )),
    }
}

fn session_lines(r: &mut Report, v: &Value) {
    let url = client::str_field(v, "ingestUrl");
    let append = paths::display_path(std::path::Path::new(&client::str_field(v, "appendPath")));
    r.records = format!("Ingest URL   {url}\nAppend Path  {append}\n");
}

fn create() -> Result<Report, DmError> {
    let (_, conn) = connect()?;
    let v: Value = conn.call("POST", "/v1/sessions", &json!({}))?;
    let id = client::str_field(&v, "sessionId");
    let mut r = Report::new("create", "SESSION CREATED");
    r.session_id = Some(id.clone());
    session_lines(&mut r, &v);
    r.data = json!({
        "sessionId": id,
        "ingestUrl": v["ingestUrl"],
        "appendPath": v["appendPath"],
        "createdAt": v["createdAt"],
    });
    r.hints = vec![
        Hint::run(
            "template",
            "debug-mode template --language <language> --ingest <http|file>",
            "print the helper and call template for the language of the code to instrument",
        ),
        Hint::run(
            "reset",
            format!("debug-mode reset --session {id}"),
            "clear the session before each reproduction",
        ),
        Hint::run(
            "read-logs",
            format!("debug-mode logs --session {id}"),
            "read the evidence after reproducing",
        ),
    ];
    Ok(r)
}

fn template(language: &str, ingest: &str) -> Result<Report, DmError> {
    let t = templates::find(language, ingest)?;
    let mut r = Report::new(
        "template",
        format!("TEMPLATE {} + {}", t.language, t.ingest),
    );
    let placeholders: serde_json::Map<String, Value> = t
        .placeholders
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    let schema: serde_json::Map<String, Value> = templates::EVENT_SCHEMA
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    r.data = json!({
        "language": t.language,
        "ingest": t.ingest,
        "dataEncoding": t.data_encoding,
        "placement": { "helper": t.helper_placement, "call": "statement" },
        "regionMarkers": { "open": t.region_open, "close": t.region_close },
        "languageStandard": t.standard,
        "helperTemplate": t.helper,
        "callTemplate": t.call,
        "placeholders": placeholders,
        "eventSchema": schema,
    });
    let width = t
        .placeholders
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0);
    let mut ph = String::new();
    for (k, v) in t.placeholders {
        ph.push_str(&format!("{k:<width$}  {v}\n"));
    }
    let mut sc = String::new();
    for (k, v) in templates::EVENT_SCHEMA {
        sc.push_str(&format!("{k:<12}  {v}\n"));
    }
    r.stat("dataEncoding", "Data encoding", t.data_encoding);
    r.stat(
        "placement",
        "Placement",
        format!("helper {}, call statement", t.helper_placement),
    );
    r.records = format!(
        "HELPER TEMPLATE\n{}\n\nCALL TEMPLATE\n{}\n\nPLACEHOLDERS\n{}\nEVENT SCHEMA\n{}",
        t.helper.trim_end(),
        t.call.trim_end(),
        ph,
        sc
    );
    r.hints = vec![
        Hint::note(
            "insert-probes",
            "replace every placeholder; keep the region markers so probes can be found and removed",
        ),
        Hint::run(
            "reset",
            "debug-mode reset --session <id>",
            "clear the session before each reproduction",
        ),
    ];
    Ok(r)
}

fn reset(id: &str) -> Result<Report, DmError> {
    let path = session_path(id, "reset")?;
    let (_, conn) = connect()?;
    let v: Value = conn.call("POST", &path, &json!({}))?;
    let mut r = Report::new("reset", "SESSION RESET");
    r.session_id = Some(id.to_owned());
    session_lines(&mut r, &v);
    r.stat("eventCount", "Events", 0);
    r.data = json!({
        "sessionId": id,
        "ingestUrl": v["ingestUrl"],
        "appendPath": v["appendPath"],
    });
    r.hints = vec![
        Hint::note(
            "reproduce",
            "reproduce the problem now; events restart at sequence 1",
        ),
        Hint::run(
            "read-logs",
            format!("debug-mode logs --session {id}"),
            "read the evidence after reproducing",
        ),
    ];
    Ok(r)
}

struct LogsArgs {
    session: String,
    limit: u64,
    offset: u64,
    hypotheses: Vec<String>,
    order: LogsOrder,
    snapshot: Option<String>,
}

/// The `logs` command for one page of a view (filters, order, and the snapshot, if any).
fn logs_cmd(a: &LogsArgs, offset: u64, snapshot: Option<&str>) -> String {
    let mut s = format!("debug-mode logs --session {}", a.session);
    for h in &a.hypotheses {
        s.push_str(&format!(" --hypothesis {}", shell_quote(h)));
    }
    if a.order == LogsOrder::Sequence {
        s.push_str(" --order sequence");
    }
    if let Some(snap) = snapshot {
        s.push_str(&format!(" --snapshot {snap}"));
    }
    s.push_str(&format!(" --offset {offset} --limit {}", a.limit));
    s
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn hypotheses_text(page_h: &[debug_mode::store::HypothesisCount]) -> String {
    if page_h.is_empty() {
        return "none".into();
    }
    page_h
        .iter()
        .map(|h| format!("{} ({})", h.hypothesis_id, h.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Warns when the redactor replaced values before storage (the data shown is not what the
/// probe sent).
fn warn_redacted(r: &mut Report, redacted: u64) {
    if redacted > 0 {
        r.warn(
            "SECRET_REDACTED",
            format!(
                "{redacted} event(s) of this session had secret-looking values replaced by [REDACTED] before storage; record the smallest non-secret value instead"
            ),
        );
    }
}

fn logs(a: LogsArgs) -> Result<Report, DmError> {
    let id = a.session.as_str();
    let path = session_path(id, "logs")?;
    let snapshot = a
        .snapshot
        .as_deref()
        .map(|s| LogsSnapshot::decode(s, id))
        .transpose()?;
    let (_, conn) = connect()?;
    let req = LogsQuery {
        offset: usize::try_from(a.offset).unwrap_or(usize::MAX),
        limit: usize::try_from(a.limit).unwrap_or(50),
        hypotheses: a.hypotheses.clone(),
        order: a.order,
        snapshot: snapshot.map(|s| SnapshotRef {
            epoch: s.epoch,
            last_sequence: s.last_sequence,
        }),
    };
    let page: LogsPage = conn.call("POST", &path, &req).map_err(|mut e| {
        if e.code == ErrorCode::InvalidSnapshot {
            e.hint = format!("start again from the first page: {}", logs_cmd(&a, 0, None));
        }
        e
    })?;
    let snap = LogsSnapshot {
        epoch: page.epoch,
        last_sequence: page.last_sequence,
    }
    .encode(id);
    let offset = a.offset;
    let mut r = Report::new("logs", "LOGS");
    r.session_id = Some(id.to_owned());
    r.hypothesis_filter = (!a.hypotheses.is_empty()).then(|| a.hypotheses.clone());
    if page.malformed_count > 0 {
        r.warn(
            "MALFORMED_RECORDS",
            format!(
                "{} malformed record(s) were rejected and are not shown; run `debug-mode status --session {id}`",
                page.malformed_count
            ),
        );
    }
    warn_redacted(&mut r, page.redacted_count);
    for h in &a.hypotheses {
        if !page.hypotheses.iter().any(|x| &x.hypothesis_id == h) {
            r.warn(
                "UNKNOWN_HYPOTHESIS",
                format!("no event has hypothesis label `{h}` in this session"),
            );
        }
    }
    let shown = page.events.len() as u64;
    let range = if shown == 0 {
        "none".to_owned()
    } else {
        format!("{}-{}", offset + 1, offset + shown)
    };
    r.stat(
        "matched",
        "Events",
        format!("{} matched of {} total", page.matched, page.event_count),
    );
    r.stat("returned", "Showing", range);
    r.stat("offset", "", offset);
    r.stat("limit", "", a.limit);
    r.stat("eventCount", "", page.event_count);
    r.stat("matchedCount", "", page.matched);
    r.stat("returnedCount", "", shown);
    r.stat("malformedCount", "Malformed", page.malformed_count);
    r.stat("redactedCount", "", page.redacted_count);
    r.stat(
        "hypotheses",
        "Hypotheses",
        hypotheses_text(&page.hypotheses),
    );
    let mut text = String::new();
    for e in &page.events {
        text.push_str(&format!(
            "#{}  {}  {}  {}\n    {}\n    data {}\n",
            e.sequence,
            timefmt::iso8601(e.timestamp),
            e.hypothesis_id,
            e.location,
            e.message,
            serde_json::to_string(&e.data).unwrap_or_default()
        ));
    }
    let ingest_url = page.ingest_url.clone().unwrap_or_default();
    let append_path = page
        .append_path
        .as_deref()
        .map(paths::display_path)
        .unwrap_or_default();
    if page.events.is_empty() {
        if page.event_count == 0 {
            text.push_str(&format!(
                "(no events yet)\nProbes must post to Ingest URL {ingest_url}\nor append to Append Path {append_path}\n"
            ));
        } else {
            text.push_str("(no events in this page)\n");
        }
    }
    r.records = text;
    let next = offset + shown;
    let has_more = next < page.matched;
    r.data = json!({
        "records": page.events,
        "pagination": {
            "offset": offset,
            "limit": a.limit,
            "returned": shown,
            "matched": page.matched,
            "total": page.event_count,
            "hasMore": has_more,
            "nextOffset": if has_more { Value::from(next) } else { Value::Null },
            "order": a.order,
            "snapshot": snap,
        },
        "hypotheses": page.hypotheses,
    });
    if has_more {
        r.hints.push(Hint::run(
            "next-page",
            logs_cmd(&a, next, Some(&snap)),
            "show the next page of the same view (a reset makes it stale)",
        ));
    }
    if page.event_count == 0 {
        r.hints.push(Hint::run(
            "verify-ingest",
            format!("debug-mode reset --session {id}"),
            format!(
                "no events yet: reproduce the problem; probes must post to the Ingest URL {ingest_url} or append to the Append Path {append_path}. If they use another address (the service moved to a new port, or the probe was filled in for another session), run this command: it prints the current Ingest URL and Append Path"
            ),
        ));
    } else {
        let label = page
            .hypotheses
            .first()
            .map_or("H1", |h| h.hypothesis_id.as_str())
            .replace(['\'', '"'], "");
        r.hints.push(Hint::run(
            "query",
            format!(
                "debug-mode query --session {id} 'select(.hypothesisId == \"{label}\") | .data'"
            ),
            "filter or aggregate the evidence with a jq program",
        ));
    }
    Ok(r)
}

struct QueryArgs {
    session: String,
    program: Option<String>,
    slurp: bool,
    limit: u64,
    cursor: Option<String>,
    hypotheses: Vec<String>,
    timeout_ms: u64,
    max_memory_mb: u64,
}

/// The flags of a query that are not part of its cursor (limits), as given.
fn query_limit_flags(a: &QueryArgs) -> String {
    let mut s = format!(" --limit {}", a.limit);
    if a.timeout_ms != query::DEFAULT_TIMEOUT_MS {
        s.push_str(&format!(" --timeout-ms {}", a.timeout_ms));
    }
    if a.max_memory_mb != query::DEFAULT_MEMORY_MB {
        s.push_str(&format!(" --max-memory-mb {}", a.max_memory_mb));
    }
    s
}

/// The command that runs a query from its first page.
fn query_restart_cmd(a: &QueryArgs, program: &str, slurp: bool, hypotheses: &[String]) -> String {
    let mut cmd = format!("debug-mode query --session {}", a.session);
    if slurp {
        cmd.push_str(" --slurp");
    }
    for h in hypotheses {
        cmd.push_str(&format!(" --hypothesis {}", shell_quote(h)));
    }
    cmd.push_str(&query_limit_flags(a));
    cmd.push(' ');
    cmd.push_str(&shell_quote(program));
    cmd
}

fn run_query(mut a: QueryArgs) -> Result<Report, DmError> {
    let path = session_path(&a.session, "snapshot")?;
    let cursor = a.cursor.as_deref().map(Cursor::decode).transpose()?;
    // A continuation may leave the program out: the cursor carries it and its options.
    if let Some(c) = &cursor
        && a.program.is_none()
    {
        a.slurp = c.l;
        a.hypotheses.clone_from(&c.h);
    }
    let Some(program) = a
        .program
        .clone()
        .or_else(|| cursor.as_ref().and_then(|c| c.g.clone()))
    else {
        return Err(DmError::new(
            ErrorCode::InvalidArguments,
            "the jaq program is missing (this cursor does not carry it)",
            "repeat the program of the page that printed the cursor",
        ));
    };
    // Compile first: a bad program is an argument error, no service needed.
    query::compile(&program)?;
    let fp = query::fingerprint(&program, a.slurp, &a.hypotheses);
    let (root, conn) = connect()?;
    let snap: debug_mode::store::Snapshot = conn.call("POST", &path, &json!({}))?;
    let restart = query_restart_cmd(&a, &program, a.slurp, &a.hypotheses);
    let (watermark, position) = match &cursor {
        Some(c) => {
            if c.s != a.session {
                return Err(DmError::new(
                    ErrorCode::InvalidCursor,
                    "the cursor belongs to a different session",
                    format!("use the cursor with the session it was printed for, or start from the first page: {restart}"),
                )
                .with_reason(reason::OTHER_SESSION));
            }
            if c.e != snap.epoch {
                return Err(DmError::new(
                    ErrorCode::InvalidCursor,
                    "the cursor is stale: the session was reset after it was issued",
                    format!("start from the first page to read the current evidence: {restart}"),
                )
                .with_reason(reason::STALE_CURSOR));
            }
            if c.q != fp {
                return Err(DmError::new(
                    ErrorCode::InvalidCursor,
                    "the cursor belongs to a different program, --slurp or --hypothesis selection",
                    "leave the program and its options out (the cursor carries them), or start from the first page without --cursor",
                )
                .with_reason(reason::QUERY_MISMATCH));
            }
            (c.w, c.p)
        }
        None => (snap.last_sequence, Position::default()),
    };
    let job = Job {
        events_path: paths::SessionPaths::new(&root, &a.session).events(),
        events_bytes: snap.events_bytes,
        watermark,
        program: program.clone(),
        slurp: a.slurp,
        limit: usize::try_from(a.limit).unwrap_or(query::DEFAULT_LIMIT),
        hypotheses: a.hypotheses.clone(),
        position,
        memory_mb: a.max_memory_mb,
    };
    let outcome = query::run_in_worker(&job, Duration::from_millis(a.timeout_ms))?;
    // A reset while the worker read would mix cycles: detect it and refuse the result.
    let after: debug_mode::store::Snapshot = conn.call("POST", &path, &json!({}))?;
    if after.epoch != snap.epoch {
        return Err(DmError::new(
            ErrorCode::EvidenceMalformed,
            "the session was reset while the query was reading it",
            "run the query again",
        ));
    }
    let mut r = Report::new("query", "QUERY");
    r.session_id = Some(a.session.clone());
    r.hypothesis_filter = (!a.hypotheses.is_empty()).then(|| a.hypotheses.clone());
    if snap.malformed_count > 0 {
        r.warn(
            "MALFORMED_RECORDS",
            format!(
                "{} malformed record(s) were rejected and are not part of the query input; run `debug-mode status --session {}`",
                snap.malformed_count, a.session
            ),
        );
    }
    warn_redacted(&mut r, snap.redacted_count);
    if outcome.halted {
        r.warn("HALTED", "the program called `halt`; results stop there");
    }
    if outcome.page_bytes_capped {
        r.warn(
            "PAGE_SIZE_CAPPED",
            "this page stopped early because results exceeded 16 MiB; continue with the cursor",
        );
    }
    let next_cursor = outcome.next.map(|p| {
        Cursor {
            v: 1,
            s: a.session.clone(),
            e: snap.epoch,
            w: watermark,
            q: fp.clone(),
            p,
            g: Some(program.clone()),
            l: a.slurp,
            h: a.hypotheses.clone(),
        }
        .encode()
    });
    r.partial = false;
    r.stat("mode", "Mode", if a.slurp { "slurp" } else { "stream" });
    r.stat("resultCount", "Results", outcome.results.len() as u64);
    r.stat("eventsScanned", "Events read", outcome.events_scanned);
    r.stat("watermark", "Up to sequence", watermark);
    r.stat("hasMore", "More results", next_cursor.is_some());
    r.records = output::render_values(&outcome.results, 1);
    r.data = json!({ "rows": outcome.results, "nextCursor": next_cursor });
    if let Some(c) = &next_cursor {
        // The cursor carries the program, --slurp and --hypothesis; the limits are repeated.
        r.hints.push(Hint::run(
            "next-page",
            format!(
                "debug-mode query --session {} --cursor {c}{}",
                a.session,
                query_limit_flags(&a)
            ),
            "show the next page of results (a reset makes the cursor stale)",
        ));
    }
    Ok(r)
}

fn status(id: &str) -> Result<Report, DmError> {
    let path = session_path(id, "status")?;
    let (_, conn) = connect()?;
    let s: StatusReport = conn.call("POST", &path, &json!({}))?;
    let mut r = Report::new("status", "STATUS");
    r.session_id = Some(id.to_owned());
    let health = if s.malformed_count == 0 {
        "healthy"
    } else {
        "degraded"
    };
    if s.malformed_count > 0 {
        r.warn(
            "MALFORMED_RECORDS",
            format!(
                "{} malformed record(s) were rejected; the events shown by logs are valid but observations may be missing",
                s.malformed_count
            ),
        );
    }
    if s.malformed_count > s.stored_diagnostics {
        r.warn(
            "DIAGNOSTICS_CAPPED",
            format!(
                "only the first {} diagnostics are kept; {} more were counted",
                s.stored_diagnostics,
                s.malformed_count - s.stored_diagnostics
            ),
        );
    }
    warn_redacted(&mut r, s.redacted_count);
    r.stat("health", "Health", health);
    r.stat("eventCount", "Events", s.event_count);
    r.stat("malformedCount", "Malformed", s.malformed_count);
    r.stat("redactedCount", "", s.redacted_count);
    r.stat("hypotheses", "Hypotheses", hypotheses_text(&s.hypotheses));
    r.stat(
        "lastEventAt",
        "Last event",
        s.last_received_at
            .map_or(Value::Null, |t| Value::from(timefmt::iso8601(t))),
    );
    let mut text = String::new();
    if !s.diagnostics.is_empty() {
        text.push_str("MALFORMED RECORDS\n");
        for d in &s.diagnostics {
            let rec: Vec<String> = d
                .recoverable_fields
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    )
                })
                .collect();
            text.push_str(&format!(
                "{}  {}  via {}  at {}\n    message     {}\n    recoverable {}\n    preview     {}\n    fix         {}\n",
                d.id,
                d.reason,
                serde_json::to_value(d.source).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                timefmt::iso8601(d.received_at),
                d.message,
                if rec.is_empty() { "none".into() } else { rec.join(" ") },
                d.preview,
                d.suggested_fix
            ));
        }
    }
    r.records = text;
    r.data = json!({
        "health": health,
        "eventCount": s.event_count,
        "malformedCount": s.malformed_count,
        "redactedCount": s.redacted_count,
        "hypotheses": s.hypotheses,
        "firstEventAt": s.first_received_at,
        "lastEventAt": s.last_received_at,
        "diagnostics": s.diagnostics,
    });
    if s.malformed_count > 0 {
        r.hints.push(
            Hint::run(
                "fix-probes",
                format!("debug-mode reset --session {id}"),
                "fix the probes using each record's `fix`, then reset and reproduce",
            )
            .explained(),
        );
    }
    r.hints.push(Hint::run(
        "read-logs",
        format!("debug-mode logs --session {id}"),
        "read the valid events",
    ));
    Ok(r)
}

fn sessions(all: bool) -> Result<Report, DmError> {
    let (_, conn) = connect()?;
    let v: Value = conn.call("POST", "/v1/list", &json!({ "all": all }))?;
    let list: Vec<SessionSummary> =
        serde_json::from_value(v["sessions"].clone()).unwrap_or_default();
    let total = v["total"].as_u64().unwrap_or(list.len() as u64);
    let mut r = Report::new(
        "sessions",
        if all {
            "SESSIONS (ALL)"
        } else {
            "SESSIONS (TODAY, UTC)"
        },
    );
    r.stat(
        "sessionCount",
        "Sessions",
        format!("{} shown of {total}", list.len()),
    );
    r.stat("shown", "", list.len() as u64);
    r.stat("total", "", total);
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.session_id.clone(),
                timefmt::iso8601(s.created_at),
                s.event_count.to_string(),
            ]
        })
        .collect();
    r.records = if rows.is_empty() {
        "(no sessions)\n".into()
    } else {
        output::simple_table(&["SESSION ID", "CREATED", "EVENTS"], &rows)
    };
    if (list.len() as u64) < total {
        r.partial = false;
        r.warn(
            "TRUNCATED",
            format!(
                "showing the newest {} of {total} sessions created today",
                list.len()
            ),
        );
    }
    r.data = json!({ "sessions": list });
    if !all {
        r.hints.push(Hint::run(
            "list-all",
            "debug-mode sessions --all",
            "include sessions created before today",
        ));
    }
    if list.is_empty() {
        r.hints.push(Hint::run(
            "create",
            "debug-mode create",
            "start a new session",
        ));
    }
    Ok(r)
}

fn clean(id: &str) -> Result<Report, DmError> {
    let path = session_path(id, "clean")?;
    let (_, conn) = connect()?;
    let _: Value = conn.call("POST", &path, &json!({}))?;
    let mut r = Report::new("clean", "SESSION CLEANED");
    r.session_id = Some(id.to_owned());
    r.records = "Evidence, diagnostics and metadata were permanently removed.\n".into();
    r.data = json!({ "sessionId": id, "removed": true });
    r.hints.push(Hint::run(
        "create",
        "debug-mode create",
        "start a new session",
    ));
    Ok(r)
}

fn stop() -> Result<Report, DmError> {
    let root = paths::state_root()?;
    let sf = service::read_service_file(&root);
    let was_running = client::stop_service(&root, sf.as_ref());
    let mut r = Report::new(
        "stop",
        if was_running {
            "SERVICE STOPPED"
        } else {
            "SERVICE NOT RUNNING"
        },
    );
    r.records = if was_running {
        "The background service was stopped. Sessions are kept; the next command restarts it.\n"
            .into()
    } else {
        "No background service was running. Sessions are kept.\n".into()
    };
    r.data = json!({ "wasRunning": was_running, "stopped": true });
    Ok(r)
}
