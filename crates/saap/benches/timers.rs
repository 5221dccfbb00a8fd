//! Durable timers at scale (issue 21's targets): N runs (default 10,000) wait on one pending
//! timer each, all due at the same moment. Measured in one run, in memory:
//!
//! * memory per waiting run: the process's resident set after all N wait, minus before they
//!   started, over N (target ≤ 2 KiB);
//! * idle CPU while they wait: the process's user + system time over a quiet second before
//!   the timers are due (target ~0: no polling per run);
//! * lateness when they come due together: each firing step's body notes `now - due`; the
//!   median, p99 and the last one (target: all within 50 ms).
//!
//! `cargo bench -p saap --bench timers` (optional args: runs, seconds until due). Prints one
//! JSON line. Linux only (reads /proc/self).
#![allow(clippy::unwrap_used)]

use saap::{
    Delayed, Engine, EngineOptions, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow,
};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Due {
    ns: u64,
}
impl saap::Event for Due {
    const NAME: &'static str = "Due";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Done {
    late_ns: u64,
}
impl saap::Event for Done {
    const NAME: &'static str = "Done";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}

/// How late each timer's step ran (ns after its due time).
static LATE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// `wait` sets a timer due at the time its start message names; `fire` notes how late it ran.
fn workflow() -> Workflow {
    Workflow::builder("Timers")
        .step(Step::new(
            "wait",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let ns: u64 = q.message.parse().unwrap();
                let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(ns);
                Ok::<_, StepError>(Delayed::at(at, Due { ns }))
            },
        ))
        .step(Step::new(
            "fire",
            |d: Required<Due>, _: StepCtx| async move {
                let late_ns = now_ns().saturating_sub(d.ns);
                LATE.lock().unwrap().push(late_ns);
                Ok::<_, StepError>(Done { late_ns })
            },
        ))
        .build()
        .unwrap()
}

/// Resident set size in bytes (/proc/self/statm, pages of 4 KiB).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 4096
}

/// The process's user + system CPU time in clock ticks (/proc/self/stat, 1/100 s).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses): utime is the 14th field.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let secs: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let opts = EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        };
        let engine = Engine::new(
            workflow(),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            opts,
        );
        // Warm up: the engine's tables, the timer queue's task, allocator arenas.
        let warm = now_ns() + 10_000_000;
        let mut ids = Vec::new();
        for _ in 0..100 {
            ids.push(engine.start_run(UserMessageEvent::new(warm.to_string())).await.unwrap());
        }
        for id in &ids {
            let _ = engine.wait_for_end(id).await;
        }
        LATE.lock().unwrap().clear();
        tokio::time::sleep(Duration::from_millis(100)).await;

        let due = now_ns() + secs * 1_000_000_000;
        let before = rss();
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(engine.start_run(UserMessageEvent::new(due.to_string())).await.unwrap());
        }
        // Every `wait` has run: each run holds its pending timer.
        while !ids.iter().all(|id| {
            engine
                .snapshot(id)
                .is_some_and(|s| s.run.next_due().is_some())
        }) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let waiting_bytes = rss().saturating_sub(before) as f64 / n as f64;
        assert!(
            now_ns() + 1_100_000_000 < due,
            "starting {n} runs took too long to measure a quiet second before they are due; give more seconds"
        );
        let cpu_before = cpu_ticks();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle_ticks = cpu_ticks() - cpu_before;

        for id in &ids {
            let _ = engine.wait_for_end(id).await;
        }
        let all_done_late_ms = (now_ns().saturating_sub(due)) as f64 / 1e6;
        let mut late = std::mem::take(&mut *LATE.lock().unwrap());
        late.sort_unstable();
        assert_eq!(late.len(), n, "every timer fired once");
        println!(
            "{{\"runs\":{n},\"bytes_per_waiting_run\":{waiting_bytes:.0},\"idle_cpu_ms_per_s\":{},\"late_ms_p50\":{:.2},\"late_ms_p99\":{:.2},\"late_ms_max\":{:.2},\"all_done_after_due_ms\":{all_done_late_ms:.2}}}",
            idle_ticks * 10,
            quantile(&late, 0.5) as f64 / 1e6,
            quantile(&late, 0.99) as f64 / 1e6,
            *late.last().unwrap() as f64 / 1e6,
        );
    });
}
