//! The file operations the store needs and their errors: positioned reads, diagnostics
//! written, the events file opened without following links, consumed bytes scrubbed, lines
//! counted, private directories. Must not know a session's index.

use super::reports::{Diagnostic, Source};

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{DmError, ErrorCode, Result};
use crate::event::Malformed;
use crate::paths::{self};

pub(super) fn io_err(what: &str) -> impl FnOnce(io::Error) -> DmError + '_ {
    move |e| DmError::evidence_io(what, &e)
}

pub(super) fn corrupt(what: &str) -> DmError {
    DmError::new(
        ErrorCode::EvidenceMalformed,
        format!("the session's {what} is unreadable or corrupt"),
        "run `debug-mode reset --session <id>` to start a clean evidence cycle, or `debug-mode clean --session <id>` to remove the session",
    )
}

/// Reads into `buf` from `offset` until it is full or the file ends.
pub(super) fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

pub(super) fn write_diagnostic(
    out: &mut Vec<u8>,
    n: u64,
    source: Source,
    now: u64,
    m: Malformed,
) -> Result<()> {
    let d = Diagnostic {
        id: format!("MR-{n}"),
        source,
        received_at: now,
        reason: serde_json::to_value(m.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        message: m.message,
        recoverable_fields: m.recoverable_fields,
        preview: m.preview,
        suggested_fix: m.suggested_fix,
    };
    serde_json::to_writer(&mut *out, &d)
        .map_err(|e| DmError::evidence_io("serialize a diagnostic", &e.into()))?;
    out.push(b'\n');
    Ok(())
}

pub(super) fn open_events(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags_nofollow()
        .open(path)
        .map_err(io_err("open evidence"))
}

pub(super) trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
            .custom_flags(i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0))
    }
}

/// Deallocates (punches a hole over) the consumed prefix of the append path, so the raw,
/// unredacted lines a probe wrote do not stay on disk after ingestion. The file size is
/// kept, so concurrent `O_APPEND` writers are unaffected; unconsumed bytes are untouched.
pub(super) fn scrub_consumed(f: &File, from: u64, to: u64) {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::FallocateFlags;
        if let Err(e) = rustix::fs::fallocate(
            f,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            from,
            to - from,
        ) {
            tracing::debug!(error = %e, "cannot punch a hole in the append path");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, from, to);
}

pub fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

pub(super) fn memrchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memrchr(needle, hay)
}

/// Counts complete lines of a file (0 when missing).
pub fn count_lines(path: &Path) -> Result<u64> {
    let mut f = match paths::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(DmError::evidence_io("read session files", &e)),
    };
    let mut buf = vec![0u8; 1024 * 1024];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(io_err("read session files"))?;
        if k == 0 {
            return Ok(n);
        }
        n += buf[..k].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

pub(super) trait DirMode {
    fn mode_0700(&mut self) -> &mut Self;
}

impl DirMode for std::fs::DirBuilder {
    fn mode_0700(&mut self) -> &mut Self {
        use std::os::unix::fs::DirBuilderExt;
        self.mode(0o700)
    }
}
