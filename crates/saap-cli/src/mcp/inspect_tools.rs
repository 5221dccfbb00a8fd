//! The inspect family, in-process on the configured live system: the debugging guide's
//! `server_info`, `stream_list`, `stream_report`, `stream_info`, `stream_state`,
//! `stream_subjects`, `stream_view`, `stream_get`, `kv_ls`, `kv_get`, and saap's `runs` and
//! `run_timeline`. Each answers with `saap-inspect`'s model serialized as JSON, the shape of
//! `saap inspect … --json`.
//!
//! Must not write (the library publishes, acks and writes nothing; its page consumers are
//! ephemeral and deleted) or read without a bound (every count is checked here or there).

use super::answer::{Answer, ToolError, json};
use super::context::Context;
use super::params::{
    EventKind, GetParams, KvGetParams, KvLsParams, RunParams, RunsParams, SourceParams, Status,
    StreamParams, StreamsParams, ViewParams,
};
use super::sources::{Picked, fail, with_store};
use saap_inspect::model::StreamReport;
use saap_inspect::query::{DEFAULT_SUBJECTS, MAX_KEYS, MAX_RUNS, MAX_SCAN, MAX_SUBJECTS};
use saap_inspect::{RunsQuery, ViewQuery};
use serde_json::json as j;

/// The most streams `stream_list`/`stream_report` list.
const MAX_STREAMS: u64 = saap_inspect::nats::MAX_STREAMS as u64;

/// `v` checked against `1..=max`, or `default`.
fn count(name: &str, v: Option<u64>, default: u64, max: u64) -> Result<u64, ToolError> {
    match v {
        None => Ok(default),
        Some(0) => Err(ToolError::new(format!("`{name}` must be at least 1"))),
        Some(n) if n > max => Err(ToolError::new(format!(
            "`{name}` is at most {max} (asked for {n}); page instead"
        ))),
        Some(n) => Ok(n),
    }
}

/// `server_info`.
pub async fn server_info(ctx: &Context, p: SourceParams) -> Answer {
    let r = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.server().await.map_err(fail)?,
        Picked::Store(path) => with_store(path, |s| s.server()).await?,
    };
    json(&r)
}

async fn streams(
    ctx: &Context,
    p: StreamsParams,
) -> Result<(Vec<saap_inspect::model::StreamSummary>, bool), ToolError> {
    let limit = count("limit", p.limit, 1000, MAX_STREAMS)? as usize;
    match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.streams(limit).await.map_err(fail),
        Picked::Store(path) => {
            with_store(path, move |s| {
                let mut v = s.streams()?;
                let cut = v.len() > limit;
                v.truncate(limit);
                Ok((v, cut))
            })
            .await
        }
    }
}

/// `stream_list`: the names, roles and message counts, compact.
pub async fn stream_list(ctx: &Context, p: StreamsParams) -> Answer {
    let (list, truncated) = streams(ctx, p).await?;
    let rows: Vec<_> = list
        .iter()
        .map(|s| {
            j!({
                "name": s.name,
                "role": s.role,
                "agent_class": s.agent_class,
                "messages": s.messages,
                "consumers": s.consumers,
            })
        })
        .collect();
    json(&j!({"streams": rows, "truncated": truncated}))
}

/// `stream_report`: every stream with its full state (`saap inspect streams --json`).
pub async fn stream_report(ctx: &Context, p: StreamsParams) -> Answer {
    let (list, truncated) = streams(ctx, p).await?;
    json(&j!({"streams": list, "truncated": truncated}))
}

async fn report(ctx: &Context, p: &StreamParams, max: u64) -> Result<StreamReport, ToolError> {
    let name = p.stream_name.clone();
    match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.stream_report(&name, max).await.map_err(fail),
        Picked::Store(path) => with_store(path, move |s| s.stream_report(&name, max)).await,
    }
}

/// `stream_info`: configuration, state, consumers, messages per event type.
pub async fn stream_info(ctx: &Context, p: StreamParams) -> Answer {
    let max = count(
        "max_subjects",
        p.max_subjects,
        DEFAULT_SUBJECTS,
        MAX_SUBJECTS,
    )?;
    json(&report(ctx, &p, max).await?)
}

/// `stream_state`: the state only (first/last sequence and time, messages, bytes, deleted,
/// consumers).
pub async fn stream_state(ctx: &Context, p: StreamParams) -> Answer {
    let r = report(ctx, &p, 1).await?;
    json(&j!({
        "stream": r.summary.name,
        "state": r.summary,
        "deleted": r.deleted,
        "subjects_total": r.subjects_total,
        "consumers": r.consumer_list,
    }))
}

