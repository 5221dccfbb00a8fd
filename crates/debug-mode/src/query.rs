//! The embedded jaq engine (jaq-core, jaq-std, jaq-json).
//!
//! Queries run in a short-lived worker process (`debug-mode __query-worker`) so that the time
//! and memory limits hold even for runaway programs such as `last(range(1e12))`: the worker
//! caps its own address space, and the CLI kills it at the deadline. The worker reads a
//! consistent prefix of the canonical evidence file (up to the snapshot's byte length and
//! sequence watermark), never the append path.
//!
//! Safety: there is no `env` builtin and no `$ENV`; `input`/`inputs` are absent; module
//! loading from files is disabled; `halt` stops the query cleanly and `halt_error` becomes
//! a typed error (never a process exit code of its own); `stderr` output is captured.

use std::cell::RefCell;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use jaq_core::load::{Arena, File as JaqFile, Loader};
use jaq_core::{Bind, Compiler, Ctx, Native, Vars, data};
use jaq_json::Val;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{DmError, ErrorCode, Result};
use crate::paths;

/// Default and maximum number of results per page.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 1000;
/// `--slurp` caps.
pub const SLURP_MAX_EVENTS: usize = 200_000;
pub const SLURP_MAX_BYTES: u64 = 128 * 1024 * 1024;
/// Largest total size of one page of results.
pub const MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;
/// Largest program text.
pub const MAX_PROGRAM_BYTES: usize = 16 * 1024;
/// Default limits.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_MEMORY_MB: u64 = 1024;

/// Everything the worker needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub events_path: PathBuf,
    pub events_bytes: u64,
    pub watermark: u64,
    pub program: String,
    pub slurp: bool,
    pub limit: usize,
    pub hypotheses: Vec<String>,
    pub position: Position,
    pub memory_mb: u64,
}

/// Where a page starts: the event ordinal (line number in the canonical file) and how many
/// outputs of that event (or of the slurped input) to skip.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Position {
    pub event: u64,
    pub skip: u64,
}

/// What the worker returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub results: Vec<Value>,
    pub next: Option<Position>,
    pub events_scanned: u64,
    pub halted: bool,
    pub page_bytes_capped: bool,
}

thread_local! {
    static CAPTURED: RefCell<String> = const { RefCell::new(String::new()) };
}

type D = data::JustLut<Val>;

fn capture_stderr<'a>(cv: jaq_core::Cv<'a, D>) -> jaq_core::ValXs<'a, Val> {
    CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < 4096 {
            let s = match &cv.1 {
                Val::TStr(b) => String::from_utf8_lossy(b).into_owned(),
                other => other.to_string(),
            };
            c.push_str(&s.chars().take(4096).collect::<String>());
        }
    });
    Box::new(core::iter::empty())
}

/// Compiles a program with the safe function set.
pub fn compile(program: &str) -> Result<jaq_core::Filter<D>> {
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(DmError::new(
            ErrorCode::QueryInvalid,
            format!("the jaq program is longer than {MAX_PROGRAM_BYTES} bytes"),
            "write a shorter program",
        ));
    }
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let no_args: Box<[Bind]> = Box::new([]);
    let funs = jaq_core::funs::<D>()
        .chain(jaq_std::funs::<D>())
        .chain(jaq_json::funs::<D>())
        .filter(|(name, _, _)| !matches!(*name, "env" | "stderr_empty" | "input" | "inputs"))
        .chain(core::iter::once((
            "stderr_empty",
            no_args,
            Native::<D>::new(capture_stderr),
        )));
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            JaqFile {
                code: program,
                path: (),
            },
        )
        .map_err(|errs| {
            let mut msgs = Vec::new();
            for (_, e) in errs {
                match e {
                    jaq_core::load::Error::Io(v) => {
                        msgs.extend(v.into_iter().map(|(_, m)| m));
                    }
                    jaq_core::load::Error::Lex(v) => msgs.extend(v.into_iter().map(|(exp, at)| {
                        format!("expected {} at `{}`", exp.as_str(), snippet(at))
                    })),
                    jaq_core::load::Error::Parse(v) => {
                        msgs.extend(v.into_iter().map(|(exp, at)| {
                            format!("expected {} at `{}`", exp.as_str(), snippet(at))
                        }))
                    }
                }
            }
            invalid(msgs)
        })?;
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errs| {
            let msgs = errs
                .into_iter()
                .flat_map(|(_, es)| es)
                .map(|(name, undef)| {
                    if name == "env" || name == "$ENV" || name == "ENV" || name == "input" || name == "inputs" {
                        format!("`{name}` is not available in debug-mode queries (evidence is the only input)")
                    } else {
                        format!("undefined {} `{name}`", undef.as_str())
                    }
                })
                .collect();
            invalid(msgs)
        })
}

