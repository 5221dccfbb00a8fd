//! The bounds every tool call respects: how long it may take and how many bytes it may
//! answer, plus the bounds on the counts and sizes of its arguments.
//!
//! Must not do I/O; it only holds numbers.

use std::time::Duration;

/// Bytes of one answer when `--max-output` is not given (256 KiB).
pub const DEFAULT_MAX_OUTPUT: u64 = 256 * 1024;
/// The most bytes read from a child's stdout before it is stopped (what is cut to
/// `max_output` afterwards is parsed whole first).
pub const MAX_CHILD_STDOUT: usize = 32 * 1024 * 1024;
/// The most bytes of a child's stderr kept for an error message.
pub const MAX_CHILD_STDERR: usize = 16 * 1024;
/// The largest inline spec text accepted (the spec loader's own bound).
pub const MAX_INLINE_SPEC: usize = saap_dispatch::load::MAX_SPEC_BYTES;
/// The most distinct states `explore` may be asked for.
pub const MAX_EXPLORE_STATES: u64 = 5_000_000;
/// The longest path `explore` may be asked to follow.
pub const MAX_EXPLORE_DEPTH: u64 = 100_000;
/// The most completions `simulate`/`explain` may be asked for.
pub const MAX_COMPLETIONS: u64 = 1_000_000;
/// The most steps `explain` may name.
pub const MAX_STEPS: usize = 100;
/// Messages per page of `stream_view`/`run_timeline` (the inspect library's own bound).
pub const MAX_PAGE: u64 = saap_inspect::query::MAX_PAGE as u64;

/// The most spec tools (child processes) running at once; more calls wait (within their
/// time bound).
pub const MAX_CHILDREN: usize = 2;

/// Time and output bounds of one call.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest one call may take.
    pub call: Duration,
    /// The most bytes of one answer.
    pub max_output: usize,
}
