//! A bounded decoder of server-sent events (the `text/event-stream` framing).
//!
//! Bytes go in as they arrive ([`SseDecoder::push`]); whole events come out
//! ([`SseDecoder::next_event`]). It follows the WHATWG framing: lines end in LF, CRLF or CR
//! (also when the pair is split between two reads), `:` starts a comment, `data` lines of one
//! event are joined with newlines, a blank line ends the event. `id` and `retry` are ignored
//! (the client never reconnects a completion). Unlike a general-purpose parser it bounds what
//! it holds: a line longer than `max_line_bytes` and a stream longer than `max_total_bytes` are
//! errors, and consumed bytes are dropped at each push, so memory is one partial line plus one
//! event. This module must not know what the events mean.

use crate::error::LlmError;

/// One dispatched event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if one was given (`None` means `message`).
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    pos: usize,
    /// Bytes from `pos` already known to hold no line end.
    scanned: usize,
    skip_lf: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    total: usize,
    max_line_bytes: usize,
    max_total_bytes: usize,
    excerpt: usize,
}

impl SseDecoder {
    pub(crate) fn new(max_line_bytes: usize, max_total_bytes: usize, excerpt: usize) -> SseDecoder {
        SseDecoder {
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            skip_lf: false,
            data: String::new(),
            has_data: false,
            event: None,
            total: 0,
            max_line_bytes,
            max_total_bytes,
            excerpt,
        }
    }

    /// Bytes received so far.
    pub(crate) fn received(&self) -> usize {
        self.total
    }

    /// Appends newly received bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), LlmError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > self.max_total_bytes {
            return Err(LlmError::TooLarge {
                limit: self.max_total_bytes,
            });
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next complete event, if the bytes so far hold one.
    pub(crate) fn next_event(&mut self) -> Result<Option<SseEvent>, LlmError> {
        while let Some(line_end) = self.find_line_end()? {
            let (start, end) = (self.pos, line_end);
            let terminator = self.buf[end];
            self.pos = end + 1;
            self.scanned = 0;
            self.skip_lf = terminator == b'\r';
            if let Some(event) = self.process_line(start, end)? {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// At the end of the stream: the last event if it lacked its closing blank line (lenient),
    /// with a last line that lacked its line end.
    pub(crate) fn finish(&mut self) -> Result<Option<SseEvent>, LlmError> {
        if self.pos < self.buf.len() {
            let (start, end) = (self.pos, self.buf.len());
            self.pos = end;
            if let Some(event) = self.process_line(start, end)? {
                return Ok(Some(event));
            }
        }
        Ok(self.dispatch())
    }

    fn find_line_end(&mut self) -> Result<Option<usize>, LlmError> {
        if self.skip_lf && self.pos < self.buf.len() {
            if self.buf[self.pos] == b'\n' {
                self.pos += 1;
            }
            self.skip_lf = false;
        }
        let from = self.pos + self.scanned;
        match self.buf[from..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            Some(offset) => {
                if from + offset - self.pos > self.max_line_bytes {
                    return Err(LlmError::LineTooLong {
                        limit: self.max_line_bytes,
                    });
                }
                Ok(Some(from + offset))
            }
            None => {
                self.scanned = self.buf.len() - self.pos;
                if self.scanned > self.max_line_bytes {
                    return Err(LlmError::LineTooLong {
                        limit: self.max_line_bytes,
                    });
                }
                Ok(None)
            }
        }
    }

    fn process_line(&mut self, start: usize, end: usize) -> Result<Option<SseEvent>, LlmError> {
        let line = &self.buf[start..end];
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                let text = std::str::from_utf8(value).map_err(|_| {
                    LlmError::malformed("a data line is not UTF-8", line, self.excerpt)
                })?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(text);
                self.has_data = true;
            }
            b"event" => {
                self.event = Some(String::from_utf8_lossy(value).into_owned());
            }
            _ => {} // id, retry and unknown fields are ignored, as the framing says
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(input: &[u8], piece: usize) -> Result<Vec<SseEvent>, LlmError> {
        let mut d = SseDecoder::new(64, 1 << 20, 50);
        let mut events = Vec::new();
        for part in input.chunks(piece) {
            d.push(part)?;
            while let Some(e) = d.next_event()? {
                events.push(e);
            }
        }
        while let Some(e) = d.finish()? {
            events.push(e);
        }
        Ok(events)
    }

    #[test]
    fn framing_in_every_split() {
        let input =
            b": keep-alive\r\ndata: a\r\n\r\nevent: error\ndata: b1\ndata:b2\n\ndata: c\r\rdata: d";
        for piece in 1..input.len() {
            let events = decode_in_pieces(input, piece).expect("decodes");
            assert_eq!(
                events,
                vec![
                    SseEvent {
                        event: None,
                        data: "a".into()
                    },
                    SseEvent {
                        event: Some("error".into()),
                        data: "b1\nb2".into()
                    },
                    SseEvent {
                        event: None,
                        data: "c".into()
                    },
                    SseEvent {
                        event: None,
                        data: "d".into()
                    },
                ],
                "split into pieces of {piece}"
            );
        }
    }

    #[test]
    fn long_line_is_refused_before_it_grows() {
        let err = decode_in_pieces(&[b'x'; 200], 10).expect_err("too long");
        assert_eq!(err.code(), "LLM_LINE_TOO_LONG");
    }

    #[test]
    fn total_is_bounded() {
        let mut d = SseDecoder::new(64, 10, 50);
        assert_eq!(
            d.push(&[b'\n'; 11]).expect_err("too much").code(),
            "LLM_TOO_LARGE"
        );
    }

    proptest::proptest! {
        /// Any bytes, cut anywhere: no panic, and the same events (or the same error) as
        /// when they arrive in one piece.
        #[test]
        fn splits_do_not_change_the_result(
            input in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(b'\n'),
                    proptest::strategy::Just(b'\r'),
                    proptest::strategy::Just(b':'),
                    proptest::strategy::Just(b' '),
                    proptest::num::u8::ANY,
                    proptest::strategy::Just(b'd'),
                ],
                0..300,
            ),
            piece in 1usize..40,
        ) {
            let whole = decode_in_pieces(&input, input.len().max(1));
            let pieces = decode_in_pieces(&input, piece);
            proptest::prop_assert_eq!(whole.map_err(|e| e.code()), pieces.map_err(|e| e.code()));
        }

        /// Well-formed events survive any split.
        #[test]
        fn data_round_trips(datas in proptest::collection::vec("[a-zA-Z0-9 {}\":,é]{0,30}", 1..8), piece in 1usize..20) {
            let text: String = datas.iter().map(|d| format!("data: {d}\r\n\r\n")).collect();
            let events = decode_in_pieces(text.as_bytes(), piece).expect("well-formed");
            let got: Vec<String> = events.into_iter().map(|e| e.data).collect();
            proptest::prop_assert_eq!(got, datas);
        }
    }

    #[test]
    fn invalid_utf8_is_malformed() {
        let err = decode_in_pieces(b"data: \xff\xfe\n\n", 100).expect_err("not utf-8");
        assert_eq!(err.code(), "LLM_MALFORMED");
    }
}