fn snippet(at: &str) -> String {
    let s: String = at.chars().take(30).collect();
    if s.is_empty() {
        "end of program".into()
    } else {
        s
    }
}

fn invalid(msgs: Vec<String>) -> DmError {
    DmError::new(
        ErrorCode::QueryInvalid,
        format!("the jaq program does not compile: {}", msgs.join("; ")),
        "check the program syntax; quote it in single quotes, e.g. debug-mode query --session <id> 'select(.hypothesisId == \"H1\") | .data'",
    )
}

fn field<'v>(v: &'v Val, key: &str) -> Option<&'v Val> {
    match v {
        Val::Obj(m) => m.get(&Val::from(key.to_owned())),
        _ => None,
    }
}

fn val_to_json(v: &Val) -> Value {
    let s = v.to_string();
    serde_json::from_str(&s).unwrap_or(Value::String(s))
}

enum Step {
    Continue,
    Full,
}

struct Collector {
    limit: usize,
    results: Vec<Value>,
    bytes: usize,
    capped: bool,
}

impl Collector {
    fn push(&mut self, v: &Val) -> Step {
        if self.results.len() >= self.limit || self.bytes >= MAX_PAGE_BYTES {
            self.capped = self.bytes >= MAX_PAGE_BYTES;
            return Step::Full;
        }
        let j = val_to_json(v);
        self.bytes += j.to_string().len();
        self.results.push(j);
        Step::Continue
    }
}

fn runtime_error(msg: String) -> DmError {
    DmError::new(
        ErrorCode::QueryFailed,
        format!("the jaq program failed: {msg}"),
        "guard optional fields with `?` or `//`, e.g. `.data.count? // 0`, or narrow input with select(...)",
    )
}

fn halt_error(code: i32) -> DmError {
    let msg = CAPTURED.with(|c| c.borrow().trim_end().to_owned());
    DmError::new(
        ErrorCode::QueryFailed,
        if msg.is_empty() {
            format!("the jaq program stopped with halt_error (code {code})")
        } else {
            format!("the jaq program stopped with halt_error (code {code}): {msg}")
        },
        "this is the program's own error; change the program if it was not intended",
    )
}

/// Runs `filter` on one input, collecting outputs from `skip` on. Returns Some(k) when the
/// page filled at output index k of this input, or Err for program errors; the bool says
/// whether the program halted.
fn run_one(
    filter: &jaq_core::Filter<D>,
    input: Val,
    skip: u64,
    out: &mut Collector,
) -> Result<(Option<u64>, bool)> {
    let ctx = Ctx::<D>::new(&filter.lut, Vars::new([]));
    for (k, item) in filter.id.run((ctx, input)).enumerate() {
        let k = k as u64;
        match item {
            Ok(v) => {
                if k < skip {
                    continue;
                }
                if let Step::Full = out.push(&v) {
                    return Ok((Some(k), false));
                }
            }
            Err(exn) => match exn.get_halt() {
                Ok(0) if CAPTURED.with(|c| c.borrow().is_empty()) => return Ok((None, true)),
                Ok(code) => return Err(halt_error(code)),
                Err(exn) => match exn.get_err() {
                    Ok(e) => return Err(runtime_error(e.to_string())),
                    Err(_) => return Err(runtime_error("internal control flow escaped".into())),
                },
            },
        }
    }
    Ok((None, false))
}

