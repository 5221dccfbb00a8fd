//! `<agent> studio` end to end: the example agents' binaries serve their stores; a real
//! browser (headless Chromium through playwright-core, `tests/studio/e2e.mjs`) reads the run
//! list, a run's page and the graph, answers a waiting run from its page and watches another
//! one end live; plain HTTP requests check what the studio must refuse (no token, another
//! host or origin, oversized bodies, paths that lead nowhere, events that do not decode)
//! and that refusing wrote nothing. Screenshots are kept in `target/tmp/studio-screenshots`.
//!
//! The browser test needs `SAAP_CHROMIUM` and `SAAP_BROWSER_MODULES` (`bash
//! scripts/browser-install`; `scripts/test` exports them); without them it says it skipped.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

const ANSWER: &str = r#"{"_event_name": "ApprovalGiven", "approved": true, "by": "ann"}"#;

fn agent(bin: &str, db: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", db.to_str().unwrap()]);
    let out = Command::cargo_bin(bin)
        .unwrap()
        .args(&all)
        .env("SAAP_STATE_DIR", db.parent().unwrap())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A run of the approval agent that waits for a human.
fn waiting_run(db: &Path) -> String {
    let (code, out, err) = agent(
        "approval-agent",
        db,
        &["run", "--json", "--message", "deploy", "--timeout", "1"],
    );
    assert_eq!(code, 1, "the run waits for a human: {err}");
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    last["run_id"].as_str().unwrap().to_string()
}

fn show(bin: &str, db: &Path, run: &str) -> serde_json::Value {
    let (code, out, err) = agent(bin, db, &["show", run, "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// A studio process, stopped when dropped.
struct Studio {
    child: Child,
    addr: String,
    url: String,
    login_url: String,
    token: String,
}

impl Studio {
    fn start(bin: &str, db: &Path) -> Studio {
        Studio::start_with(bin, &["--db", db.to_str().unwrap()])
    }

    fn start_with(bin: &str, args: &[&str]) -> Studio {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin(bin))
            .args(["studio", "--listen", "127.0.0.1:0", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("the studio's first line is its address as JSON ({e}): {line:?}")
        });
        let url = v["url"].as_str().unwrap().to_string();
        Studio {
            child,
            addr: url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string(),
            url,
            login_url: v["login_url"].as_str().unwrap().to_string(),
            token: v["token"].as_str().unwrap().to_string(),
        }
    }

    /// One HTTP/1.1 request: (status, the whole response as text).
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let host = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map_or(self.addr.as_str(), |(_, v)| *v);
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
        {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        // A server may answer (413, say) before it reads the whole body.
        let _ = s.write_all(body);
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
        (status, text)
    }

    fn get(&self, path: &str) -> (u16, String) {
        self.request("GET", path, &[], b"")
    }

    /// A form posted with the token as a bearer header.
    fn post(&self, path: &str, form: &str) -> (u16, String) {
        let bearer = format!("Bearer {}", self.token);
        self.request(
            "POST",
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            form.as_bytes(),
        )
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn form_value(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("studio-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_studio_in_a_browser_lists_shows_answers_and_follows_runs() {
    let (Ok(chromium), Ok(modules)) = (
        std::env::var("SAAP_CHROMIUM"),
        std::env::var("SAAP_BROWSER_MODULES"),
    ) else {
        eprintln!(
            "skipped: SAAP_CHROMIUM and SAAP_BROWSER_MODULES are not set (no headless browser); run `bash scripts/browser-install` and export the two paths of its last line"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let stopped = waiting_run(&db);
    let (code, _, err) = agent(
        "approval-agent",
        &db,
        &["send", &stopped, "--event", ANSWER],
    );
    assert_eq!(code, 0, "{err}");
    let waiting = waiting_run(&db);
    let waiting2 = waiting_run(&db);

    let studio = Studio::start("approval-agent", &db);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/studio/e2e.mjs");
    let out = std::process::Command::new("node")
        .arg(&script)
        .env("SAAP_CHROMIUM", chromium)
        .env("SAAP_BROWSER_MODULES", modules)
        .env("STUDIO_URL", &studio.url)
        .env("STUDIO_LOGIN_URL", &studio.login_url)
        .env("STOPPED_RUN", &stopped)
        .env("WAITING_RUN", &waiting)
        .env("WAITING_RUN_2", &waiting2)
        .env("ANSWER", ANSWER)
        .env("OUT_DIR", screenshots_dir())
        .output()
        .expect("node runs the browser script (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let shots = report["screenshots"].as_array().unwrap();
    assert_eq!(shots.len(), 8, "{report}");
    for s in shots {
        let png = std::fs::read(s.as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{s} is a PNG");
    }
    studio.stop();
    // The answers given in the browser are in the store: both runs ended as the agent says.
    for run in [&waiting, &waiting2] {
        let doc = show("approval-agent", &db, run);
        assert_eq!(doc["status"], "stopped", "{doc}");
        assert_eq!(doc["result"]["event"], "Executed", "{doc}");
        assert_eq!(doc["result"]["fields"]["approved_by"], "ann", "{doc}");
    }
}

#[test]
fn the_studio_refuses_what_it_must_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let waiting = waiting_run(&db);
    let ended = waiting_run(&db);
    let (code, _, err) = agent("approval-agent", &db, &["send", &ended, "--event", ANSWER]);
    assert_eq!(code, 0, "{err}");
    let before = show("approval-agent", &db, &waiting);

    let studio = Studio::start("approval-agent", &db);
    let (status, page) = studio.get("/");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&waiting) && page.contains(&ended), "{page}");
    assert!(
        page.to_lowercase().contains("x-frame-options: deny"),
        "{page}"
    );
    let (status, api) = studio.get("/api/runs?status=waiting");
    assert_eq!(status, 200, "{api}");
    let body: serde_json::Value =
        serde_json::from_str(api.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let listed: Vec<&str> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [waiting.as_str()], "{body}");
    let (status, run) = studio.get(&format!("/api/runs/{}", &waiting[..10]));
    assert_eq!(status, 200, "a unique prefix names a run: {run}");
    // Filters by thread and start time, as `runs --thread/--since/--until` take them.
    let ids = |path: &str| -> Vec<String> {
        let (status, text) = studio.get(path);
        assert_eq!(status, 200, "{path}: {text}");
        let body: serde_json::Value =
            serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        body["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect()
    };
    let thread = before["thread_id"].as_str().unwrap();
    assert_eq!(
        ids(&format!("/api/runs?thread={thread}")),
        [waiting.as_str()]
    );
    assert_eq!(ids("/api/runs?since=1h").len(), 2);
    assert!(ids("/api/runs?until=1h").is_empty());
    let (status, page) = studio.get(&format!("/?thread={thread}&since=2000-01-01"));
    assert_eq!(status, 200);
    assert!(
        page.contains(&waiting) && !page.contains(&format!("data-run=\"{ended}\"")),
        "{page}"
    );
    let (status, text) = studio.get("/?since=yesterday");
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("SAAP-U002") && text.contains("is not a time"),
        "{text}"
    );

    let send = format!("/runs/{waiting}/send");
    let answer = format!("event={}", form_value(ANSWER));
    // No token: refused.
    let (status, text) = studio.request(
        "POST",
        &send,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        answer.as_bytes(),
    );
    assert_eq!(status, 401, "{text}");
    assert!(
        text.contains("SAAP-U003") && text.contains("token"),
        "{text}"
    );
    // A wrong token: refused.
    let (status, text) = studio.request(
        "POST",
        &send,
        &[
            ("Authorization", "Bearer 0123456789abcdef0123456789abcdef"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        answer.as_bytes(),
    );
    assert_eq!(status, 401, "{text}");
    // Another host name (a rebound DNS name): refused, even to read.
    let (status, text) = studio.request("GET", "/", &[("Host", "evil.example:80")], b"");
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("SAAP-U004"), "{text}");
    // A form from another site's page, even with the token: refused.
    let bearer = format!("Bearer {}", studio.token);
    let (status, text) = studio.request(
        "POST",
        &send,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        answer.as_bytes(),
    );
    assert_eq!(status, 403, "{text}");
    // Paths that lead nowhere.
    for path in [
        "/static/../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/runs/ffffffffffffffffffffffff",
    ] {
        let (status, text) = studio.get(path);
        assert_eq!(status, 404, "{path}: {text}");
        assert!(!text.contains("root:"), "{path}: {text}");
    }
    // An event that is not JSON, or names no type of the agent: refused.
    let (status, text) = studio.post(&send, "event=%40%2Fetc%2Fpasswd");
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("SAAP-U002") && text.contains("not JSON"),
        "{text}"
    );
    let (status, text) = studio.post(
        &send,
        &format!("event={}", form_value(r#"{"_event_name": "NoSuchEvent"}"#)),
    );
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("NoSuchEvent"), "{text}");
    // An oversized body: refused before it is read.
    let big = format!("event={}", "a".repeat(2 * 1024 * 1024));
    let (status, text) = studio.post(&send, &big);
    assert_eq!(status, 413, "{}", &text[..text.len().min(300)]);
    // A run started with nothing: refused.
    let (status, text) = studio.post("/runs", "message=&event=");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("say what the run starts with"), "{text}");
    // Acting on an ended run, or forking at the start event: the engine's refusal.
    let (status, text) = studio.post(&format!("/runs/{ended}/send"), &answer);
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("has ended"), "{text}");
    let (status, text) = studio.post(&format!("/runs/{ended}/fork"), "at=0&mode=same");
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("SAAP-E024"), "{text}");
    // Off loopback only when told.
    let (code, _, err) = agent("approval-agent", &db, &["studio", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--allow-remote"), "{err}");
    studio.stop();

    // Nothing of that was written: the waiting run is as it was.
    let after = show("approval-agent", &db, &waiting);
    assert_eq!(before["events"], after["events"]);
    assert_eq!(before["status"], after["status"]);
}

#[test]
fn a_run_page_shows_each_model_calls_tokens_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (code, out, err) = agent(
        "rag-model-agent",
        &db,
        &["run", "--json", "--message", "what is saap?"],
    );
    assert_eq!(code, 0, "{err}");
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let run = last["run_id"].as_str().unwrap().to_string();
    let studio = Studio::start("rag-model-agent", &db);
    let (status, page) = studio.get(&format!("/runs/{run}"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Model calls per step"), "{page}");
    let row = page
        .split("<tr data-step=\"answer\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no usage row for `answer`: {page}"));
    let cells: Vec<&str> = row
        .split("<td class=\"num\">")
        .skip(1)
        .take(4)
        .map(|c| c.split('<').next().unwrap())
        .collect();
    assert_eq!(cells[0], "1", "one model call: {cells:?}");
    assert!(
        cells[1].parse::<i64>().unwrap() > 0,
        "prompt tokens: {cells:?}"
    );
    assert!(
        cells[2].parse::<i64>().unwrap() > 0,
        "completion tokens: {cells:?}"
    );
    assert!(cells[3].parse::<f64>().unwrap() > 0.0, "cost: {cells:?}");
    let (status, graph) = studio.get("/graph");
    assert_eq!(status, 200);
    assert!(graph.contains("data-step=\"answer\""), "{graph}");
    studio.stop();
}

/// Fork from a run's page (plain HTTP): an answered run forked at the answer, sent again,
/// ends as the original did; the steps after it take the original's outputs, or run again
/// when the form says so; the fork's JSON says which.
#[test]
fn the_studio_forks_a_run_reusing_its_outputs_or_running_live() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let run = waiting_run(&db);
    let answer = r#"{"_event_name": "ApprovalGiven", "approved": true, "by": "ann"}"#;
    let (code, _, err) = agent("approval-agent", &db, &["send", &run, "--event", answer]);
    assert_eq!(code, 0, "{err}");
    let original = show("approval-agent", &db, &run);
    let at = original["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "ApprovalGiven")
        .unwrap()["seq"]
        .clone();
    let studio = Studio::start("approval-agent", &db);
    let fork = |extra: &str| {
        let (status, text) = studio.post(
            &format!("/runs/{run}/fork"),
            &format!("at={at}&mode=same{extra}"),
        );
        assert_eq!(status, 303, "{text}");
        let fork = redirected_run(&text);
        let doc = progress_until(&studio, &fork, |s| s == "stopped");
        assert_eq!(
            doc["result"]["event"], original["result"]["event"],
            "{doc:#}"
        );
        doc["forked_from"].clone()
    };
    let reused = fork("");
    assert!(
        !reused["matched"].as_array().unwrap().is_empty(),
        "{reused:#}"
    );
    assert_eq!(reused["live"], serde_json::json!([]), "{reused:#}");
    let live = fork("&no_reuse=1");
    assert_eq!(live["matched"], serde_json::json!([]), "{live:#}");
    assert!(!live["live"].as_array().unwrap().is_empty(), "{live:#}");
    studio.stop();
}

/// The run a redirect after an action leads to (`Location: /runs/RUN?note=…`).
fn redirected_run(response: &str) -> String {
    let location = response
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .unwrap_or_else(|| panic!("no redirect: {response}"));
    location
        .trim()
        .trim_start_matches("/runs/")
        .split('?')
        .next()
        .unwrap()
        .to_string()
}

/// Waits (bounded) until run `run`'s progress, as `/api/runs/RUN` says, satisfies `done`.
fn progress_until(studio: &Studio, run: &str, done: impl Fn(&str) -> bool) -> serde_json::Value {
    let bound = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let (status, text) = studio.get(&format!("/api/runs/{run}"));
        if status == 200 {
            let doc: serde_json::Value =
                serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            if done(doc["progress"]["state"].as_str().unwrap_or("")) {
                return doc;
            }
        }
        assert!(std::time::Instant::now() < bound, "run {run}: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The studio of an agent class on NATS (a real nats-server, a worker of the class in
/// another process): it starts a run, answers it and cancels another by publishing on the
/// class stream — the worker runs them — reads them from the journal, replays one, and
/// refuses to fork (not supported there yet).
#[test]
fn the_studio_of_a_class_on_nats_acts_through_its_workers() {
    let server = saap_nats::testing::NatsServer::start();
    let url = server.url();
    let mut worker = std::process::Command::new(assert_cmd::cargo::cargo_bin("approval-agent"))
        .args(["run", "--engine", &url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let studio = Studio::start_with("approval-agent", &["--engine", &url]);
    let waiting = |s: &str| s.starts_with("waiting");

    let (status, text) = studio.post("/runs", "message=deploy");
    assert_eq!(status, 303, "{text}");
    let answered = redirected_run(&text);
    progress_until(&studio, &answered, waiting);
    let (status, page) = studio.get(&format!("/runs/{answered}"));
    assert_eq!(status, 200);
    assert!(page.contains("data-event=\"ApprovalRequested\""), "{page}");
    let (status, text) = studio.post(
        &format!("/runs/{answered}/send"),
        &format!("event={}", form_value(ANSWER)),
    );
    assert_eq!(status, 303, "{text}");
    let doc = progress_until(&studio, &answered, |s| s == "stopped");
    assert_eq!(doc["result"]["event"], "Executed", "{doc}");

    let (status, text) = studio.post("/runs", "message=rotate+the+keys&thread=ops-1");
    assert_eq!(status, 303, "{text}");
    let cancelled = redirected_run(&text);
    let doc = progress_until(&studio, &cancelled, waiting);
    assert_eq!(doc["thread_id"], "ops-1", "{doc}");
    let (status, text) = studio.post(&format!("/runs/{cancelled}/cancel"), "reason=not+now");
    assert_eq!(status, 303, "{text}");
    progress_until(&studio, &cancelled, |s| s == "cancelled");

    let (status, page) = studio.get("/?status=stopped");
    assert_eq!(status, 200);
    assert!(
        page.contains(&answered) && !page.contains(&format!("data-run=\"{cancelled}\"")),
        "{page}"
    );
    let (status, text) = studio.post(&format!("/runs/{answered}/replay"), "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("data-replay=\"reproduced\""), "{text}");
    let (status, text) = studio.post(&format!("/runs/{answered}/fork"), "at=2&mode=same");
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("not supported yet"), "{text}");
    let (status, text) = studio.post(
        &format!("/runs/{answered}/send"),
        &format!("event={}", form_value(ANSWER)),
    );
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("has ended"), "{text}");
    studio.stop();
    let _ = worker.kill();
    let _ = worker.wait();
}
