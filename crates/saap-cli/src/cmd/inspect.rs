//! `saap inspect`: read a live NATS server (`--server`) or a saap store (`--db`) without
//! changing it — server, streams, one stream, messages in order, one message, KV, runs and one
//! run's timeline. The reading is `saap-inspect`'s; this file only parses the command line,
//! picks the source and hands the answer to `inspect_format` (tables) or prints it as JSON.
//!
//! Must not hold inspection logic or write anything.

use super::inspect_format as fmt;
use super::nats_flags::NatsFlags;
use crate::input::InvalidInput;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use saap_inspect::{InspectError, NatsInspector, RunsQuery, StoreInspector, ViewQuery};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
#[command(after_help = "Examples:
  saap inspect --server nats://127.0.0.1:4222 streams
  saap inspect --server nats://127.0.0.1:4222 stream agent_RagAgent_stream
  saap inspect --server nats://127.0.0.1:4222 view agent_RagAgent_stream --run RUN
  saap inspect --server nats://127.0.0.1:4222 get agent_RagAgent_stream 42 --json
  saap inspect --server nats://127.0.0.1:4222 runs agent_RagAgent_stream --status failed
  saap inspect --server nats://127.0.0.1:4222 run RUN
  saap inspect --server nats://127.0.0.1:4222 kv saap_RagAgent_steps
  saap inspect --db rag.db runs
  saap inspect --db rag.db view rag --event Retrieved

Read-only: nothing is published, acknowledged or written; a page is read through an
ephemeral consumer that is deleted afterwards, a store is opened read-only.
Exit codes: 0 ok, 2 invalid input (unknown stream, run, sequence, key; bad argument;
not a store), 3 the server or store failed (unreachable, locked by its agent).")]
pub struct InspectArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(subcommand)]
    command: InspectCmd,
}

/// Where to read, and how to connect (also `saap report`'s run evidence).
#[derive(Args)]
pub(crate) struct SourceArgs {
    /// A NATS server: nats://HOST:PORT (tls://… for TLS; a comma-separated list for a cluster).
    #[arg(long, global = true, value_name = "URL", conflicts_with = "db")]
    pub(crate) server: Option<String>,
    /// A saap store (the SQLite file an agent writes with --db), opened read-only.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Print JSON instead of text (the same data).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Seconds to wait for the server to answer a connection or a request (1-300).
    #[arg(long, global = true, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    timeout: u64,
    #[command(flatten)]
    nats: NatsFlags,
}

#[derive(Subcommand)]
enum InspectCmd {
    /// The server (version, JetStream account usage and limits) or the store file.
    Server,
    /// Every stream with its state (a store: every workflow's journal).
    Streams {
        /// List at most N streams.
        #[arg(long, default_value_t = 1000, value_name = "N")]
        limit: usize,
    },
    /// One stream: configuration, state, consumers and messages per event type.
    Stream {
        /// Stream name (a store: workflow name).
        name: String,
        /// Count at most N distinct subjects (a store: journal entries).
        #[arg(long, default_value_t = 100_000, value_name = "N")]
        max_subjects: u64,
    },
    /// Messages in stream order, decoded into SAAP events, one page at a time.
    View {
        /// Stream name (a store: workflow name).
        stream: String,
        #[command(flatten)]
        page: PageArgs,
        /// Only this run.
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// Only this thread.
        #[arg(long, value_name = "THREAD")]
        thread: Option<String>,
        /// Only events of this type (_event_name).
        #[arg(long, value_name = "NAME")]
        event: Option<String>,
        /// Only control or display events.
        #[arg(long, value_name = "KIND", value_parser = ["control", "display"])]
        kind: Option<String>,
        /// Only messages stored at or after TIME (RFC 3339, or ns since the epoch).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only messages stored at or before TIME.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// The last N messages of the stream (no filters).
        #[arg(long, value_name = "N")]
        last: Option<u64>,
        /// A raw NATS subject filter instead of --run/--thread/--event/--kind.
        #[arg(long, value_name = "SUBJECT")]
        subject: Option<String>,
    },
    /// One message by its stream sequence (a store: journal row).
    Get {
        /// Stream name (a store: workflow name).
        stream: String,
        /// Sequence.
        seq: u64,
    },
    /// KV buckets; with BUCKET its keys; with BUCKET KEY one value.
    Kv {
        /// Bucket (a store: run_context or thread_context).
        bucket: Option<String>,
        /// Key (a store: RUN_OR_THREAD/KEY).
        key: Option<String>,
        /// List at most N keys.
        #[arg(long, default_value_t = 1000, value_name = "N")]
        limit: usize,
    },
    /// The runs found in an agent class stream (or a store), most recent first, with status.
    Runs {
        /// NATS: the agent class stream (required); a store: only this workflow.
        stream: Option<String>,
        /// List at most N runs.
        #[arg(long, default_value_t = 20, value_name = "N")]
        limit: usize,
        /// Only live, stopped or failed runs.
        #[arg(long, value_name = "STATUS", value_parser = ["live", "stopped", "failed"])]
        status: Option<String>,
        /// NATS: look at the control events among the last N stored messages (default 10,000, at most 1,000,000).
        #[arg(long, value_name = "N", default_value_t = 10_000)]
        scan: u64,
        /// NATS: scan the events before sequence SEQ (the `next` of the previous page).
        #[arg(long, value_name = "SEQ")]
        before: Option<u64>,
        /// A store: runs older than RUN (the `next` of the previous page).
        #[arg(long, value_name = "RUN")]
        after: Option<String>,
    },
    /// One run's events in order (a store: its journal with the dispatcher's records).
    Run {
        /// Run id.
        run: String,
        /// NATS: the stream to read (found from the run's subjects if not given).
        #[arg(long, value_name = "STREAM")]
        stream: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Args)]