/// Executes a job (inside the worker process).
pub fn execute(job: &Job) -> Result<Outcome> {
    let filter = compile(&job.program)?;
    paths::reject_symlink(&job.events_path)?;
    let f = paths::open_read(&job.events_path)
        .map_err(|e| DmError::evidence_io("read evidence", &e))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, f.take(job.events_bytes));
    let mut out = Collector {
        limit: job.limit.clamp(1, MAX_LIMIT),
        results: Vec::new(),
        bytes: 0,
        capped: false,
    };
    let mut line = Vec::new();
    let mut ordinal: u64 = 0;
    let mut scanned: u64 = 0;
    let mut slurped: Vec<Val> = Vec::new();
    let mut slurped_bytes: u64 = 0;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| DmError::evidence_io("read evidence", &e))?;
        if n == 0 || !line.ends_with(b"\n") {
            break;
        }
        let this = ordinal;
        ordinal += 1;
        if !job.slurp && this < job.position.event {
            continue;
        }
        let v = jaq_json::read::parse_single(&line[..line.len() - 1]).map_err(|_| {
            DmError::new(
                ErrorCode::EvidenceMalformed,
                "a stored evidence record is unreadable",
                "run `debug-mode status --session <id>`; if the problem persists reset the session",
            )
        })?;
        let seq = field(&v, "sequence")
            .and_then(|s| s.to_string().parse::<u64>().ok())
            .unwrap_or(0);
        if seq > job.watermark {
            break;
        }
        if !job.hypotheses.is_empty() {
            let h = match field(&v, "hypothesisId") {
                Some(Val::TStr(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            };
            if !job.hypotheses.contains(&h) {
                continue;
            }
        }
        scanned += 1;
        if job.slurp {
            slurped_bytes += n as u64;
            if slurped.len() >= SLURP_MAX_EVENTS || slurped_bytes > SLURP_MAX_BYTES {
                return Err(DmError::new(
                    ErrorCode::QueryLimitExceeded,
                    format!(
                        "--slurp is capped at {SLURP_MAX_EVENTS} events / {} MiB of evidence and this session is larger",
                        SLURP_MAX_BYTES >> 20
                    ),
                    "narrow the input with --hypothesis, or use a streaming program (without --slurp) that selects what you need",
                ));
            }
            slurped.push(v);
            continue;
        }
        let skip = if this == job.position.event {
            job.position.skip
        } else {
            0
        };
        let (full, halted) = run_one(&filter, v, skip, &mut out)?;
        if let Some(k) = full {
            return Ok(Outcome {
                results: out.results,
                next: Some(Position {
                    event: this,
                    skip: k,
                }),
                events_scanned: scanned,
                halted: false,
                page_bytes_capped: out.capped,
            });
        }
        if halted {
            return Ok(Outcome {
                results: out.results,
                next: None,
                events_scanned: scanned,
                halted: true,
                page_bytes_capped: false,
            });
        }
    }
    if job.slurp {
        let input = Val::Arr(jaq_json::Rc::new(slurped));
        let (full, halted) = run_one(&filter, input, job.position.skip, &mut out)?;
        return Ok(Outcome {
            results: out.results,
            next: full.map(|k| Position { event: 0, skip: k }),
            events_scanned: scanned,
            halted,
            page_bytes_capped: out.capped,
        });
    }
    Ok(Outcome {
        results: out.results,
        next: None,
        events_scanned: scanned,
        halted: false,
        page_bytes_capped: false,
    })
}

