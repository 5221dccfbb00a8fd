//! Splitting an ingest body into records: lines, records that a raw newline split, the
//! fast path that writes a line's stored form without re-encoding it (prepared in parallel
//! for large bodies). Must not touch a session's files.

use super::files::{memchr, memrchr, read_full_at};

use std::fs::File;
use std::io;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::{self, Malformed};

/// Bytes read from the append path per step.
pub(super) const DRAIN_CHUNK: usize = 4 * 1024 * 1024;

pub(super) enum Record<'a> {
    /// Accepted by the fast path and rendered except for its position-dependent prefix
    /// (id, sequence and receipt time).
    Fast {
        /// `{"id":"<random uuid>","sequence":`
        head: &'a [u8],
        hypothesis_id: &'a str,
        /// Everything after `"receivedAt":N,` up to and including the newline.
        tail: &'a [u8],
        timestamp: u64,
    },
    /// Takes the full validator (the raw line travels alongside).
    Raw,
    Parsed(Value),
}

/// Tracks the JSON nesting of a record that a raw newline split, across the lines that
/// follow it, so the rest of that record is never accepted as a record of its own (a raw
/// newline inside serialized `data` must not forge an event). Only started by a line that
/// is a valid JSON prefix (it failed to parse because it ended early), and given up after
/// [`event::MAX_LINE_BYTES`]: a longer record could not have been valid anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SplitTracker {
    pub(super) depth: u32,
    pub(super) in_string: bool,
    pub(super) escaped: bool,
    pub(super) bytes: u64,
}

impl SplitTracker {
    /// The state after `line` if it is an object cut short by the end of the line.
    pub(super) fn start(line: &[u8]) -> Option<Self> {
        let trimmed = line.trim_ascii_start();
        if !trimmed.starts_with(b"{") {
            return None;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(trimmed) {
            Err(e) if e.classify() == serde_json::error::Category::Eof => Self {
                depth: 0,
                in_string: false,
                escaped: false,
                bytes: 0,
            }
            .feed(trimmed),
            _ => None,
        }
    }

    /// Feeds the next line (the newline that ended the previous one sits inside the split
    /// record); `None` once the split record is closed or too long to be a record.
    pub(super) fn feed(mut self, line: &[u8]) -> Option<Self> {
        // The newline between the lines: inside a string it was a raw control character.
        self.escaped = false;
        for &b in line {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        self.bytes += line.len() as u64 + 1;
        let open = self.depth > 0 || self.in_string;
        (open && self.bytes <= event::MAX_LINE_BYTES as u64).then_some(self)
    }
}

/// The diagnostic of a line that continues a record split by a raw newline.
pub(super) fn split_tail(raw: &[u8]) -> Malformed {
    let reason = event::Reason::SplitRecord;
    Malformed {
        reason,
        message: "this line continues the previous record, which a raw newline cut in two; it is not accepted as a record of its own".into(),
        recoverable_fields: Map::new(),
        preview: event::preview(raw),
        suggested_fix: reason.suggested_fix().to_owned(),
    }
}

/// Splits a body into lines, dropping blank ones.
pub(super) fn split_lines(body: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::with_capacity(body.len() / 128 + 1);
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len())) {
        let l = &body[start..nl];
        start = nl + 1;
        if !l.iter().all(u8::is_ascii_whitespace) {
            lines.push(l);
        }
    }
    lines
}

/// Appends the decimal digits of `v`.
pub(super) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Length of `{"id":"<uuid>","sequence":`.
pub(super) const HEAD_LEN: usize = "{\"id\":\"".len() + 36 + "\",\"sequence\":".len();

/// The fast-path results of a run of consecutive lines: for each accepted line its head
/// (with a fresh random id) and its tail, concatenated.
pub(super) struct PreparedChunk {
    pub(super) tails: Vec<u8>,
    /// Per line: `None` (take the full path) or the byte length of its hypothesis id, the
    /// end of its tail and its timestamp. The id is read back from the tail, so a chunk owns
    /// its data and can be handed from the reader thread to the appending one.
    pub(super) items: Vec<Option<(usize, usize, u64)>>,
}

/// Offset of the hypothesis id within one rendered fast-path record.
pub(super) const HYP_AT: usize = HEAD_LEN + "\"hypothesisId\":\"".len();

impl PreparedChunk {
    pub(super) fn new(lines: &[&[u8]]) -> Self {
        let mut tails = Vec::with_capacity(lines.iter().map(|l| l.len() + HEAD_LEN + 2).sum());
        let mut items = Vec::with_capacity(lines.len());
        let mut data = Vec::new();
        let mut scratch = event::FastScratch::default();
        for line in lines {
            items.push(event::fast_scan(line, &mut data, &mut scratch).map(|e| {
                tails.extend_from_slice(b"{\"id\":\"");
                tails.extend_from_slice(
                    uuid::Uuid::new_v4()
                        .hyphenated()
                        .encode_lower(&mut uuid::Uuid::encode_buffer())
                        .as_bytes(),
                );
                tails.extend_from_slice(b"\",\"sequence\":");
                tails.extend_from_slice(b"\"hypothesisId\":\"");
                tails.extend_from_slice(e.hypothesis_id.as_bytes());
                tails.extend_from_slice(b"\",\"location\":\"");
                tails.extend_from_slice(e.location);
                tails.extend_from_slice(b"\",\"message\":\"");
                tails.extend_from_slice(e.message);
                tails.extend_from_slice(b"\",\"data\":");
                tails.extend_from_slice(&data);
                tails.extend_from_slice(b",\"timestamp\":");
                tails.extend_from_slice(e.timestamp_text);
                tails.extend_from_slice(b"}\n");
                (e.hypothesis_id.len(), tails.len(), e.timestamp)
            }));
        }
        Self { tails, items }
    }

