//! `saap studio` (the studio of agents known by their specs alone) against real parts: a
//! store written by the example agents' own command line, served read-only (the pages and the
//! JSON, a child run of the delegated agent, every action refused, the store unchanged and
//! never locked), a class on a real nats-server whose spec comes from its worker (a run
//! started from the studio and run by the worker; replay refused), and bad input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{agent, run, saap, snapshot_dir, spec_file, start_rag_worker};
use saap_nats::testing::NatsServer;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `saap studio` process, stopped when dropped.
struct Studio {
    child: Child,
    addr: String,
    first: Value,
}

impl Studio {
    fn start(args: &[&str]) -> Studio {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("saap"))
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
        let first: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the first line is the studio's address ({e}): {line:?}"));
        let addr = first["url"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        Studio { child, addr, first }
    }

    /// One request: (status, the whole response).
    fn request(&self, method: &str, path: &str, extra: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
        (status, text)
    }

    fn get(&self, path: &str) -> (u16, String) {
        self.request("GET", path, "", "")
    }

    /// A form posted with the printed token.
    fn post(&self, path: &str, form: &str) -> (u16, String) {
        let token = self.first["token"].as_str().unwrap();
        let extra = format!(
            "Authorization: Bearer {token}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        );
        self.request("POST", path, &extra, form)
    }

    /// The JSON body of a GET.
    fn json(&self, path: &str) -> Value {
        let (status, text) = self.get(path);
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    }
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_store_is_shown_read_only_from_the_agents_specs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agents.db");
    let db_s = db.to_str().unwrap();
    agent(
        saap_examples::research::editor_with_researcher(),
        &[
            "research-agent",
            "run",
            "--db",
            db_s,
            "--message",
            "ants, bees",
        ],
    );
    agent(
        saap_examples::approval::workflow(),
        &[
            "approval-agent",
            "run",
            "--db",
            db_s,
            "--message",
            "deploy",
            "--timeout",
            "1",
        ],
    );
    let specs = tempfile::tempdir().unwrap();
    let editor = spec_file(
        specs.path(),
        "editor.json",
        &saap_examples::research::editor(),
    );
    let researcher = spec_file(
        specs.path(),
        "researcher.json",
        &saap_examples::research::researcher(),
    );
    let before = snapshot_dir(dir.path());

    let studio = Studio::start(&["--db", db_s, &editor, &researcher]);
    assert_eq!(studio.first["read_only"], true, "{}", studio.first);
    let runs = studio.json("/api/runs");
    let list = runs["runs"].as_array().unwrap();
    assert_eq!(list.len(), 1, "one run of the editor: {runs}");
    assert_eq!(list[0]["status"], "stopped", "{runs}");
    let run = list[0]["run_id"].as_str().unwrap().to_string();

    let (status, page) = studio.get(&format!("/runs/{run}"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-event=\"Brief\""), "{page}");
    assert!(
        page.contains("the agents' specs without their code"),
        "{page}"
    );
    assert!(page.contains("class=\"hint cannot\""), "{page}");
    assert!(!page.contains("fork here"), "no fork offered: {page}");
    let doc = studio.json(&format!("/api/runs/{run}"));
    let children = doc["children"].as_array().unwrap();
    assert_eq!(children.len(), 2, "{doc}");
    // A child run of the delegated agent, read from the same store.
    let child = children[0]["run_id"].as_str().unwrap();
    let (status, page) = studio.get(&format!("/runs/{child}"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("ResearcherAgent"), "{page}");
    let (status, page) = studio.get("/?agent=ResearcherAgent");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(child), "{page}");
    assert!(page.contains("data-cannot=\"start\""), "{page}");
    let (status, page) = studio.get("/graph");
    assert_eq!(status, 200);
    assert!(page.contains("<svg"), "{page}");

    // Nothing acts, token or not.
    for (path, form) in [
        ("/runs".to_string(), "message=hi".to_string()),
        (format!("/runs/{run}/replay"), String::new()),
        (format!("/runs/{run}/fork"), "at=0&mode=same".to_string()),
        (format!("/runs/{child}/send"), "event=%7B%7D".to_string()),
    ] {
        let (status, text) = studio.post(&path, &form);
        assert_eq!(status, 409, "{path}: {text}");
        assert!(text.contains("SAAP-U008"), "{path}: {text}");
    }
    assert_eq!(snapshot_dir(dir.path()), before, "the studio wrote nothing");
    // Never locked: an agent opens its store (exclusively) while the studio is open.
    let owner = saap::SqliteBackend::open(&db).unwrap_or_else(|e| panic!("{e}"));
    drop(owner);
    let (status, _) = studio.get(&format!("/runs/{run}"));
    assert_eq!(status, 200);
}

#[test]
fn a_class_on_nats_is_shown_from_its_workers_spec_and_acted_on_through_them() {
    let server = NatsServer::start();
    let url = server.url();
    start_rag_worker(&url);
    let studio = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // The worker answers class discovery once it serves (a probe that stops at
            // the refused address once the spec was found).
            let out = run(saap()
                .args([
                    "studio",
                    "--server",
                    &url,
                    "--class",
                    "RagAgent",
                    "--timeout",
                    "1",
                ])
                .args(["--listen", "0.0.0.0:0"]));
            if !out.stderr.contains("SAAP-I017") || Instant::now() > deadline {
                break Studio::start(&["--server", &url, "--class", "RagAgent"]);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert_eq!(studio.first["read_only"], false, "{}", studio.first);
    let (status, text) = studio.post("/runs", "message=what+is+saap%3F");
    assert_eq!(status, 303, "{text}");
    let started = text
        .lines()
        .find_map(|l| l.strip_prefix("location: /runs/"))
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let doc = loop {
        let (status, text) = studio.get(&format!("/api/runs/{started}"));
        if status == 200 {
            let doc: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            if doc["status"] == "stopped" {
                break doc;
            }
        }
        assert!(Instant::now() < deadline, "the worker ran it: {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(doc["result"]["event"], "Answered", "{doc}");
    let (status, text) = studio.post(&format!("/runs/{started}/replay"), "");
    assert_eq!(status, 409, "{text}");
    assert!(
        text.contains("SAAP-U008") && text.contains("replay RUN"),
        "{text}"
    );
}

#[test]
fn what_saap_studio_cannot_read_is_said_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_file(
        dir.path(),
        "approval.json",
        &saap_examples::approval::workflow(),
    );
    let missing = dir.path().join("none.db");
    let out = run(saap().args(["studio", "--db", missing.to_str().unwrap(), &spec]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--db PATH"), "{}", out.stderr);
    assert!(!missing.exists(), "nothing is created");

    let not_a_store = dir.path().join("notes.db");
    std::fs::write(&not_a_store, "not sqlite").unwrap();
    let out = run(saap().args(["studio", "--db", not_a_store.to_str().unwrap(), &spec]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("SAAP-S00"), "{}", out.stderr);

    let out = run(saap().args(["studio", "--db", missing.to_str().unwrap()]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("a store keeps no spec"),
        "{}",
        out.stderr
    );

    let out = run(saap().args(["studio", &spec]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--db"), "{}", out.stderr);

    let out = run(saap().args([
        "studio",
        "--db",
        missing.to_str().unwrap(),
        &spec,
        "--listen",
        "0.0.0.0:0",
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
}
