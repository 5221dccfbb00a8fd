//! Shared harness: an isolated state root per test, the CLI binary, snapshot filters, and a
//! guaranteed `debug-mode stop` when the test ends.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_debug-mode");

pub struct Env {
    pub dir: tempfile::TempDir,
    pub extra: Vec<(String, String)>,
}

impl Env {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            extra: Vec::new(),
        }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn clock_file(&self) -> PathBuf {
        self.dir.path().join("clock-offset")
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("AGENT_DEBUG_MODE_HOME_OVERRIDE", self.root())
            .env("AGENT_DEBUG_MODE_TEST_CLOCK_OFFSET_FILE", self.clock_file())
            .env_remove("AGENT_DEBUG_MODE_TEST_SERVICE_VERSION")
            .env_remove("AGENT_DEBUG_MODE_TEST_IGNORE_SHUTDOWN")
            .env_remove("DEBUG_MODE_LOG")
            .env("COLUMNS", "100");
        for (k, v) in &self.extra {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs and asserts the exit code; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?} failed:\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// Creates a session; returns (id, ingest port, append path).
    pub fn create(&self) -> (String, u16, PathBuf) {
        let v = self.json(&["create"]);
        let id = v["data"]["sessionId"].as_str().unwrap().to_owned();
        let url = v["data"]["ingestUrl"].as_str().unwrap();
        let port: u16 = url
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let append = PathBuf::from(v["data"]["appendPath"].as_str().unwrap());
        (id, port, append)
    }

    pub fn service_pid(&self) -> Option<u32> {
        let s = std::fs::read_to_string(self.root().join("service.json")).ok()?;
        let v: Value = serde_json::from_str(&s).ok()?;
        v["pid"].as_u64().map(|p| p as u32)
    }

    pub fn service_running(&self) -> bool {
        debug_mode::client::service_lock_held(&self.root())
    }

    /// Normalizes ids, ports, times, paths and cursors for snapshots.
    pub fn filter(&self, s: &str) -> String {
        let mut out = s.replace(&self.root().display().to_string(), "[STATE]");
        let rules: &[(&str, &str)] = &[
            (
                r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                "[ID]",
            ),
            (r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]"),
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[TIME]"),
            (r"dmq1\.[A-Za-z0-9_-]+", "[CURSOR]"),
            (r"dms1\.[A-Za-z0-9_-]+", "[SNAPSHOT]"),
            (
                r#""(createdAt|receivedAt|lastEventAt|firstEventAt|startedAt)":\s*\d+"#,
                "\"$1\": [MS]",
            ),
        ];
        for (re, with) in rules {
            out = regex::Regex::new(re)
                .unwrap()
                .replace_all(&out, *with)
                .into_owned();
        }
        out
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.cmd().arg("stop").output();
    }
}

/// One event line.
pub fn event(h: &str, n: u64) -> String {
    format!(
        r#"{{"hypothesisId":"{h}","location":"src/app.ts:{n}","message":"Cache lookup completed","data":{{"cacheKey":"cart:{n}","hit":{}}},"timestamp":{}}}"#,
        n.is_multiple_of(2),
        1_784_313_728_000u64 + n
    )
}

/// POSTs a body to the ingest URL; returns (status, body).
pub fn post(port: u16, id: &str, ctype: &str, body: &[u8]) -> (u16, String) {
    let (status, b) = debug_mode::client::http(
        port,
        "POST",
        &format!("/ingest/{id}"),
        &[("Content-Type", ctype)],
        body,
        Duration::from_secs(30),
    )
    .unwrap();
    (status, String::from_utf8_lossy(&b).into_owned())
}

/// Polls `f` up to `tries` times, 50 ms apart.
pub fn poll(tries: u32, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn all_files_text(dir: &Path) -> String {
    let mut s = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            s.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
        }
    }
    s
}
