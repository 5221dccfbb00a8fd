//! [`ChatStream`]: a streamed answer, delta by delta, bounded in time and size.
//!
//! Each [`ChatStream::next`] waits for the next piece under three clocks — the idle gap between
//! two reads, the whole stream's duration, and the caller's cancellation — and decodes what
//! arrived: SSE framing ([`crate::sse`]), one JSON chunk per `data:` line ([`crate::chunk`]),
//! joined into the answer ([`crate::accumulate`]). The stream ends well at `[DONE]`, or at the
//! end of the body once a finish reason was seen (servers that omit `[DONE]`); anything else is
//! an error saying what arrived. After an error or the end, `next` returns `Ok(None)`.
//! Dropping the stream closes the connection. This module must not retry: deltas already
//! handed out cannot be taken back.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::accumulate::{Accumulator, StreamEvent};
use crate::chunk::WireChunk;
use crate::config::LlmConfig;
use crate::error::{LlmError, chain};
use crate::response::Completion;
use crate::sse::{SseDecoder, SseEvent};

/// A streamed answer. Get its pieces with [`ChatStream::next`], or all of it with
/// [`ChatStream::collect`].
pub struct ChatStream {
    response: Option<reqwest::Response>,
    decoder: SseDecoder,
    acc: Option<Accumulator>,
    pending: VecDeque<StreamEvent>,
    cancel: CancellationToken,
    idle_timeout: Duration,
    stream_timeout: Duration,
    deadline: Instant,
    /// The first bytes of the body, for the message when it is not an event stream.
    head: Vec<u8>,
    saw_event: bool,
    /// The start of the last event's data, for the message when the stream is truncated.
    last_event: String,
    ended: bool,
    max_excerpt: usize,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream")
            .field("received_bytes", &self.decoder.received())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl ChatStream {
    pub(crate) fn new(
        response: reqwest::Response,
        cancel: CancellationToken,
        config: &LlmConfig,
    ) -> ChatStream {
        let limits = &config.limits;
        ChatStream {
            response: Some(response),
            decoder: SseDecoder::new(
                limits.max_line_bytes,
                limits.max_response_bytes,
                limits.max_error_excerpt,
            ),
            acc: Some(Accumulator::new(
                limits.max_tool_calls,
                limits.max_error_excerpt,
            )),
            pending: VecDeque::new(),
            cancel,
            idle_timeout: config.idle_timeout,
            stream_timeout: config.stream_timeout,
            deadline: Instant::now() + config.stream_timeout,
            head: Vec::new(),
            saw_event: false,
            last_event: String::new(),
            ended: false,
            max_excerpt: limits.max_error_excerpt,
        }
    }

    /// The next piece of the answer; the last one is [`StreamEvent::Finished`], after which
    /// this returns `Ok(None)`.
    pub async fn next(&mut self) -> Result<Option<StreamEvent>, LlmError> {
        match self.next_inner().await {
            Ok(event) => Ok(event),
            Err(error) => {
                self.end();
                tracing::debug!(code = error.code(), "model stream failed");
                Err(error)
            }
        }
    }

    /// Reads the whole answer, calling `on_text` with each piece of text as it arrives.
    pub async fn collect(mut self, mut on_text: impl FnMut(&str)) -> Result<Completion, LlmError> {
        while let Some(event) = self.next().await? {
            match event {
                StreamEvent::Text(text) => on_text(&text),
                StreamEvent::ToolCall { .. } => {}
                StreamEvent::Finished(done) => return Ok(*done),
            }
        }
        Err(self.truncated())
    }

    fn truncated(&self) -> LlmError {
        LlmError::Truncated {
            received_bytes: self.decoder.received(),
            last_event: if self.last_event.is_empty() {
                "(none)".to_owned()
            } else {
                crate::error::excerpt(self.last_event.as_bytes(), self.max_excerpt)
            },
        }
    }

    fn end(&mut self) {
        self.ended = true;
        self.response = None; // closes the connection
        self.pending.clear();
    }

    async fn next_inner(&mut self) -> Result<Option<StreamEvent>, LlmError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            if let Some(event) = self.decoder.next_event()? {
                self.handle(event)?;
                continue;
            }
            let Some(response) = self.response.as_mut() else {
                return Ok(None);
            };
            let read = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(LlmError::Cancelled),
                _ = tokio::time::sleep_until(self.deadline) => {
                    return Err(LlmError::StreamTimeout { after: self.stream_timeout })
                }
                read = tokio::time::timeout(self.idle_timeout, response.chunk()) => read,
            };
            match read {
                Err(_) => {
                    return Err(LlmError::IdleTimeout {
                        after: self.idle_timeout,
                    });
                }
                Ok(Err(e)) => return Err(LlmError::Transport { reason: chain(e) }),
                Ok(Ok(Some(bytes))) => {
                    if self.head.len() < self.max_excerpt {
                        let take = bytes.len().min(self.max_excerpt - self.head.len());
                        self.head.extend_from_slice(&bytes[..take]);
                    }
                    self.decoder.push(&bytes)?;
                }
                Ok(Ok(None)) => {
                    self.response = None;
                    while !self.ended {
                        match self.decoder.finish()? {
                            Some(event) => self.handle(event)?,
                            None => break,
                        }
                    }
                    if !self.ended {
                        self.end_of_body()?;
                    }
                }
            }
        }
    }

    /// One SSE event: `[DONE]`, an error event, or a JSON chunk.
    fn handle(&mut self, event: SseEvent) -> Result<(), LlmError> {
        self.saw_event = true;
        let data = event.data.trim();
        // Kept raw (the buffer is reused: no allocation per chunk), escaped only if needed.
        let mut end = data.len().min(self.max_excerpt + 1);
        while !data.is_char_boundary(end) {
            end -= 1;
        }
        self.last_event.clear();
        self.last_event.push_str(&data[..end]);
        if event.event.as_deref() == Some("error") {
            let mut message = match serde_json::from_str::<serde_json::Value>(data) {
                Ok(value) => crate::chunk::error_message(value.get("error").unwrap_or(&value)),
                Err(_) => data.to_owned(),
            };
            crate::accumulate::truncate_chars(&mut message, self.max_excerpt);
            return Err(LlmError::ServerError { message });
        }
        if data == "[DONE]" {
            self.finish();
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: WireChunk = serde_json::from_str(data).map_err(|e| {
            LlmError::malformed(
                format!("a stream chunk is not JSON ({e})"),
                data.as_bytes(),
                self.max_excerpt,
            )
        })?;
        match self.acc.as_mut() {
            Some(acc) => acc.apply(chunk, &mut self.pending),
            None => Ok(()),
        }
    }

    /// The body ended without `[DONE]`.
    fn end_of_body(&mut self) -> Result<(), LlmError> {
        let finished = self.acc.as_ref().is_some_and(Accumulator::has_finished);
        if finished {
            self.finish();
            return Ok(());
        }
        if !self.saw_event && !self.head.is_empty() {
            return Err(LlmError::malformed(
                "the answer is not a server-sent event stream",
                &self.head,
                self.max_excerpt,
            ));
        }
        Err(self.truncated())
    }

    fn finish(&mut self) {
        if let Some(acc) = self.acc.take() {
            self.pending
                .push_back(StreamEvent::Finished(Box::new(acc.finish())));
        }
        self.ended = true;
        self.response = None;
    }
}
