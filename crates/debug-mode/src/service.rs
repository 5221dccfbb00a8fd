//! The background service: one per state root, loopback only.
//!
//! - `POST /ingest/<session>`: probe ingest (NDJSON or `application/json`), CORS-enabled for
//!   pages served from loopback so browser probes work. A request whose `Origin` is not a
//!   loopback origin gets 403: a web page on another site, running in the user's browser,
//!   must not be able to post evidence. Requests without `Origin` (Node, curl) are
//!   accepted. The session in the path is an address, not a credential.
//! - `/v1/...`: the private control API used by the CLI. It requires the random token from
//!   `service.json` (mode 0600) in a custom header, which also makes browsers preflight, and
//!   preflights of `/v1` are not answered: web pages cannot drive it.
//!
//! Single instance: the service holds an OS lock on `service.lock` for its lifetime (the OS
//! releases it if the process dies). It re-binds its previous port when free so probe URLs
//! stay valid across restarts, drains append paths on a timer, and shuts down after
//! `idle_timeout_ms` without requests or ingested data, measured with an injected [`Clock`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::error::{DmError, ErrorCode};
use crate::paths;
use crate::store::{self, Source, Store, lock};

/// Default idle shutdown: 30 minutes.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Largest ingest body.
pub const MAX_INGEST_BODY: usize = 16 * 1024 * 1024;
/// Header carrying the control token.
pub const TOKEN_HEADER: &str = "x-debug-mode-token";
/// Test hook: a version the service reports instead of its own.
pub const TEST_VERSION_ENV: &str = "AGENT_DEBUG_MODE_TEST_SERVICE_VERSION";
/// Test hook: the service ignores shutdown requests (simulates a hung service).
pub const TEST_HANG_ENV: &str = "AGENT_DEBUG_MODE_TEST_IGNORE_SHUTDOWN";
/// Idle timeout override in milliseconds (tests and unusual setups).
pub const IDLE_TIMEOUT_ENV: &str = "AGENT_DEBUG_MODE_IDLE_TIMEOUT_MS";

/// Contents of `service.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceFile {
    pub pid: u32,
    pub port: u16,
    pub version: String,
    pub protocol: u32,
    pub token: String,
    pub started_at: u64,
}

/// Answer of `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub version: String,
    pub protocol: u32,
    pub pid: u32,
    pub port: u16,
}

/// Tracks the last activity and decides idle shutdown. Pure: time is an argument.
#[derive(Debug)]
pub struct IdleTracker {
    last_activity: AtomicU64,
    timeout_ms: u64,
}

impl IdleTracker {
    pub fn new(now: u64, timeout_ms: u64) -> Self {
        Self {
            last_activity: AtomicU64::new(now),
            timeout_ms,
        }
    }
    pub fn touch(&self, now: u64) {
        self.last_activity.fetch_max(now, Ordering::Relaxed);
    }
    pub fn is_idle(&self, now: u64) -> bool {
        now.saturating_sub(self.last_activity.load(Ordering::Relaxed)) >= self.timeout_ms
    }
}

