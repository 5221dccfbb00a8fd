//! Shared helpers of the CLI tests: run `saap` from the workspace root (so paths in the
//! output are stable) and capture its exit code and output.
#![allow(clippy::unwrap_used, dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `saap` run from the workspace root.
pub fn saap() -> Command {
    let mut cmd = Command::cargo_bin("saap").unwrap();
    cmd.current_dir(workspace_root());
    cmd
}

/// What a `saap` invocation did.
#[derive(Debug, PartialEq, Eq)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `saap ARGS…` from the workspace root.
pub fn saap_with(args: &[&str]) -> Output {
    run(saap().args(args))
}

/// The stems of `examples/specs/*.yaml`, sorted.
pub fn example_stems() -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(workspace_root().join("examples/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    stems.sort();
    stems
}

/// Runs `scripts/SCRIPT`, an installer that prints the path of a Python on stdout, and returns
/// that path or the reason it failed. One installer at a time per test process: the tests run
/// in parallel, and two pip runs (or venv creations) in one environment could trip over each
/// other.
pub fn install(script: &str) -> Result<String, String> {
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new("bash")
        .arg(workspace_root().join("scripts").join(script))
        .output()
        .map_err(|e| format!("cannot run scripts/{script}: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A Python with PyPI's nats-py (the Python implementation's NATS client), or the reason there
/// is none; installed once per test process (`scripts/nats-py-install`).
pub fn nats_py() -> Result<String, String> {
    static PYTHON: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| install("nats-py-install")).clone()
}

/// Runs an agent's own command line (`saap::main`) in this process.
pub fn agent(workflow: saap::Workflow, args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let _ = saap::cli::main_with(workflow, args);
}

/// Runs the example RagAgent's command line as a NATS worker that starts one run. The worker
/// serves (and answers class discovery) until the test process ends.
pub fn start_rag_worker(url: &str) {
    let args: Vec<String> = [
        "rag-agent",
        "run",
        "--engine",
        url,
        "--message",
        "what is saap?",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    std::thread::spawn(move || {
        let _ = saap::cli::main_with(saap_examples::rag::workflow(), args);
    });
}

/// Every file of a directory with its bytes, sorted by name: equal before and after a reader
/// ran means it wrote nothing.
pub fn snapshot_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    files
}

/// The workflow's spec as `<agent> spec` prints it, in file `name` of `dir`; its path.
#[allow(dead_code)]
pub fn spec_file(dir: &Path, name: &str, workflow: &saap::Workflow) -> String {
    let path = dir.join(name);
    std::fs::write(&path, workflow.spec_json()).unwrap();
    path.to_str().unwrap().to_owned()
}