struct PageArgs {
    /// Start at this sequence (the `next` of the previous page).
    #[arg(long, value_name = "SEQ")]
    from: Option<u64>,
    /// Messages per page (at most 10,000).
    #[arg(long, default_value_t = 50, value_name = "N")]
    limit: usize,
}

pub(crate) enum Source {
    Nats(Box<NatsInspector>),
    Store(StoreInspector),
}

/// An inspection error as the CLI reports it: input errors exit 2, the rest 3.
pub(crate) fn fail(e: InspectError) -> anyhow::Error {
    if e.is_input_error() {
        InvalidInput(e.to_string()).into()
    } else {
        anyhow::Error::msg(e.to_string())
    }
}

fn print_json<T: Serialize>(v: &T) -> Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(v).context("encoding the answer as JSON")?
    );
    Ok(())
}

pub fn run(a: InspectArgs) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    rt.block_on(run_async(a))
}

pub(crate) async fn open(s: &SourceArgs) -> Result<Source> {
    match (&s.server, &s.db) {
        (Some(url), None) => {
            let options =
                s.nats
                    .options(url, "saap-inspect", Duration::from_secs(s.timeout))?;
            NatsInspector::connect(&options)
                .await
                .map(|n| Source::Nats(Box::new(n)))
                .map_err(fail)
        }
        (None, Some(path)) => StoreInspector::open(path).map(Source::Store).map_err(fail),
        _ => Err(InvalidInput(
            "SAAP-I008: say what to inspect: --server nats://HOST:PORT (a live NATS server) or --db PATH (a saap store)"
                .to_owned(),
        )
        .into()),
    }
}

fn view_query(
    page: &PageArgs,
    filters: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    times: (Option<String>, Option<String>),
    last: Option<u64>,
    subject: Option<String>,
) -> Result<ViewQuery> {
    let time = |t: Option<String>| -> Result<Option<i64>> {
        t.map(|t| saap_inspect::timefmt::parse_time(&t).map_err(fail))
            .transpose()
    };
    Ok(ViewQuery {
        from_seq: page.from,
        last,
        limit: page.limit,
        run: filters.0,
        thread: filters.1,
        event_name: filters.2,
        kind: filters.3.map(|k| format!("{k}_event")),
        since_ns: time(times.0)?,
        until_ns: time(times.1)?,
        subject,
    })
}