/// `stream_subjects`: what was published, by event type.
pub async fn stream_subjects(ctx: &Context, p: StreamParams) -> Answer {
    let max = count(
        "max_subjects",
        p.max_subjects,
        DEFAULT_SUBJECTS,
        MAX_SUBJECTS,
    )?;
    let r = report(ctx, &p, max).await?;
    json(&j!({
        "stream": r.summary.name,
        "subjects_total": r.subjects_total,
        "events": r.events,
        "subjects_scanned": r.subjects_scanned,
        "truncated": r.truncated,
    }))
}

/// `stream_view`: one page of messages in stream order, decoded.
pub async fn stream_view(ctx: &Context, p: ViewParams) -> Answer {
    let limit = count("limit", p.limit, 50, super::limits::MAX_PAGE)? as usize;
    let last = match p.count {
        Some(n) => Some(count("count", Some(n), 50, super::limits::MAX_PAGE)?),
        None => None,
    };
    let time = |t: &Option<String>| -> Result<Option<i64>, ToolError> {
        t.as_deref()
            .map(|t| saap_inspect::timefmt::parse_time(t).map_err(fail))
            .transpose()
    };
    let q = ViewQuery {
        from_seq: p.from,
        last,
        limit: last.map_or(limit, |n| n as usize),
        run: p.run,
        thread: p.thread,
        event_name: p.event,
        kind: p.kind.map(|k| match k {
            EventKind::Control => "control_event".to_owned(),
            EventKind::Display => "display_event".to_owned(),
        }),
        since_ns: time(&p.since)?,
        until_ns: time(&p.until)?,
        subject: p.subject,
    };
    let name = p.stream_name;
    let page = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.view(&name, &q).await.map_err(fail)?,
        Picked::Store(path) => with_store(path, move |s| s.view(&name, &q)).await?,
    };
    json(&page)
}

/// `stream_get`: one message by sequence.
pub async fn stream_get(ctx: &Context, p: GetParams) -> Answer {
    let name = p.stream_name;
    let seq = p.sequence;
    let m = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.get(&name, seq).await.map_err(fail)?,
        Picked::Store(path) => with_store(path, move |s| s.get(&name, seq)).await?,
    };
    json(&m)
}

/// `kv_ls`: the buckets, or one bucket's keys.
pub async fn kv_ls(ctx: &Context, p: KvLsParams) -> Answer {
    let limit = count("limit", p.limit, 1000, MAX_KEYS as u64)? as usize;
    let picked = ctx.sources.pick(p.source).await?;
    match p.bucket {
        None => {
            let b = match picked {
                Picked::Nats(n) => n.buckets().await.map_err(fail)?,
                Picked::Store(path) => with_store(path, |s| s.buckets()).await?,
            };
            json(&j!({ "buckets": b }))
        }
        Some(bucket) => {
            let k = match picked {
                Picked::Nats(n) => n.keys(&bucket, limit).await.map_err(fail)?,
                Picked::Store(path) => with_store(path, move |s| s.keys(&bucket, limit)).await?,
            };
            json(&k)
        }
    }
}

/// `kv_get`: one value.
pub async fn kv_get(ctx: &Context, p: KvGetParams) -> Answer {
    let (bucket, key) = (p.bucket, p.key);
    let v = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n.value(&bucket, &key).await.map_err(fail)?,
        Picked::Store(path) => with_store(path, move |s| s.value(&bucket, &key)).await?,
    };
    json(&v)
}

/// `runs`: the runs of an agent class stream (or a store), most recent first.
pub async fn runs(ctx: &Context, p: RunsParams) -> Answer {
    let q = RunsQuery {
        limit: count("limit", p.limit, 20, MAX_RUNS as u64)? as usize,
        scan: count("scan", p.scan, saap_inspect::query::DEFAULT_SCAN, MAX_SCAN)?,
        before: p.before,
        after: p.after,
        status: p.status.map(|s| {
            match s {
                Status::Live => "live",
                Status::Stopped => "stopped",
                Status::Failed => "failed",
            }
            .to_owned()
        }),
    };
    let stream = p.stream_name;
    let l = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => {
            let Some(stream) = stream else {
                return Err(ToolError::new(
                    "on NATS, give `stream_name`: the agent class stream whose runs to list (e.g. agent_RagAgent_stream; `stream_list` lists them)",
                ));
            };
            n.runs(&stream, &q).await.map_err(fail)?
        }
        Picked::Store(path) => with_store(path, move |s| s.runs(stream.as_deref(), &q)).await?,
    };
    json(&l)
}

/// `run_timeline`: one run's events in order (a store: with the dispatcher's records).
pub async fn run_timeline(ctx: &Context, p: RunParams) -> Answer {
    let limit = count("limit", p.limit, 50, super::limits::MAX_PAGE)? as usize;
    let (run, stream, from) = (p.run, p.stream_name, p.from);
    let t = match ctx.sources.pick(p.source).await? {
        Picked::Nats(n) => n
            .run(&run, stream.as_deref(), from, limit)
            .await
            .map_err(fail)?,
        Picked::Store(path) => with_store(path, move |s| s.run(&run, from, limit)).await?,
    };
    json(&t)
}
