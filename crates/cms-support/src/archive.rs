//! [`Archive`]: a zip written as a stream (each entry's sizes in a data
//! descriptor after it, nothing ever sought back to), handed on in pieces
//! through a bounded channel as it is made, so that no more than one
//! piece and the channel's few are ever held. Entries' contents count
//! against a budget; once it is spent, what is left of the content is
//! dropped and the archive says so in `TRUNCATED.txt`.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use chrono::{DateTime, Datelike, Timelike, Utc};
use tokio::sync::mpsc;
use zip::write::{SimpleFileOptions, StreamWriter};
use zip::{CompressionMethod, ZipWriter};

/// The note written once the budget is spent.
pub(crate) const TRUNCATED_NOTE: &str = "TRUNCATED.txt";

/// Where the zip writer writes: a buffer emptied into the channel after
/// each write.
#[derive(Debug, Clone, Default)]
struct Pending(Arc<Mutex<Vec<u8>>>);

impl Pending {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Write for Pending {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The reader went away: building stops.
#[derive(Debug)]
pub(crate) struct Gone;

/// A zip being streamed.
pub(crate) struct Archive {
    zip: ZipWriter<StreamWriter<Pending>>,
    pending: Pending,
    sender: mpsc::Sender<io::Result<Bytes>>,
    options: SimpleFileOptions,
    /// Bytes of content that may still be written.
    remaining: u64,
    /// Whether some content was dropped for the budget.
    truncated: bool,
    entries: usize,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").field("remaining", &self.remaining).field("entries", &self.entries).finish()
    }
}

impl Archive {
    /// An archive whose entries' contents may take `budget` bytes, dated
    /// `now`, sent through `sender`.
    pub(crate) fn new(sender: mpsc::Sender<io::Result<Bytes>>, budget: u64, now: DateTime<Utc>) -> Archive {
        let pending = Pending::default();
        let mut options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .unix_permissions(0o644);
        if let Ok(time) = zip::DateTime::from_date_and_time(
            u16::try_from(now.year()).unwrap_or(1980),
            now.month() as u8,
            now.day() as u8,
            now.hour() as u8,
            now.minute() as u8,
            now.second() as u8,
        ) {
            options = options.last_modified_time(time);
        }
        Archive {
            zip: ZipWriter::new_stream(pending.clone()),
            pending,
            sender,
            options,
            remaining: budget,
            truncated: false,
            entries: 0,
        }
    }

    /// Whether the budget is spent.
    pub(crate) fn full(&self) -> bool {
        self.remaining == 0
    }

    /// Starts the entry `name`.
    pub(crate) async fn start(&mut self, name: &str) -> Result<(), Gone> {
        self.zip.start_file(name, self.options).map_err(|err| self.failed(err.into()))?;
        self.entries += 1;
        self.send().await
    }

    /// Writes content to the current entry, as much of it as the budget
    /// leaves room for.
    pub(crate) async fn write(&mut self, content: &[u8]) -> Result<(), Gone> {
        let room = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        let kept = &content[..content.len().min(room)];
        if kept.len() < content.len() {
            self.truncated = true;
        }
        if kept.is_empty() {
            return Ok(());
        }
        self.remaining -= kept.len() as u64;
        self.zip.write_all(kept).map_err(|err| self.failed(err))?;
        self.send().await
    }

    /// One whole entry.
    pub(crate) async fn file(&mut self, name: &str, content: &[u8]) -> Result<(), Gone> {
        self.start(name).await?;
        self.write(content).await
    }

    /// One whole entry whose content the budget does not bound (a note of
    /// what is missing).
    pub(crate) async fn file_exempt(&mut self, name: &str, content: &[u8]) -> Result<(), Gone> {
        self.start(name).await?;
        self.zip.write_all(content).map_err(|err| self.failed(err))?;
        self.send().await
    }

    /// Writes the note of a spent budget if it was, then the central
    /// directory, and sends the rest. Gives the number of entries.
    pub(crate) async fn finish(mut self, budget: u64) -> Result<usize, Gone> {
        if self.truncated {
            let note = format!(
                "This bundle reached its bound of {budget} bytes of content: the rest of the entry \
                 being written then, and the entries after it, are left out or empty.\n"
            );
            self.file_exempt(TRUNCATED_NOTE, note.as_bytes()).await?;
        }
        let entries = self.entries;
        let Archive { zip, pending, sender, .. } = self;
        if let Err(err) = zip.finish() {
            let _ = sender.send(Err(io::Error::other(err))).await;
            return Err(Gone);
        }
        let rest = pending.take();
        if !rest.is_empty() {
            sender.send(Ok(Bytes::from(rest))).await.map_err(|_| Gone)?;
        }
        Ok(entries)
    }

    /// Sends what the writer wrote since the last send.
    async fn send(&mut self) -> Result<(), Gone> {
        let written = self.pending.take();
        if written.is_empty() {
            return Ok(());
        }
        self.sender.send(Ok(Bytes::from(written))).await.map_err(|_| Gone)
    }

    /// Ends the stream with `err`: the reader sees a failed body, never a
    /// zip that looks whole.
    fn failed(&self, err: io::Error) -> Gone {
        tracing::warn!("writing a support bundle failed: {err}");
        let _ = self.sender.try_send(Err(err));
        Gone
    }
}