pub struct Config {
    pub root: PathBuf,
    pub idle_timeout_ms: u64,
    pub tick: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Config {
    pub fn from_env(root: PathBuf) -> Self {
        let idle_timeout_ms = std::env::var(IDLE_TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_IDLE_TIMEOUT_MS);
        Self {
            root,
            idle_timeout_ms,
            tick: Duration::from_millis(200),
            clock: crate::clock::from_env(),
        }
    }
}

struct App {
    store: Store,
    token: String,
    port: u16,
    version: String,
    idle: IdleTracker,
    shutdown: tokio::sync::Notify,
    ignore_shutdown: bool,
}

impl App {
    fn touch(&self) {
        self.idle.touch(self.store.now());
    }
}

pub fn service_file_path(root: &Path) -> PathBuf {
    root.join("service.json")
}

pub fn read_service_file(root: &Path) -> Option<ServiceFile> {
    let p = service_file_path(root);
    paths::reject_symlink(&p).ok()?;
    let f = paths::open_read(&p).ok()?;
    serde_json::from_reader(std::io::BufReader::new(f)).ok()
}

/// Runs the service until shutdown. Returns Ok(false) when another service already holds
/// the lock (this process then exits without doing anything).
pub async fn run(cfg: Config) -> anyhow::Result<bool> {
    use anyhow::Context;
    paths::ensure_dir(&cfg.root)?;
    let lock_path = cfg.root.join("service.lock");
    paths::reject_symlink(&lock_path)?;
    let lock_file = paths::open_rw(&lock_path).context("opening the service lock")?;
    match lock_file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).context("locking the service lock");
        }
    }
    let previous = read_service_file(&cfg.root).map(|s| s.port).or_else(|| {
        std::fs::read_to_string(cfg.root.join("service.port"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    let listener = bind(previous).await.context("binding a loopback port")?;
    let port = listener.local_addr()?.port();
    let token = uuid::Uuid::new_v4().simple().to_string();
    let version = std::env::var(TEST_VERSION_ENV).unwrap_or_else(|_| crate::VERSION.to_owned());
    let store = Store::open(cfg.root.clone(), Arc::clone(&cfg.clock))?;
    let now = store.now();
    let app = Arc::new(App {
        store,
        token: token.clone(),
        port,
        version: version.clone(),
        idle: IdleTracker::new(now, cfg.idle_timeout_ms),
        shutdown: tokio::sync::Notify::new(),
        ignore_shutdown: std::env::var_os(TEST_HANG_ENV).is_some(),
    });
    let sf = ServiceFile {
        pid: std::process::id(),
        port,
        version,
        protocol: crate::PROTOCOL,
        token,
        started_at: now,
    };
    paths::write_atomic(&cfg.root.join("service.port"), port.to_string().as_bytes())?;
    paths::write_atomic(&service_file_path(&cfg.root), &serde_json::to_vec(&sf)?)?;
    tracing::info!(port, pid = sf.pid, "debug-mode service started");

    let ticker = {
        let app = Arc::clone(&app);
        let tick = cfg.tick;
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let a = Arc::clone(&app);
                let drained = tokio::task::spawn_blocking(move || a.store.drain_all())
                    .await
                    .unwrap_or_default();
                if drained.accepted + drained.rejected > 0 {
                    app.touch();
                }
                if app.idle.is_idle(app.store.now()) {
                    tracing::info!("idle timeout reached; shutting down");
                    app.shutdown.notify_one();
                    break;
                }
            }
        })
    };

    let router = router(Arc::clone(&app));
    let shutdown_app = Arc::clone(&app);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown_app.shutdown.notified().await })
        .await
        .context("serving HTTP")?;
    ticker.abort();
    // Final drain so nothing appended before shutdown waits for the next start.
    let _ = app.store.drain_all();
    if read_service_file(&cfg.root).is_some_and(|s| s.pid == std::process::id()) {
        let _ = std::fs::remove_file(service_file_path(&cfg.root));
    }
    tracing::info!("debug-mode service stopped");
    drop(lock_file);
    Ok(true)
}

async fn bind(previous: Option<u16>) -> std::io::Result<tokio::net::TcpListener> {
    if let Some(p) = previous.filter(|p| *p != 0)
        && let Ok(l) =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, p))).await
    {
        return Ok(l);
    }
    tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/ingest/{session}",
            post(ingest).options(preflight).get(ingest_get),
        )
        .route("/v1/health", get(health))
        .route("/v1/shutdown", post(shutdown))
        .route("/v1/sessions", post(create))
        .route("/v1/list", post(list_sessions))
        .route("/v1/sessions/{session}/{op}", post(session_op))
        .layer(DefaultBodyLimit::max(MAX_INGEST_BODY))
        .with_state(app)
}

/// Whether an `Origin` header names a page served from this machine's loopback interface
/// (`http(s)://localhost`, `127.0.0.0/8`, `[::1]`, any port). `null` (sandboxed frames,
/// `file:` pages) is not: any site can produce it.
pub fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    if rest.contains(['/', '@', '?', '#']) {
        return false;
    }
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => {
                return h == "::1";
            }
            _ => return false,
        }
    } else {
        match rest.split_once(':') {
            Some((h, port)) if is_port(port) => h,
            Some(_) => return false,
            None => rest,
        }
    };
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// A request from a foreign origin (answered 403).
struct ForeignOrigin;

impl ForeignOrigin {
    fn response(self) -> Response {
        let e = DmError::new(
            ErrorCode::InvalidArguments,
            "ingest from a web page that is not served from this machine (loopback) is refused",
            "serve the page under investigation from localhost or 127.0.0.1, or post from a non-browser process",
        );
        let mut r = err_response(&e);
        *r.status_mut() = StatusCode::FORBIDDEN;
        r
    }
}

