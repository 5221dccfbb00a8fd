//! The state directory and symlink-safe access to it.
//!
//! Layout under the state root (`~/.agent-debug-mode/`, or `$AGENT_DEBUG_MODE_HOME_OVERRIDE`):
//!
//! ```text
//! service.json            port, pid, version and control token of the running service (0600)
//! service.lock            held (OS file lock) by the one running service
//! spawn.lock              serializes CLI processes that start a service
//! service.log             service diagnostics (bounded)
//! sessions/<uuid>/meta.json         createdAt, schemaVersion
//! sessions/<uuid>/state.json        reset epoch, file-ingest offset
//! sessions/<uuid>/events.ndjson     canonical, validated and redacted evidence
//! sessions/<uuid>/diagnostics.ndjson malformed-record diagnostics (redacted)
//! sessions/<uuid>/incoming.ndjson   the append path probes write to
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{DmError, ErrorCode, Result};

/// Environment variable that overrides the state root (drop-in compatible name).
pub const HOME_OVERRIDE_ENV: &str = "AGENT_DEBUG_MODE_HOME_OVERRIDE";
/// Directory name under the user's home.
pub const STATE_DIR_NAME: &str = ".agent-debug-mode";

fn nofollow() -> i32 {
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}

/// Resolves the state root. Does not create it.
pub fn state_root() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(HOME_OVERRIDE_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_absolute() {
            return Err(DmError::new(
                ErrorCode::InvalidArguments,
                format!("{HOME_OVERRIDE_ENV} must be an absolute path"),
                format!("set {HOME_OVERRIDE_ENV} to an absolute directory, or unset it"),
            ));
        }
        return Ok(p);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(STATE_DIR_NAME)),
        None => Err(DmError::new(
            ErrorCode::InvalidArguments,
            "cannot locate the state directory: HOME is not set",
            format!("set HOME, or set {HOME_OVERRIDE_ENV} to an absolute directory"),
        )),
    }
}

/// Validates a session id: a lowercase hyphenated UUID. Anything else (including path
/// traversal such as `../x`) is rejected before it can touch the file system.
pub fn validate_session_id(id: &str) -> Result<()> {
    let ok = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        });
    if ok {
        Ok(())
    } else {
        let shown: String = id.chars().take(64).collect();
        Err(DmError::new(
            ErrorCode::InvalidArguments,
            format!(
                "`{shown}` is not a valid session id (expected a lowercase UUID such as 0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42)"
            ),
            "copy the Session ID printed by `debug-mode create`, or list sessions with `debug-mode sessions --all`",
        )
        .with_reason(crate::error::reason::INVALID_SESSION_ID))
    }
}

/// Fails when `path` exists and is a symbolic link.
pub fn reject_symlink(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(unsafe_state(path)),
        _ => Ok(()),
    }
}

pub fn unsafe_state(path: &Path) -> DmError {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    DmError::new(
        ErrorCode::StateUnsafe,
        format!(
            "refusing to use `{name}` in the debug-mode state directory: it is a symbolic link"
        ),
        "remove the symbolic link (debug-mode state must be real files and directories), then retry",
    )
}

/// Creates a directory (mode 0700) if missing; rejects symlinks and non-directories.
pub fn ensure_dir(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(unsafe_state(path)),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(DmError::new(
            ErrorCode::StateUnsafe,
            format!("{} exists but is not a directory", path.display()),
            "move the file away, then retry",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .or_else(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(DmError::evidence_io("create the state directory", &e))
                }
            })
            .and_then(|()| reject_symlink(path)),
        Err(e) => Err(DmError::evidence_io("inspect the state directory", &e)),
    }
}

/// Opens a file for reading without following a symlink at the final component.
pub fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nofollow())
        .open(path)
}

/// Opens (creating, mode 0600) a file for appending without following symlinks.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nofollow())
        .open(path)
}

/// Opens (creating, mode 0600) a file for read+write without following symlinks.
pub fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nofollow())
        .open(path)
}

/// Opens an existing file for read+write without following symlinks (never creates).
pub fn open_rw_existing(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nofollow())
        .open(path)
}

/// Atomically replaces `path` with `bytes` (write to a temp file, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nofollow())
        .open(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Paths of one session's files.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    pub dir: PathBuf,
}

impl SessionPaths {
    pub fn new(root: &Path, id: &str) -> Self {
        Self {
            dir: root.join("sessions").join(id),
        }
    }
    pub fn meta(&self) -> PathBuf {
        self.dir.join("meta.json")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn events(&self) -> PathBuf {
        self.dir.join("events.ndjson")
    }
    pub fn diagnostics(&self) -> PathBuf {
        self.dir.join("diagnostics.ndjson")
    }
    pub fn incoming(&self) -> PathBuf {
        self.dir.join("incoming.ndjson")
    }
    /// Checks that neither the session directory nor any of its files is a symlink.
    pub fn check(&self) -> Result<()> {
        reject_symlink(&self.dir)?;
        for p in [
            self.meta(),
            self.state(),
            self.events(),
            self.diagnostics(),
            self.incoming(),
        ] {
            reject_symlink(&p)?;
        }
        Ok(())
    }
}

/// Replaces the home directory prefix with `~` for display.
pub fn display_path(path: &Path) -> String {
    if std::env::var_os(HOME_OVERRIDE_ENV).is_none()
        && let Some(home) = std::env::var_os("HOME")
        && let Ok(rest) = path.strip_prefix(&home)
    {
        return format!("~/{}", rest.display());
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_must_be_lowercase_uuids() {
        assert!(validate_session_id("0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42").is_ok());
        for bad in [
            "",
            "../../etc",
            "0B6F1F3E-8D7A-4C56-9A51-2F0E8A1C9D42",
            "0b6f1f3e/8d7a-4c56-9a51-2f0e8a1c9d42",
            "0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d4",
            "0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42x",
        ] {
            let e = validate_session_id(bad).expect_err(bad);
            assert_eq!(e.code.exit_code(), 2);
        }
    }

    #[test]
    fn symlinked_state_is_rejected() {
        let t = tempfile::tempdir().expect("tempdir");
        let real = t.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(
            ensure_dir(&link).expect_err("symlink").code,
            ErrorCode::StateUnsafe
        );
        let file_link = t.path().join("f");
        std::os::unix::fs::symlink(real.join("x"), &file_link).expect("symlink");
        assert!(open_append(&file_link).is_err());
        assert!(!real.join("x").exists());
    }
}
