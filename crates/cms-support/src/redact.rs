//! [`Redactor`]: text as it streams in, line by line, with anything that
//! looks like a key or a certificate replaced by [`REDACTED`]: every PEM
//! block (over several lines, or on one line as a JSON string holds it),
//! the lines inside one whose end has not come yet, and every base64 run
//! that holds the base64 of `-----BEGIN` (a PEM block encoded once more,
//! as kubeconfigs and machine configs carry them), and every known secret
//! value it is given (the tenant's tokens and keys, and each line of its
//! PEM blocks). Lines longer than [`MAX_LINE`] are cut, after the known
//! values are found in them: a value that straddles the cut goes whole.

/// What stands where something was redacted.
pub const REDACTED: &str = "[REDACTED]";

/// The longest line kept, in bytes; the rest of a longer line is dropped.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// The base64 text of `-----BEGIN` at each of the three alignments: what
/// stays the same whatever bytes come before and after it.
const PEM_BASE64_MARKERS: [&str; 3] = ["LS0tLS1CRUdJ", "LS0tQkVHSU", "LS0tLUJFR0lO"];

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";

/// Redacts a stream of text, one line at a time.
#[derive(Debug, Default)]
pub(crate) struct Redactor {
    /// Values replaced wherever they appear.
    known: Known,
    /// The start of a line whose end has not come yet.
    partial: Vec<u8>,
    /// Inside a PEM block whose end has not come yet.
    in_block: bool,
}

/// Secret values to replace wherever they appear, longest first.
#[derive(Clone, Default)]
pub(crate) struct Known(std::sync::Arc<Vec<String>>);

impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Known({} values)", self.0.len())
    }
}

impl Known {
    /// `values` and each line of the PEM blocks among them; values shorter
    /// than 8 characters are too common to replace.
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Known {
        let mut all = Vec::new();
        for value in values {
            for line in value.lines().map(str::trim).filter(|line| !line.starts_with("-----")) {
                all.push(line.to_string());
            }
            all.push(value.trim().to_string());
        }
        all.retain(|value| value.len() >= 8);
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Known(std::sync::Arc::new(all))
    }

    /// The length of the longest value.
    fn longest(&self) -> usize {
        self.0.first().map_or(0, String::len)
    }

    /// `line[..cut]` with each value that starts before `cut` replaced,
    /// the part of it past `cut` too: nothing of a value that straddles
    /// the cut is left.
    fn scrub_cut(&self, line: &str, cut: usize) -> String {
        let mut marks: Vec<(usize, usize)> = Vec::new();
        for value in self.0.iter() {
            for (at, _) in line.match_indices(value.as_str()) {
                let end = at + value.len();
                if at < cut && !marks.iter().any(|(start, stop)| at < *stop && *start < end) {
                    marks.push((at, end));
                }
            }
        }
        marks.sort_unstable();
        let mut out = String::with_capacity(cut);
        let mut at = 0;
        for (start, end) in marks {
            out.push_str(&line[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        if at < cut {
            out.push_str(&line[at..cut]);
        }
        out
    }

    fn scrub(&self, line: String) -> String {
        let mut line = line;
        for value in self.0.iter() {
            if line.contains(value.as_str()) {
                line = line.replace(value.as_str(), REDACTED);
            }
        }
        line
    }
}

impl Redactor {
    /// A redactor that also replaces the `known` values.
    pub(crate) fn with_known(known: Known) -> Redactor {
        Redactor { known, ..Redactor::default() }
    }

    /// The redacted text of the whole lines `chunk` ends; the start of a
    /// line it leaves open waits for the next chunk.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|byte| *byte == b'\n') {
            self.append(&rest[..newline]);
            let line = std::mem::take(&mut self.partial);
            out.extend_from_slice(self.line(&String::from_utf8_lossy(&line)).as_bytes());
            out.push(b'\n');
            rest = &rest[newline + 1..];
        }
        self.append(rest);
        out
    }

    /// The redacted text of the last line, if it had no newline.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        if self.partial.is_empty() {
            return Vec::new();
        }
        let line = std::mem::take(&mut self.partial);
        self.line(&String::from_utf8_lossy(&line)).into_bytes()
    }

    /// Up to [`MAX_LINE`] bytes of a line, and past them as many as a
    /// known value or a block's start could still span.
    fn append(&mut self, bytes: &[u8]) {
        let kept = MAX_LINE + self.known.longest().max(BEGIN.len());
        let room = kept.saturating_sub(self.partial.len());
        self.partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// One line, redacted: first of the known values, then of PEM blocks.
    /// A line longer than [`MAX_LINE`] is cut there once its known values
    /// are replaced; a block that starts across the cut is open after it.
    fn line(&mut self, line: &str) -> String {
        if line.len() <= MAX_LINE {
            let line = self.known.scrub(line.to_string());
            return self.blocks(&line);
        }
        let mut cut = MAX_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let near = cut.saturating_sub(BEGIN.len() - 1);
        let begin = BEGIN.as_bytes();
        let opened = line.as_bytes()[near..]
            .windows(begin.len())
            .position(|window| window == begin)
            .map(|at| near + at)
            .filter(|at| *at < cut);
        if let Some(at) = opened {
            cut = at;
        }
        let scrubbed = self.known.scrub_cut(line, cut);
        let mut out = self.blocks(&scrubbed);
        if opened.is_some() && !self.in_block {
            out.push_str(REDACTED);
            self.in_block = true;
        }
        out
    }

    /// Inside a block, nothing of a line but what follows the block's end.
    fn blocks(&mut self, line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        loop {
            if self.in_block {
                match block_end(rest) {
                    Some(after) => {
                        self.in_block = false;
                        if out.is_empty() {
                            out.push_str(REDACTED);
                        }
                        rest = &rest[after..];
                    }
                    None => {
                        if out.is_empty() {
                            out.push_str(REDACTED);
                        }
                        return out;
                    }
                }
                continue;
            }
            match rest.find(BEGIN) {
                Some(start) => {
                    out.push_str(&scrub_base64(&rest[..start]));
                    out.push_str(REDACTED);
                    self.in_block = true;
                    rest = &rest[start + BEGIN.len()..];
                }
                None => {
                    out.push_str(&scrub_base64(rest));
                    return out;
                }
            }
        }
    }
}