    /// One entry per line, in order.
    pub(super) fn records(&self) -> impl Iterator<Item = Option<Record<'_>>> + '_ {
        let mut start = 0;
        self.items.iter().map(move |it| {
            it.map(|(hyp_len, end, timestamp)| {
                let head = &self.tails[start..start + HEAD_LEN];
                // Copied from a `&str` in `new`, so always valid UTF-8.
                let hypothesis_id =
                    std::str::from_utf8(&self.tails[start + HYP_AT..start + HYP_AT + hyp_len])
                        .unwrap_or_default();
                let tail = &self.tails[start + HEAD_LEN..end];
                start = end;
                Record::Fast {
                    head,
                    hypothesis_id,
                    tail,
                    timestamp,
                }
            })
        })
    }
}

/// Lines per batch below which validation stays on the calling thread.
pub(super) const PARALLEL_MIN_LINES: usize = 4096;

/// Runs the fast path over all lines, on several threads for large batches (a file drain
/// step holds ~20k lines). Chunks are returned in line order.
pub(super) fn prepare_all(lines: &[&[u8]]) -> Vec<PreparedChunk> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads <= 1 || lines.len() < PARALLEL_MIN_LINES {
        return vec![PreparedChunk::new(lines)];
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|c| (c.len(), s.spawn(move || PreparedChunk::new(c))))
            .collect();
        handles
            .into_iter()
            .map(|(len, h)| {
                // A worker that panicked sends its lines down the full path instead.
                h.join().unwrap_or_else(|_| PreparedChunk {
                    tails: Vec::new(),
                    items: vec![None; len],
                })
            })
            .collect()
    })
}

/// How a pipelined drain run ended.
pub(super) enum RunEnd {
    /// End of the file, or an incomplete trailing line that waits for its newline.
    Done,
    /// A step of `n` bytes without any newline that is too long to be a record (or continues
    /// one): its first bytes, for the diagnostic.
    Oversized(Vec<u8>, u64),
}

/// One message from the drain reader thread to the appending thread.
pub(super) enum Step {
    /// `buf[spans[i]]` are complete lines whose fast-path results are `prepared`; `consumed`
    /// bytes of the append path (including a skipped remainder of an oversized line) are
    /// done once they are appended.
    Lines {
        buf: Vec<u8>,
        spans: Vec<std::ops::Range<usize>>,
        consumed: u64,
        prepared: Vec<PreparedChunk>,
    },
    End(RunEnd),
    Failed(io::Error),
}

/// The reader stage of `Session::drain_run`: reads the append path from `pos` up to `len`
/// in steps of at most `DRAIN_CHUNK` bytes, each cut after its last newline, and runs the
/// fast path over each step's lines. Stops when the receiver is gone.
pub(super) fn produce_steps(
    f: &File,
    mut pos: u64,
    len: u64,
    mut skipping: bool,
    tx: &std::sync::mpsc::SyncSender<Step>,
    back: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    let end = loop {
        if pos >= len {
            break RunEnd::Done;
        }
        let mut buf = back.try_recv().unwrap_or_else(|_| vec![0; DRAIN_CHUNK]);
        buf.resize(DRAIN_CHUNK, 0);
        let want = usize::try_from(len - pos)
            .unwrap_or(usize::MAX)
            .min(DRAIN_CHUNK);
        let n = match read_full_at(f, &mut buf[..want], pos) {
            Ok(0) => break RunEnd::Done,
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(Step::Failed(e));
                return;
            }
        };
        let Some(last_nl) = memrchr(b'\n', &buf[..n]) else {
            if n >= event::MAX_LINE_BYTES + 2 || skipping {
                buf.truncate(n);
                break RunEnd::Oversized(buf, n as u64);
            }
            break RunEnd::Done; // incomplete trailing line: wait for its newline
        };
        let mut body = 0..last_nl + 1;
        if skipping {
            // The first line is the rest of an oversized one.
            body.start = memchr(b'\n', &buf[body.clone()]).map_or(body.end, |i| i + 1);
            skipping = false;
        }
        let lines = split_lines(&buf[body]);
        let prepared = prepare_all(&lines);
        let base = buf.as_ptr() as usize;
        let spans = lines
            .iter()
            .map(|l| {
                let start = l.as_ptr() as usize - base;
                start..start + l.len()
            })
            .collect();
        drop(lines);
        let step = Step::Lines {
            buf,
            spans,
            consumed: last_nl as u64 + 1,
            prepared,
        };
        if tx.send(step).is_err() {
            return;
        }
        pos += last_nl as u64 + 1;
    };
    let _ = tx.send(Step::End(end));
}
