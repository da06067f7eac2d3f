//! A log's chunks of text cut into server-sent events, one per line.
//!
//! A node sends its log in chunks that need not end at a line's end, so the
//! start of a line waits for the rest of it. Each line becomes one
//! `data:` event: bytes that are not UTF-8 are replaced, a carriage return
//! (which ends an event's field) is dropped at a line's end and replaced
//! inside one, and a line longer than [`MAX_LINE`] bytes is cut there and
//! sent in parts, so one endless line never holds memory.

use bytes::Bytes;

/// The longest line sent as one event, in bytes.
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// The lines of a log as they arrive.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    /// The start of a line whose end has not come yet.
    partial: Vec<u8>,
    /// How many lines were sent.
    pub(crate) sent: u64,
}

impl Lines {
    /// The events of the lines `chunk` ends; `None` when it ends none.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Option<Bytes> {
        let mut out = Vec::new();
        for &byte in chunk {
            if byte == b'\n' {
                self.flush(&mut out);
            } else {
                self.partial.push(byte);
                if self.partial.len() >= MAX_LINE {
                    self.flush(&mut out);
                }
            }
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    /// The event of a last line the log did not end, when there is one.
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        if self.partial.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        self.flush(&mut out);
        Some(Bytes::from(out))
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        if self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        let line = String::from_utf8_lossy(&self.partial).replace('\r', " ");
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\n\n");
        self.partial.clear();
        self.sent += 1;
    }
}

/// A named event with one line of text, such as why the log ended.
pub(crate) fn event(name: &str, text: &str) -> Bytes {
    let text = text.replace(['\r', '\n'], " ");
    Bytes::from(format!("event: {name}\ndata: {text}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Option<Bytes>) -> String {
        bytes.map(|bytes| String::from_utf8(bytes.to_vec()).unwrap()).unwrap_or_default()
    }

    #[test]
    fn lines_across_chunks_become_one_event_each() {
        let mut lines = Lines::default();
        assert_eq!(text(lines.push(b"first\nsec")), "data: first\n\n");
        assert_eq!(text(lines.push(b"ond\r\nthird\n")), "data: second\n\ndata: third\n\n");
        assert_eq!(lines.push(b"no end"), None);
        assert_eq!(text(lines.finish()), "data: no end\n\n");
        assert_eq!(lines.finish(), None);
        assert_eq!(lines.sent, 4);
    }

    #[test]
    fn nothing_in_a_line_can_end_its_event() {
        let mut lines = Lines::default();
        let sent = text(lines.push(b"a\rdata: forged\xff\n"));
        assert_eq!(sent, "data: a data: forged\u{fffd}\n\n");
        assert_eq!(text(Some(event("end", "one\ntwo\r"))), "event: end\ndata: one two \n\n");
    }

    #[test]
    fn a_long_line_is_cut() {
        let mut lines = Lines::default();
        let long = vec![b'x'; MAX_LINE + 10];
        let sent = text(lines.push(&long));
        assert_eq!(sent.len(), "data: \n\n".len() + MAX_LINE);
        assert_eq!(text(lines.finish()), format!("data: {}\n\n", "x".repeat(10)));
    }
}
