//! The CLI side of the service: a minimal loopback HTTP/1.1 client, plus finding, starting,
//! replacing and stopping the service. Concurrent CLI processes serialize service start on
//! `spawn.lock`, so they converge on one service.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{DmError, ErrorCode, Result};
use crate::paths;
use crate::service::{self, Health, ServiceFile, TOKEN_HEADER};

/// Largest response the CLI reads.
const MAX_RESPONSE: u64 = 256 * 1024 * 1024;
/// Bounded wait for a freshly spawned service: 200 polls.
const START_POLLS: u32 = 200;
const POLL: Duration = Duration::from_millis(25);

/// A connection target: the running service.
#[derive(Debug, Clone)]
pub struct Conn {
    pub port: u16,
    pub token: String,
    pub pid: u32,
}

/// Raw HTTP exchange. Returns status and body.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<(u16, Vec<u8>)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(1000).min(timeout))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(k);
        req.push_str(": ");
        req.push_str(v);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let mut msg = req.into_bytes();
    msg.extend_from_slice(body);
    s.write_all(&msg)?;
    let mut resp = Vec::new();
    s.take(MAX_RESPONSE).read_to_end(&mut resp)?;
    parse_response(&resp)
}

fn bad(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_owned())
}

fn parse_response(resp: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("incomplete HTTP response"))?;
    let head = std::str::from_utf8(&resp[..end]).map_err(|_| bad("non-UTF-8 HTTP head"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("malformed HTTP status line"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &resp[end + 4..];
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let nl = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("bad chunk"))?;
        let size_str = std::str::from_utf8(&rest[..nl]).map_err(|_| bad("bad chunk"))?;
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad("bad chunk size"))?;
        rest = &rest[nl + 2..];
        if size == 0 {
            return Ok((status, out));
        }
        if rest.len() < size + 2 {
            return Err(bad("truncated chunk"));
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

impl Conn {
    /// Calls the control API; maps service errors back to typed errors.
    pub fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T> {
        let body = serde_json::to_vec(body).map_err(|e| {
            DmError::new(
                ErrorCode::InvalidArguments,
                e.to_string(),
                "report this bug",
            )
        })?;
        let (status, resp) = http(
            self.port,
            method,
            path,
            &[
                (TOKEN_HEADER, &self.token),
                ("Content-Type", "application/json"),
            ],
            &body,
            Duration::from_secs(120),
        )
        .map_err(|e| DmError::unavailable(format!("the background service did not answer: {e}")))?;
        if status == 200 {
            return serde_json::from_slice(&resp).map_err(|e| {
                DmError::unavailable(format!(
                    "the background service sent an unreadable answer: {e}"
                ))
            });
        }
        #[derive(serde::Deserialize)]
        struct ErrBody {
            error: DmError,
        }
        match serde_json::from_slice::<ErrBody>(&resp) {
            Ok(e) => Err(e.error),
            Err(_) => Err(DmError::unavailable(format!(
                "the background service answered HTTP {status}"
            ))),
        }
    }
}

fn health_of(sf: &ServiceFile, timeout: Duration) -> Option<Health> {
    let (status, body) = http(
        sf.port,
        "GET",
        "/v1/health",
        &[(TOKEN_HEADER, &sf.token)],
        b"",
        timeout,
    )
    .ok()?;
    if status != 200 {
        return None;
    }
    let h: Health = serde_json::from_slice(&body).ok()?;
    (h.pid == sf.pid && h.port == sf.port).then_some(h)
}

/// The running, healthy service (any version), if there is one.
pub fn running(root: &Path) -> Option<(ServiceFile, Health)> {
    let sf = service::read_service_file(root)?;
    let h = health_of(&sf, Duration::from_millis(1500))?;
    Some((sf, h))
}

/// True while some process holds the service lock.
pub fn service_lock_held(root: &Path) -> bool {
    let p = root.join("service.lock");
    let Ok(f) = paths::open_rw(&p) else {
        return false;
    };
    match f.try_lock() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(_) => true,
    }
}

fn parse_version(v: &str) -> (u64, u64, u64) {
    let mut it = v
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// Returns a connection to a healthy service of this version, starting or replacing it.
/// A newer service is never downgraded: that is a version incompatibility (exit 3).
pub fn ensure_service(root: &Path) -> Result<Conn> {
    paths::ensure_dir(root)?;
    if let Some(c) = compatible(root)? {
        return Ok(c);
    }
    let spawn_lock_path = root.join("spawn.lock");
    paths::reject_symlink(&spawn_lock_path)?;
    let spawn_lock = paths::open_rw(&spawn_lock_path)
        .map_err(|e| DmError::evidence_io("open the spawn lock", &e))?;
    spawn_lock
        .lock()
        .map_err(|e| DmError::unavailable(format!("could not lock the spawn lock: {e}")))?;
    // Another CLI may have started it while we waited.
    if let Some(c) = compatible(root)? {
        return Ok(c);
    }
    if let Some((sf, h)) = running(root) {
        tracing::info!(old = %h.version, new = crate::VERSION, "replacing an older service");
        stop_service(root, Some(&sf));
    } else if service_lock_held(root) {
        // A service holds the lock but does not answer: it hangs. Replace it.
        let sf = service::read_service_file(root);
        stop_service(root, sf.as_ref());
    }
    spawn(root)?;
    for _ in 0..START_POLLS {
        if let Some(c) = compatible(root)? {
            return Ok(c);
        }
        std::thread::sleep(POLL);
    }
    Err(DmError::unavailable(
        "the background service did not start in time",
    ))
}

fn compatible(root: &Path) -> Result<Option<Conn>> {
    let Some((sf, h)) = running(root) else {
        return Ok(None);
    };
    if h.version == crate::VERSION && h.protocol == crate::PROTOCOL {
        return Ok(Some(Conn {
            port: sf.port,
            token: sf.token,
            pid: sf.pid,
        }));
    }
    if parse_version(&h.version) > parse_version(crate::VERSION) {
        return Err(DmError::new(
            ErrorCode::VersionIncompatible,
            format!(
                "a newer debug-mode service ({}) is running; this CLI is {}",
                h.version,
                crate::VERSION
            ),
            "upgrade this debug-mode CLI, or run `debug-mode stop` to let this version start its own service",
        ));
    }
    Ok(None)
}

fn spawn(root: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| {
        DmError::unavailable(format!("cannot locate the debug-mode executable: {e}"))
    })?;
    let log = paths::open_append(&root.join("service.log")).ok();
    if let Some(l) = &log
        && l.metadata()
            .map(|m| m.len() > 4 * 1024 * 1024)
            .unwrap_or(false)
    {
        let _ = l.set_len(0);
    }
    let stderr = log.map_or_else(std::process::Stdio::null, std::process::Stdio::from);
    std::process::Command::new(exe)
        .arg("__service")
        .env(paths::HOME_OVERRIDE_ENV, root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            DmError::unavailable(format!("could not start the background service: {e}"))
        })?;
    Ok(())
}

/// Stops the service: asks politely, then kills it if it has not released its lock quickly.
/// Returns whether a service was running.
pub fn stop_service(root: &Path, sf: Option<&ServiceFile>) -> bool {
    let was_running = service_lock_held(root);
    if let Some(sf) = sf {
        let _ = http(
            sf.port,
            "POST",
            "/v1/shutdown",
            &[(TOKEN_HEADER, &sf.token)],
            b"",
            Duration::from_millis(300),
        );
    }
    if !was_running {
        return sf.is_some_and(|s| health_of(s, Duration::from_millis(200)).is_some());
    }
    for _ in 0..20 {
        if !service_lock_held(root) {
            return true;
        }
        std::thread::sleep(POLL);
    }
    if let Some(sf) = sf
        && let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(sf.pid).unwrap_or(0))
    {
        tracing::warn!(pid = sf.pid, "service did not stop; killing it");
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    for _ in 0..START_POLLS {
        if !service_lock_held(root) {
            break;
        }
        std::thread::sleep(POLL);
    }
    if !service_lock_held(root) {
        let _ = std::fs::remove_file(service::service_file_path(root));
    }
    true
}

/// Extracts a string field.
pub fn str_field(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
