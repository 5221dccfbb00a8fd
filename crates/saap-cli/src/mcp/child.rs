//! Running this executable as a child (`saap check|simulate|explore|explain … --json`) for
//! the CPU-bound tools: the answer is exactly the CLI's, a panic or a runaway exploration
//! stays in the child, and the time bound is kept by killing it.
//!
//! Must not pass the child anything that writes (no `--history-out`), inherit stdout (the
//! protocol) or wait without a bound.

use super::answer::ToolError;
use super::limits::{MAX_CHILD_STDERR, MAX_CHILD_STDOUT};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// What the child printed and how it ended.
#[derive(Debug)]
pub struct ChildOutput {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// stdout (at most [`MAX_CHILD_STDOUT`] bytes).
    pub stdout: String,
    /// stderr (at most [`MAX_CHILD_STDERR`] bytes).
    pub stderr: String,
}

/// Reads at most `max` bytes; returns them and whether more followed. With `drain`, what
/// follows is read and dropped (so a child that writes a lot there never blocks, nor fails on
/// a closed pipe); without it, reading stops (the caller then kills the child).
async fn read_bounded<R: AsyncRead + Unpin>(mut r: R, max: usize, drain: bool) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let mut more = false;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return (buf, more),
            Ok(n) => {
                let room = max - buf.len();
                if n > room {
                    buf.extend_from_slice(&chunk[..room]);
                    more = true;
                    if !drain {
                        return (buf, more);
                    }
                } else {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
}

/// Runs `exe args…` in `cwd` with `stdin` as its input, for at most `bound`.
pub async fn run(
    exe: &Path,
    cwd: &Path,
    args: &[String],
    stdin: Option<String>,
    bound: Duration,
    tool: &str,
) -> Result<ChildOutput, ToolError> {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Plain output: no progress bar, no colour.
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        ToolError::new(format!(
            "internal: cannot start `{}` for `{tool}`: {e}; check that the saap binary still exists",
            exe.display()
        ))
    })?;
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ToolError::new(format!(
            "internal: `{tool}`'s child has no output pipes; report this as a saap bug"
        )));
    };
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        // Written concurrently: a large spec must not block on a child that is not reading.
        tokio::spawn(async move {
            let _ = input.write_all(text.as_bytes()).await;
            let _ = input.shutdown().await;
        });
    }
    let work = async {
        let ((stdout, too_much), (stderr, _)) = tokio::join!(
            read_bounded(out, MAX_CHILD_STDOUT, false),
            read_bounded(err, MAX_CHILD_STDERR, true)
        );
        (stdout, too_much, stderr)
    };
    let (stdout, too_much, stderr) = match tokio::time::timeout(bound, work).await {
        Ok(r) => r,
        Err(_) => {
            let _ = child.kill().await;
            return Err(ToolError::new(format!(
                "`{tool}` did not finish within {}s and was stopped; narrow it (explore: a smaller `max_states` or `max_depth`, no `permute_arrivals`; simulate/explain: a smaller `max_completions`) or restart the server with a larger --tool-timeout",
                bound.as_secs()
            )));
        }
    };
    if too_much {
        let _ = child.kill().await;
        return Err(ToolError::new(format!(
            "`{tool}` printed more than {MAX_CHILD_STDOUT} bytes and was stopped; narrow it (explain: name `steps`; explore: smaller bounds)"
        )));
    }
    let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(s)) => s,
        _ => {
            let _ = child.kill().await;
            return Err(ToolError::new(format!(
                "internal: `{tool}`'s child closed its output but did not exit; report this as a saap bug"
            )));
        }
    };
    Ok(ChildOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_are_bounded_and_drained_or_stopped() {
        let data = vec![b'x'; 100_000];
        let (kept, more) = read_bounded(&data[..], 1000, true).await;
        assert_eq!((kept.len(), more), (1000, true));
        let (kept, more) = read_bounded(&data[..], 1000, false).await;
        assert_eq!((kept.len(), more), (1000, true));
        let (kept, more) = read_bounded(&data[..], 200_000, false).await;
        assert_eq!((kept.len(), more), (100_000, false));
    }
}