/// The request's `Origin`, if any: `Ok(None)` without one, `Err` for a foreign one.
fn check_origin(headers: &HeaderMap) -> Result<Option<HeaderValue>, ForeignOrigin> {
    let Some(v) = headers.get(header::ORIGIN) else {
        return Ok(None);
    };
    if v.to_str().is_ok_and(is_loopback_origin) {
        return Ok(Some(v.clone()));
    }
    Err(ForeignOrigin)
}

fn cors(mut r: Response, origin: Option<HeaderValue>) -> Response {
    let Some(origin) = origin else {
        return r;
    };
    let h = r.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    h.insert(
        "access-control-allow-private-network",
        HeaderValue::from_static("true"),
    );
    r
}

fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::SessionNotFound => StatusCode::NOT_FOUND,
        ErrorCode::EvidenceMalformed | ErrorCode::StateUnsafe => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::VersionIncompatible => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn err_response(e: &DmError) -> Response {
    (status_of(e.code), axum::Json(json!({ "error": e }))).into_response()
}

async fn preflight(headers: HeaderMap) -> Response {
    match check_origin(&headers) {
        Ok(origin) => cors(StatusCode::NO_CONTENT.into_response(), origin),
        Err(f) => f.response(),
    }
}

async fn ingest_get(headers: HeaderMap) -> Response {
    let origin = match check_origin(&headers) {
        Ok(o) => o,
        Err(f) => return f.response(),
    };
    cors(
        (
            StatusCode::METHOD_NOT_ALLOWED,
            axum::Json(json!({"error": {"code": "INVALID_ARGUMENTS", "message": "ingest accepts POST only", "hint": "POST newline-delimited JSON events to this URL"}})),
        )
            .into_response(),
        origin,
    )
}

async fn ingest(
    State(app): State<Arc<App>>,
    UrlPath(session): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let origin = match check_origin(&headers) {
        Ok(o) => o,
        Err(f) => return f.response(),
    };
    app.touch();
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json_body = match ctype.as_str() {
        "application/json" => true,
        ""
        | "application/x-ndjson"
        | "application/ndjson"
        | "application/jsonl"
        | "application/jsonlines"
        | "text/plain" => false,
        other => {
            let e = DmError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "unsupported content type `{}`",
                    other.chars().take(60).collect::<String>()
                ),
                "send newline-delimited JSON with Content-Type: application/x-ndjson (or application/json)",
            );
            let mut r = err_response(&e);
            *r.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
            return cors(r, origin);
        }
    };
    let a = Arc::clone(&app);
    let res = tokio::task::spawn_blocking(move || -> Result<store::IngestOutcome, DmError> {
        let s = a.store.get(&session)?;
        let now = a.store.now();
        let mut s = lock(&s);
        if json_body && let Ok(v) = serde_json::from_slice::<Value>(&body) {
            let values = match v {
                Value::Array(items) if items.len() <= 100_000 => items,
                other => vec![other],
            };
            return s.ingest_values(values, now);
        }
        s.ingest_body(&body, Source::Http, now)
    })
    .await;
    let r = match res {
        Ok(Ok(out)) => {
            axum::Json(json!({"accepted": out.accepted, "rejected": out.rejected})).into_response()
        }
        Ok(Err(e)) => err_response(&e),
        Err(_) => err_response(&DmError::unavailable("ingest worker failed")),
    };
    cors(r, origin)
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| constant_time_eq(t.as_bytes(), app.token.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"error": {"code": "SERVICE_UNAVAILABLE", "message": "control API requires the service token", "hint": "use the debug-mode CLI"}})),
    )
        .into_response()
}

async fn health(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized();
    }
    axum::Json(Health {
        version: app.version.clone(),
        protocol: crate::PROTOCOL,
        pid: std::process::id(),
        port: app.port,
    })
    .into_response()
}

async fn shutdown(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized();
    }
    if !app.ignore_shutdown {
        app.shutdown.notify_one();
    }
    axum::Json(json!({"stopping": true})).into_response()
}

fn ingest_url(app: &App, id: &str) -> String {
    format!("http://127.0.0.1:{}/ingest/{id}", app.port)
}

async fn blocking<T: Serialize + Send + 'static>(
    f: impl FnOnce() -> Result<T, DmError> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => err_response(&e),
        Err(_) => err_response(&DmError::unavailable("service worker failed")),
    }
}

