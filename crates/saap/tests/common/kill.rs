//! kill -9 cycles for the chaos tests: a child process (this test binary running one ignored
//! test) is started, SIGKILLed at a random moment once it writes to its SQLite store, and
//! started again, a number of times.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The test binary running only `test` (an ignored test that acts as the child), with
/// `SAAP_CHAOS_DB` set to `db`; its output is dropped unless `keep_stderr`.
pub fn child(test: &str, db: &Path) -> Command {
    let mut c = test_child(test);
    c.env("SAAP_CHAOS_DB", db);
    c
}

/// The test binary running only the ignored test `test`, its output dropped.
pub fn test_child(test: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        test,
        "--exact",
        "--ignored",
        "--test-threads=1",
        "--quiet",
        "--nocapture",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    c
}

/// The seed of this test's randomness: `SAAP_CHAOS_SEED` when set (to replay), else new.
pub fn seed() -> u64 {
    let seed = std::env::var("SAAP_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("chaos seed {seed} (set SAAP_CHAOS_SEED to replay)");
    seed
}

/// Runs `cycles` children of `child`, each killed (SIGKILL) a random 0..`max_ms` ms after
/// it first writes to the store at `db` (a child still starting up, slow on a loaded
/// machine, would be killed before any step ran). Returns how many were still running when
/// killed.
pub fn kill_cycles(
    child: impl Fn() -> Command,
    db: &Path,
    cycles: usize,
    max_ms: u64,
    rng: &mut fastrand::Rng,
) -> usize {
    let wal = db.with_extension("db-wal");
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    let mut killed = 0;
    for _ in 0..cycles {
        let before = wal_len();
        let mut c = child().spawn().unwrap();
        let t0 = Instant::now();
        while wal_len() == before
            && c.try_wait().unwrap().is_none()
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(rng.u64(0..max_ms)));
        if c.try_wait().unwrap().is_none() {
            killed += 1;
        }
        c.kill().unwrap(); // SIGKILL on Unix
        c.wait().unwrap();
    }
    eprintln!("{killed} of {cycles} children were killed while running");
    killed
}

/// Runs the child once more, not killed: the test fails with its stderr unless it ends well
/// (it must finish what the killed ones left).
pub fn finish(mut child: Command, seed: u64) {
    let out = child.stderr(std::process::Stdio::piped()).output().unwrap();
    assert!(
        out.status.success(),
        "the final, uninterrupted child must finish its work (seed {seed}):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A runtime of two workers, for a test's synchronous parts.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// In a chaos child: waits for every run a killed process left live to end (their due
/// timers and re-run steps finish them).
pub async fn finish_live(engine: &saap::Engine) {
    let runner = saap::testing::TestRunner::new(engine.clone());
    for id in engine.run_ids() {
        runner
            .attach(&id)
            .unwrap()
            .wait_for_end(Duration::from_secs(20))
            .await
            .unwrap();
    }
}

/// The runs of agent `class` in `backend`, newest first, at most `limit`.
pub async fn stored_runs(
    backend: &dyn saap::backend::Backend,
    class: &str,
    limit: usize,
) -> Vec<saap::backend::RunSummary> {
    let query = saap::backend::RunQuery {
        limit,
        ..Default::default()
    };
    backend.list_runs(class, &query).wait().await.unwrap().runs
}

/// A store that went through a chaos test's kills: `dir` holds it (keep it alive while the
/// store at `path` is read), `seed` replays the kills.
pub struct Survivor {
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
    pub seed: u64,
}

/// Runs chaos child `test` on a new store named `file`: `cycles` times killed a random
/// 0..`max_ms` ms after it first writes ([`kill_cycles`]), then once more to its end
/// ([`finish`]).
pub fn survive(test: &str, file: &str, cycles: usize, max_ms: u64) -> Survivor {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    kill_cycles(|| child(test, &path), &path, cycles, max_ms, &mut rng);
    finish(child(test, &path), seed);
    Survivor { dir, path, seed }
}
