//! Injectable time source. The service never reads the system clock directly, so idle
//! shutdown can be tested deterministically.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable naming a file that holds a millisecond offset added to the system
/// clock. Used only by tests to move the service's time forward without waiting.
pub const CLOCK_OFFSET_ENV: &str = "AGENT_DEBUG_MODE_TEST_CLOCK_OFFSET_FILE";

/// Current time in Unix epoch milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// Real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        system_now_ms()
    }
}

pub fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// System clock plus an offset read from a file (tests write the file to jump ahead).
#[derive(Debug, Clone)]
pub struct OffsetFileClock {
    pub path: PathBuf,
}

impl Clock for OffsetFileClock {
    fn now_ms(&self) -> u64 {
        let offset = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        system_now_ms().saturating_add(offset)
    }
}

/// Manually driven clock for unit tests.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(pub Arc<AtomicU64>);

impl ManualClock {
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The clock the service uses: the offset-file clock when the test variable is set.
pub fn from_env() -> Arc<dyn Clock> {
    match std::env::var_os(CLOCK_OFFSET_ENV) {
        Some(p) if !p.is_empty() => Arc::new(OffsetFileClock { path: p.into() }),
        _ => Arc::new(SystemClock),
    }
}