/// Where the text after a block's `-----END ...-----` starts in `text`.
fn block_end(text: &str) -> Option<usize> {
    let end = text.find(END)?;
    let after = end + END.len();
    match text[after..].find("-----") {
        Some(close) => Some(after + close + "-----".len()),
        None => Some(text.len()),
    }
}

/// `text` with each base64 run that holds a [`PEM_BASE64_MARKERS`] replaced.
fn scrub_base64(text: &str) -> String {
    if !PEM_BASE64_MARKERS.iter().any(|marker| text.contains(marker)) {
        return text.to_string();
    }
    let is_base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if PEM_BASE64_MARKERS.iter().any(|marker| run.contains(marker)) {
            out.push_str(REDACTED);
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if is_base64(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `text` redacted whole, as [`Redactor`] would stream it.
pub(crate) fn redact(text: &str, known: &Known) -> String {
    let mut redactor = Redactor::with_known(known.clone());
    let mut out = redactor.push(text.as_bytes());
    out.extend(redactor.finish());
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oEPRcgpW+8KJ\n-----END EC PRIVATE KEY-----";

    #[test]
    fn blocks_go_across_chunks_and_lines() {
        let text = format!("before\n{KEY}\nafter\n");
        let mut redactor = Redactor::default();
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(7) {
            out.extend(redactor.push(chunk));
        }
        out.extend(redactor.finish());
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "before\n[REDACTED]\n[REDACTED]\n[REDACTED]\nafter\n");
    }

    #[test]
    fn blocks_on_one_line_and_their_base64_go_too() {
        let json = serde_json::to_string(&serde_json::json!({"key": KEY, "n": 1})).unwrap();
        let out = redact(&json, &Known::default());
        assert_eq!(out, r#"{"key":"[REDACTED]","n":1}"#);
        let encoded = "Y2VydDogTFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2s=";
        let base64 = "ca: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lRCg== ok";
        assert_eq!(redact(base64, &Known::default()), "ca: [REDACTED] ok");
        assert_eq!(redact(encoded, &Known::default()), encoded, "no marker, nothing to redact");
        assert_eq!(redact("plain text, no keys", &Known::default()), "plain text, no keys");
    }

    #[test]
    fn known_values_go_wherever_they_are() {
        let known = Known::new(["abcdef.0123456789abcdef".to_string(), "short".to_string(), KEY.to_string()]);
        let text = "token abcdef.0123456789abcdef, and short; key line MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oEPRcgpW+8KJ\n";
        assert_eq!(redact(text, &known), "token [REDACTED], and short; key line [REDACTED]\n");
    }

    #[test]
    fn a_known_value_across_the_cut_goes_whole() {
        let secret = "s3cret-token-0123456789abcdef";
        let known = Known::new([secret.to_string()]);
        for before in [MAX_LINE - 5, MAX_LINE - 1, MAX_LINE - secret.len(), MAX_LINE + 1] {
            let text = format!("{}{secret} tail\nnext\n", "x".repeat(before));
            let mut redactor = Redactor::with_known(known.clone());
            let mut out = Vec::new();
            for chunk in text.as_bytes().chunks(4096) {
                out.extend(redactor.push(chunk));
            }
            let out = String::from_utf8(out).unwrap();
            let (line, rest) = out.split_once('\n').unwrap();
            assert_eq!(rest, "next\n");
            assert!(!line.contains("s3cret"), "nothing of the value is left at {before}");
            let expected = match before < MAX_LINE {
                true => format!("{}{REDACTED}", "x".repeat(before)),
                false => "x".repeat(MAX_LINE),
            };
            assert!(line.starts_with(&expected), "at {before}");
            assert!(line.len() <= MAX_LINE + REDACTED.len(), "at {before}");
        }
        // A block whose start straddles the cut opens there.
        let text = format!("{}{KEY}\nafter\n", "y".repeat(MAX_LINE - 4));
        let out = redact(&text, &Known::default());
        assert_eq!(out, format!("{}{REDACTED}\n{REDACTED}\n{REDACTED}\nafter\n", "y".repeat(MAX_LINE - 4)));
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(MAX_LINE * 2);
        let mut redactor = Redactor::default();
        let out = redactor.push(format!("{long}\nnext\n").as_bytes());
        assert_eq!(out.len(), MAX_LINE + "\nnext\n".len());
    }
}