async fn create(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized();
    }
    app.touch();
    let a = Arc::clone(&app);
    blocking(move || {
        let info = a.store.create()?;
        Ok(json!({
            "sessionId": info.session_id,
            "createdAt": info.created_at,
            "ingestUrl": ingest_url(&a, &info.session_id),
            "appendPath": info.append_path,
        }))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    all: bool,
}

async fn list_sessions(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized();
    }
    let q: ListQuery = serde_json::from_slice(&body).unwrap_or(ListQuery { all: false });
    app.touch();
    let a = Arc::clone(&app);
    blocking(move || {
        a.store.drain_all();
        let (sessions, total) = a.store.list(q.all)?;
        Ok(json!({"sessions": sessions, "total": total}))
    })
    .await
}

async fn session_op(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    UrlPath((session, op)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized();
    }
    app.touch();
    let req: store::LogsQuery = if body.is_empty() {
        store::LogsQuery::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => {
                return err_response(&DmError::new(
                    ErrorCode::InvalidArguments,
                    format!("bad request body: {e}"),
                    "use the debug-mode CLI",
                ));
            }
        }
    };
    let a = Arc::clone(&app);
    blocking(move || -> Result<Value, DmError> {
        if op == "clean" {
            a.store.clean(&session)?;
            return Ok(json!({"cleaned": true}));
        }
        let s = a.store.get(&session)?;
        let now = a.store.now();
        let mut s = lock(&s);
        let ingest = |s: &mut store::Session| -> Result<(), DmError> {
            s.drain_incoming(now)?;
            Ok(())
        };
        let to_value = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| DmError::evidence_io("serialize a response", &e.into()))
        };
        match op.as_str() {
            "reset" => {
                s.reset()?;
                let info = s.info();
                Ok(json!({
                    "sessionId": info.session_id,
                    "ingestUrl": ingest_url(&a, &info.session_id),
                    "appendPath": info.append_path,
                    "epoch": s.epoch(),
                }))
            }
            "logs" => {
                ingest(&mut s)?;
                let mut page = s.logs(&req)?;
                let info = s.info();
                page.ingest_url = Some(ingest_url(&a, &info.session_id));
                page.append_path = Some(info.append_path);
                to_value(serde_json::to_value(page))
            }
            "status" => {
                ingest(&mut s)?;
                to_value(serde_json::to_value(s.status()?))
            }
            "snapshot" => {
                ingest(&mut s)?;
                to_value(serde_json::to_value(s.snapshot()?))
            }
            "info" => {
                let info = s.info();
                Ok(json!({
                    "sessionId": info.session_id,
                    "createdAt": info.created_at,
                    "ingestUrl": ingest_url(&a, &info.session_id),
                    "appendPath": info.append_path,
                }))
            }
            other => Err(DmError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "unknown operation `{}`",
                    other.chars().take(40).collect::<String>()
                ),
                "use the debug-mode CLI",
            )),
        }
    })
    .await
}

/// Answers used by tests and the CLI: Method list for CORS documentation.
pub const INGEST_METHODS: [Method; 2] = [Method::POST, Method::OPTIONS];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn only_loopback_origins_may_post_evidence() {
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "https://LOCALHOST:8443",
            "http://app.localhost:5173",
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://[::1]:3000",
            "http://[::1]",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "https://evil.example:443",
            "null",
            "",
            "file://",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://localhost@evil.example",
            "http://evil.example/http://localhost",
            "http://[::2]:80",
            "http://10.0.0.1",
            "http://localhost:99999999",
            "ws://localhost",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn idle_tracker_uses_the_injected_clock() {
        let clock = ManualClock::default();
        clock.set(1_000);
        let t = IdleTracker::new(clock.now_ms(), DEFAULT_IDLE_TIMEOUT_MS);
        clock.set(1_000 + DEFAULT_IDLE_TIMEOUT_MS - 1);
        assert!(!t.is_idle(clock.now_ms()));
        t.touch(clock.now_ms());
        clock.set(1_000 + 2 * DEFAULT_IDLE_TIMEOUT_MS - 2);
        assert!(!t.is_idle(clock.now_ms()));
        clock.set(1_000 + 2 * DEFAULT_IDLE_TIMEOUT_MS - 1);
        assert!(t.is_idle(clock.now_ms()));
        // An out-of-order older touch never moves activity backwards.
        t.touch(0);
        assert!(t.is_idle(clock.now_ms()));
    }
}