/// Entry point of `debug-mode __query-worker`: reads a [`Job`] on stdin, writes
/// `{"ok":Outcome}` or `{"error":DmError}` on stdout.
pub fn worker_main() -> i32 {
    let mut input = Vec::new();
    if std::io::stdin()
        .take(1 << 20)
        .read_to_end(&mut input)
        .is_err()
    {
        return 1;
    }
    let Ok(job) = serde_json::from_slice::<Job>(&input) else {
        return 1;
    };
    let bytes = job.memory_mb.saturating_mul(1024 * 1024);
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    );
    let answer = match execute(&job) {
        Ok(o) => serde_json::json!({ "ok": o }),
        Err(e) => serde_json::json!({ "error": e }),
    };
    let mut stdout = std::io::stdout().lock();
    if serde_json::to_writer(&mut stdout, &answer).is_err() || stdout.flush().is_err() {
        return 1;
    }
    0
}

/// Runs a job in a worker process with a deadline. Called by the CLI.
pub fn run_in_worker(job: &Job, timeout: Duration) -> Result<Outcome> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().map_err(|e| {
        DmError::unavailable(format!("cannot locate the debug-mode executable: {e}"))
    })?;
    let mut child = Command::new(exe)
        .arg("__query-worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| DmError::unavailable(format!("could not start the query worker: {e}")))?;
    let job_bytes = serde_json::to_vec(job)
        .map_err(|e| DmError::unavailable(format!("could not encode the query: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&job_bytes);
    }
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| DmError::unavailable("query worker has no output pipe"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = stdout.read_to_end(&mut buf).map(|_| buf);
        let _ = tx.send(r);
    });
    let received = rx.recv_timeout(timeout);
    if received.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(DmError::new(
            ErrorCode::QueryLimitExceeded,
            format!(
                "the query ran longer than {} ms and was stopped",
                timeout.as_millis()
            ),
            "narrow the program (select early, avoid unbounded range/repeat), use --hypothesis, or raise --timeout-ms",
        ));
    }
    let status = child
        .wait()
        .map_err(|e| DmError::unavailable(format!("query worker failed: {e}")))?;
    let buf = match received {
        Ok(Ok(b)) => b,
        _ => Vec::new(),
    };
    #[derive(Deserialize)]
    struct Answer {
        ok: Option<Outcome>,
        error: Option<DmError>,
    }
    match serde_json::from_slice::<Answer>(&buf) {
        Ok(Answer { ok: Some(o), .. }) => Ok(o),
        Ok(Answer { error: Some(e), .. }) => Err(e),
        _ if !status.success() => Err(DmError::new(
            ErrorCode::QueryLimitExceeded,
            format!(
                "the query exceeded its memory limit of {} MiB and was stopped",
                job.memory_mb
            ),
            "avoid building large arrays (use streaming instead of --slurp, or reduce with select/limit), or raise --max-memory-mb",
        )),
        _ => Err(DmError::unavailable(
            "the query worker sent an unreadable answer",
        )),
    }
}

/// Opaque cursor: session, reset epoch, sequence watermark, query fingerprint and position,
/// and the query itself (program, `--slurp`, `--hypothesis`), so a continuation command
/// does not need to repeat the program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Cursor {
    pub v: u32,
    pub s: String,
    pub e: u64,
    pub w: u64,
    pub q: String,
    pub p: Position,
    /// The program (absent in cursors of older versions: then it must be repeated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<String>,
    #[serde(default)]
    pub l: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub h: Vec<String>,
}

const CURSOR_PREFIX: &str = "dmq1.";