async fn run_async(a: InspectArgs) -> Result<ExitCode> {
    let json = a.source.json;
    let source = open(&a.source).await?;
    match a.command {
        InspectCmd::Server => {
            let r = match &source {
                Source::Nats(n) => n.server().await,
                Source::Store(s) => s.server(),
            }
            .map_err(fail)?;
            if json {
                print_json(&r)?
            } else {
                print!("{}", fmt::server(&r))
            }
        }
        InspectCmd::Streams { limit } => {
            let (streams, truncated) = match &source {
                Source::Nats(n) => n.streams(limit).await,
                Source::Store(s) => s.streams().map(|v| (v, false)),
            }
            .map_err(fail)?;
            if json {
                print_json(&serde_json::json!({"streams": streams, "truncated": truncated}))?
            } else {
                print!("{}", fmt::streams(&streams, truncated))
            }
        }
        InspectCmd::Stream { name, max_subjects } => {
            let r = match &source {
                Source::Nats(n) => n.stream_report(&name, max_subjects).await,
                Source::Store(s) => s.stream_report(&name, max_subjects),
            }
            .map_err(fail)?;
            if json {
                print_json(&r)?
            } else {
                print!("{}", fmt::stream(&r))
            }
        }
        InspectCmd::View {
            stream,
            page,
            run,
            thread,
            event,
            kind,
            since,
            until,
            last,
            subject,
        } => {
            let q = view_query(
                &page,
                (run, thread, event, kind),
                (since, until),
                last,
                subject,
            )?;
            let p = match &source {
                Source::Nats(n) => n.view(&stream, &q).await,
                Source::Store(s) => s.view(&stream, &q),
            }
            .map_err(fail)?;
            if json {
                print_json(&p)?
            } else {
                print!("{}", fmt::page(&p))
            }
        }
        InspectCmd::Get { stream, seq } => {
            let m = match &source {
                Source::Nats(n) => n.get(&stream, seq).await,
                Source::Store(s) => s.get(&stream, seq),
            }
            .map_err(fail)?;
            if json {
                print_json(&m)?
            } else {
                print!("{}", fmt::message(&m))
            }
        }
        InspectCmd::Kv { bucket, key, limit } => match (bucket, key) {
            (None, _) => {
                let b = match &source {
                    Source::Nats(n) => n.buckets().await,
                    Source::Store(s) => s.buckets(),
                }
                .map_err(fail)?;
                if json {
                    print_json(&serde_json::json!({ "buckets": b }))?
                } else {
                    print!("{}", fmt::buckets(&b))
                }
            }
            (Some(bucket), None) => {
                let k = match &source {
                    Source::Nats(n) => n.keys(&bucket, limit).await,
                    Source::Store(s) => s.keys(&bucket, limit),
                }
                .map_err(fail)?;
                if json {
                    print_json(&k)?
                } else {
                    print!("{}", fmt::keys(&k))
                }
            }
            (Some(bucket), Some(key)) => {
                let v = match &source {
                    Source::Nats(n) => n.value(&bucket, &key).await,
                    Source::Store(s) => s.value(&bucket, &key),
                }
                .map_err(fail)?;
                if json {
                    print_json(&v)?
                } else {
                    print!("{}", fmt::value(&v))
                }
            }
        },
        InspectCmd::Runs {
            stream,
            limit,
            status,
            scan,
            before,
            after,
        } => {
            let q = RunsQuery {
                limit,
                scan,
                before,
                after,
                status,
            };
            let l = match &source {
                Source::Nats(n) => {
                    let Some(stream) = stream else {
                        return Err(InvalidInput(
                            "SAAP-I008: on NATS, name the agent class stream whose runs to list (e.g. `runs agent_RagAgent_stream`; `streams` lists them)".to_owned(),
                        )
                        .into());
                    };
                    n.runs(&stream, &q).await
                }
                Source::Store(s) => s.runs(stream.as_deref(), &q),
            }
            .map_err(fail)?;
            if json {
                print_json(&l)?
            } else {
                print!("{}", fmt::runs(&l))
            }
        }
        InspectCmd::Run { run, stream, page } => {
            let t = match &source {
                Source::Nats(n) => n.run(&run, stream.as_deref(), page.from, page.limit).await,
                Source::Store(s) => s.run(&run, page.from, page.limit),
            }
            .map_err(fail)?;
            if json {
                print_json(&t)?
            } else {
                print!("{}", fmt::timeline(&t))
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
