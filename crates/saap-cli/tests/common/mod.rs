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