/// Stable fingerprint of a query's scope.
pub fn fingerprint(program: &str, slurp: bool, hypotheses: &[String]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: &[u8]| {
        for x in b {
            h ^= u64::from(*x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    feed(program.as_bytes());
    feed(if slurp { b"1" } else { b"0" });
    for hyp in hypotheses {
        feed(hyp.as_bytes());
    }
    format!("{h:016x}")
}

impl Cursor {
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("{CURSOR_PREFIX}{}", b64::encode(&json))
    }

    pub fn decode(s: &str) -> Result<Self> {
        let bad = || {
            DmError::new(
                ErrorCode::InvalidCursor,
                "the cursor is not valid (copy it exactly as printed)",
                "re-run the query without --cursor to start from the beginning",
            )
            .with_reason(crate::error::reason::MALFORMED_TOKEN)
        };
        let body = s.strip_prefix(CURSOR_PREFIX).ok_or_else(bad)?;
        if body.len() > MAX_TOKEN_CHARS {
            return Err(bad());
        }
        let bytes = b64::decode(body).ok_or_else(bad)?;
        let c: Cursor = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if c.v != 1 {
            return Err(bad());
        }
        Ok(c)
    }
}

/// Longest encoded cursor or snapshot body (a cursor carries a program of up to
/// [`MAX_PROGRAM_BYTES`]).
const MAX_TOKEN_CHARS: usize = 4 * MAX_PROGRAM_BYTES;

/// Opaque `logs` snapshot: the session, its reset epoch and the last sequence present when
/// the first page was printed. Later pages of the same view show the same events, in the
/// same order, whatever arrives meanwhile; a reset makes the snapshot stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogsSnapshot {
    pub epoch: u64,
    pub last_sequence: u64,
}

const SNAPSHOT_PREFIX: &str = "dms1.";

impl LogsSnapshot {
    pub fn encode(self, session: &str) -> String {
        let json =
            serde_json::json!({ "v": 1, "s": session, "e": self.epoch, "w": self.last_sequence });
        format!(
            "{SNAPSHOT_PREFIX}{}",
            b64::encode(json.to_string().as_bytes())
        )
    }

    /// Decodes a snapshot printed for `session`.
    pub fn decode(s: &str, session: &str) -> Result<Self> {
        #[derive(Deserialize)]
        struct Raw {
            v: u32,
            s: String,
            e: u64,
            w: u64,
        }
        let restart =
            format!("start again from the first page: debug-mode logs --session {session}");
        let bad = || {
            DmError::new(
                ErrorCode::InvalidSnapshot,
                "the snapshot is not valid (copy it exactly as printed)",
                restart.clone(),
            )
            .with_reason(crate::error::reason::MALFORMED_TOKEN)
        };
        let body = s.strip_prefix(SNAPSHOT_PREFIX).ok_or_else(bad)?;
        if body.len() > 1024 {
            return Err(bad());
        }
        let bytes = b64::decode(body).ok_or_else(bad)?;
        let raw: Raw = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if raw.v != 1 {
            return Err(bad());
        }
        if raw.s != session {
            return Err(DmError::new(
                ErrorCode::InvalidSnapshot,
                "the snapshot belongs to a different session",
                restart,
            )
            .with_reason(crate::error::reason::OTHER_SESSION));
        }
        Ok(Self {
            epoch: raw.e,
            last_sequence: raw.w,
        })
    }
}

mod b64 {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn encode(data: &[u8]) -> String {
        let mut out = String::with_capacity(data.len() * 4 / 3 + 4);
        for chunk in data.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let chars = chunk.len() + 1;
            for i in 0..chars {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    pub fn decode(s: &str) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(s.len() * 3 / 4);
        let vals: Option<Vec<u32>> = s
            .bytes()
            .map(|c| A.iter().position(|a| *a == c).map(|p| p as u32))
            .collect();
        let vals = vals?;
        for chunk in vals.chunks(4) {
            if chunk.len() == 1 {
                return None;
            }
            let mut n = 0u32;
            for (i, v) in chunk.iter().enumerate() {
                n |= v << (18 - 6 * i);
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..chunk.len() - 1]);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write_events(dir: &std::path::Path, n: u64) -> (PathBuf, u64) {
        let p = dir.join("events.ndjson");
        let mut s = String::new();
        for i in 1..=n {
            let h = if i % 2 == 0 { "H2" } else { "H1" };
            s.push_str(&format!(
                "{{\"id\":\"x{i}\",\"sequence\":{i},\"receivedAt\":1,\"hypothesisId\":\"{h}\",\"location\":\"a:1\",\"message\":\"m\",\"data\":{{\"n\":{i}}},\"timestamp\":{i}}}\n"
            ));
        }
        std::fs::write(&p, &s).unwrap();
        (p, s.len() as u64)
    }

    fn job(path: PathBuf, bytes: u64, program: &str) -> Job {
        Job {
            events_path: path,
            events_bytes: bytes,
            watermark: u64::MAX,
            program: program.into(),
            slurp: false,
            limit: 3,
            hypotheses: vec![],
            position: Position::default(),
            memory_mb: 0,
        }
    }

    #[test]
    fn streams_pages_and_resumes_from_position() {
        let t = tempfile::tempdir().unwrap();
        let (p, bytes) = write_events(t.path(), 5);
        let mut j = job(p, bytes, ".data.n, .sequence * 10");
        let o = execute(&j).unwrap();
        assert_eq!(
            o.results,
            vec![Value::from(1), Value::from(10), Value::from(2)]
        );
        j.position = o.next.unwrap();
        let o2 = execute(&j).unwrap();
        assert_eq!(
            o2.results,
            vec![Value::from(20), Value::from(3), Value::from(30)]
        );
    }

    #[test]
    fn slurp_hypothesis_filter_and_watermark() {
        let t = tempfile::tempdir().unwrap();
        let (p, bytes) = write_events(t.path(), 6);
        let mut j = job(p, bytes, "map(.data.n) | add");
        j.slurp = true;
        j.hypotheses = vec!["H2".into()];
        j.watermark = 4;
        assert_eq!(execute(&j).unwrap().results, vec![Value::from(6)]);
    }

    #[test]
    fn env_is_absent_and_halt_is_handled() {
        let t = tempfile::tempdir().unwrap();
        let (p, bytes) = write_events(t.path(), 3);
        for prog in ["env", "$ENV", "input", "env.HOME"] {
            assert_eq!(
                execute(&job(p.clone(), bytes, prog)).unwrap_err().code,
                ErrorCode::QueryInvalid,
                "{prog}"
            );
        }
        let o = execute(&job(p.clone(), bytes, ".sequence, halt")).unwrap();
        assert!(o.halted);
        assert_eq!(o.results, vec![Value::from(1)]);
        let e = execute(&job(p.clone(), bytes, "\"boom\" | halt_error")).unwrap_err();
        assert_eq!(e.code, ErrorCode::QueryFailed);
        assert!(e.message.contains("boom"), "{}", e.message);
        assert_eq!(e.code.exit_code(), 2);
        let e = execute(&job(p, bytes, ".data | keys | .[0] + 1")).unwrap_err();
        assert_eq!(e.code, ErrorCode::QueryFailed);
    }

    #[test]
    fn cursor_roundtrip_and_tamper_detection() {
        let c = Cursor {
            v: 1,
            s: "s".into(),
            e: 2,
            w: 9,
            q: fingerprint(".", false, &[]),
            p: Position { event: 3, skip: 1 },
            g: Some(".".repeat(MAX_PROGRAM_BYTES)),
            l: true,
            h: vec!["H1".into()],
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        let snap = LogsSnapshot {
            epoch: 3,
            last_sequence: 42,
        };
        assert_eq!(LogsSnapshot::decode(&snap.encode("a"), "a").unwrap(), snap);
        assert_eq!(
            LogsSnapshot::decode(&snap.encode("a"), "b")
                .unwrap_err()
                .reason
                .as_deref(),
            Some(crate::error::reason::OTHER_SESSION)
        );
        assert!(LogsSnapshot::decode("dms1.!!", "a").is_err());
        assert!(Cursor::decode("dmq1.!!").is_err());
        assert!(Cursor::decode("garbage").is_err());
        for n in 0..10 {
            let data: Vec<u8> = (0..n).collect();
            assert_eq!(b64::decode(&b64::encode(&data)).unwrap(), data);
        }
    }
}
