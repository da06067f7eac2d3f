//! `cms backup ...`: a tenant's etcd backups (`docs/backups.md`).
//!
//! The download never holds the snapshot in memory: it streams the body to a
//! hidden temporary file beside the target, hashing it on the way, and
//! renames the file into place only once the whole body arrived and its
//! SHA-256 is the one the server sent in `X-Content-SHA256`. Anything else
//! removes the temporary file, so a failed download leaves no file behind.

use std::fmt;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use cms_model::Backup;
use indicatif::{BinaryBytes, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cli::{BackupArgs, BackupCommand, BackupDownloadArgs, BackupRestoreArgs, Output};
use crate::client::Client;
use crate::failure::usage;
use crate::output::{encode, out, show};

/// The header that carries the snapshot's SHA-256, in hex.
const SHA256_HEADER: &str = "x-content-sha256";

/// How much of the body is read, hashed and written at a time.
const CHUNK: usize = 64 * 1024;

/// `GET /tenants/{name}/backups`.
#[derive(Debug, Deserialize)]
struct BackupList {
    items: Vec<Backup>,
}

/// The answer of a restore.
#[derive(Debug, Serialize, Deserialize)]
struct Restored {
    backup: Backup,
    /// The control plane whose etcd started from the backup.
    machine: String,
}

/// `cms backup ...`.
pub(crate) fn backup(client: &Client, command: &BackupCommand, format: Output) -> Result<()> {
    match command {
        BackupCommand::Create(args) => {
            let backup: Backup = client
                .post_unbounded(&collection(&args.tenant))
                .with_context(|| format!("taking a backup of tenant {}", args.tenant))?;
            show(&[backup], format, true)
        }
        BackupCommand::List(args) => {
            let list: BackupList = client.get(&collection(&args.tenant))?;
            show(&list.items, format, false)
        }
        BackupCommand::Get(args) => {
            let backup: Backup = client.get(&item(args))?;
            show(&[backup], format, true)
        }
        BackupCommand::Download(args) => download(client, args),
        BackupCommand::Restore(args) => restore(client, args, format),
        BackupCommand::Delete(args) => {
            client.delete(&item(args)).with_context(|| format!("deleting backup/{}", args.id))?;
            match format {
                Output::Name => out(&format!("backup/{}\n", args.id)),
                _ => out(&format!("backup/{} deleted\n", args.id)),
            }
        }
    }
}

fn collection(tenant: &str) -> String {
    format!("/api/v1/tenants/{tenant}/backups")
}

fn item(args: &BackupArgs) -> String {
    format!("{}/{}", collection(&args.tenant), args.id)
}

/// `cms backup restore TENANT ID`: asks first, unless `--yes`.
fn restore(client: &Client, args: &BackupRestoreArgs, format: Output) -> Result<()> {
    let BackupArgs { tenant, id } = &args.backup;
    if !args.yes {
        confirm(&format!(
            "Start the etcd of tenant {tenant} from backup {id} on a control plane that waits for its bootstrap? [y/N] "
        ))?;
    }
    let restored: Restored = client
        .post_unbounded(&format!("{}/restore", item(&args.backup)))
        .with_context(|| format!("restoring backup/{id}"))?;
    match format {
        Output::Json | Output::Yaml => out(&encode(&restored, format)?),
        Output::Name => out(&format!("backup/{id}\n")),
        Output::Table => out(&format!(
            "backup/{id} restored: etcd of tenant {tenant} started from it on machine {}\n",
            restored.machine
        )),
    }
}

/// Asks a yes-or-no question on the terminal. Without a terminal there is
/// nobody to ask, and the answer is no: scripts pass `--yes`.
fn confirm(question: &str) -> Result<()> {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return Err(usage("a restore needs confirmation: pass --yes (standard input is not a terminal)"));
    }
    eprint!("{question}");
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer).context("reading the answer")?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(anyhow!("cancelled; nothing was restored")),
    }
}

/// `cms backup download TENANT ID [-f FILE|-]`.
fn download(client: &Client, args: &BackupDownloadArgs) -> Result<()> {
    let BackupArgs { tenant, id } = &args.backup;
    let response = client.open(&format!("{}/download", item(&args.backup)))?;
    let expected = response
        .headers()
        .get(SHA256_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| {
            anyhow!("the server sent no X-Content-SHA256 header, so the snapshot cannot be verified")
        })?;
    // The body is streamed without a length; the record has the size.
    let total = response.content_length().or_else(|| {
        progress_shown(args.progress)
            .then(|| client.get::<Backup>(&item(&args.backup)).ok().map(|b| b.size))?
    });
    let progress = progress_bar(total, args.progress);
    let context = || format!("downloading backup/{id}");
    if args.file.as_deref() == Some(Path::new("-")) {
        let result = copy_verified(response, io::stdout().lock(), &expected, &progress);
        progress.finish_and_clear();
        result.map_err(anyhow::Error::new).with_context(context)?;
        return Ok(());
    }
    let target = args.file.clone().unwrap_or_else(|| PathBuf::from(format!("{tenant}-{id}.db")));
    let result = save_verified(response, &target, &expected, &progress);
    progress.finish_and_clear();
    let size = result.with_context(context)?;
    out(&format!("wrote {} ({}, SHA-256 verified)\n", target.display(), BinaryBytes(size)))
}

/// Why a download failed.
#[derive(Debug)]
pub(crate) enum DownloadError {
    /// The body stopped before its end: the connection broke, or the server
    /// found the backup altered and ended the transfer.
    Receive(io::Error),
    /// The snapshot could not be written.
    Write(io::Error),
    /// The whole body arrived, but it is not the snapshot the server described.
    Checksum { expected: String, actual: String },
}

impl fmt::Display for DownloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DownloadError::Receive(err) => write!(
                f,
                "the transfer stopped before the end ({err}); the server ends it early when the backup does not verify"
            ),
            DownloadError::Write(err) => write!(f, "writing the snapshot: {err}"),
            DownloadError::Checksum { expected, actual } => {
                write!(f, "the snapshot's SHA-256 is {actual}, not {expected} as the server said")
            }
        }
    }
}

impl std::error::Error for DownloadError {}

/// Copies `reader` to `writer` chunk by chunk, hashing as it goes, and
/// checks the hash against `expected` at the end. Returns the size.
pub(crate) fn copy_verified(
    mut reader: impl Read,
    mut writer: impl Write,
    expected: &str,
    progress: &ProgressBar,
) -> Result<u64, DownloadError> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; CHUNK];
    let mut size = 0u64;
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(DownloadError::Receive(err)),
        };
        let chunk = &buffer[..read];
        hasher.update(chunk);
        writer.write_all(chunk).map_err(DownloadError::Write)?;
        size += read as u64;
        progress.inc(read as u64);
    }
    writer.flush().map_err(DownloadError::Write)?;
    let actual = format!("{:x}", hasher.finalize());
    if actual != expected {
        return Err(DownloadError::Checksum { expected: expected.to_string(), actual });
    }
    Ok(size)
}

/// Streams `reader` into a temporary file beside `target` (mode 0600: a
/// snapshot holds every Secret of the cluster) and renames it into place
/// only when [`copy_verified`] succeeded and the file is on disk. On any
/// failure the temporary file is removed and `target` is left as it was.
pub(crate) fn save_verified(
    reader: impl Read,
    target: &Path,
    expected: &str,
    progress: &ProgressBar,
) -> Result<u64> {
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = target.file_name().ok_or_else(|| anyhow!("{} is not a file path", target.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let size = copy_verified(reader, temporary.as_file_mut(), expected, progress)?;
    temporary.as_file().sync_all().with_context(|| format!("writing {}", temporary.path().display()))?;
    temporary
        .persist(target)
        .map_err(|err| err.error)
        .with_context(|| format!("writing {}", target.display()))?;
    Ok(size)
}

/// Progress on standard error: drawn in place on a terminal, as one line a
/// second with `--progress` elsewhere (a CI log), and not at all otherwise.
fn progress_bar(total: Option<u64>, forced: bool) -> ProgressBar {
    if !progress_shown(forced) {
        return ProgressBar::hidden();
    }
    let target = if io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::term_like_with_hz(Box::new(LogLines::default()), 1)
    };
    let template = match total {
        Some(_) => {
            "{bytes}/{total_bytes} ({percent}%) at {binary_bytes_per_sec}, {elapsed} elapsed, {eta} left"
        }
        None => "{bytes} at {binary_bytes_per_sec}, {elapsed} elapsed",
    };
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(total, target).with_style(style)
}

fn progress_shown(forced: bool) -> bool {
    forced || io::stderr().is_terminal()
}

/// A draw target for standard error when it is not a terminal: each redraw
/// becomes a line of its own rather than escape codes that move the cursor.
#[derive(Debug, Default)]
struct LogLines {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// Whether the current line has text, so that the next redraw ends it.
    open: bool,
    /// When the last line was written: at most one a second.
    last: Option<Instant>,
}

impl LogLines {
    fn state(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|err| err.into_inner())
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn write_line(&self, line: &str) -> io::Result<()> {
        self.write_str(line)?;
        self.clear_line()
    }
    fn write_str(&self, text: &str) -> io::Result<()> {
        let text = text.trim_matches(['\r', ' ']);
        let mut state = self.state();
        let recent = state.last.is_some_and(|last| last.elapsed() < Duration::from_secs(1));
        if text.is_empty() || (recent && !state.open) {
            return Ok(());
        }
        state.open = true;
        state.last = Some(Instant::now());
        io::stderr().write_all(text.as_bytes())
    }
    fn clear_line(&self) -> io::Result<()> {
        if !std::mem::take(&mut self.state().open) {
            return Ok(());
        }
        io::stderr().write_all(b"\n")
    }
    fn flush(&self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives `data`, then fails, as a transfer the server ends early.
    struct Broken<'a>(&'a [u8]);

    impl Read for Broken<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
            }
            let count = buffer.len().min(self.0.len());
            buffer[..count].copy_from_slice(&self.0[..count]);
            self.0 = &self.0[count..];
            Ok(count)
        }
    }

    fn snapshot() -> Vec<u8> {
        (0..200_000u32).map(|i| (i % 251) as u8).collect()
    }

    fn sha256(bytes: &[u8]) -> String {
        format!("{:x}", Sha256::digest(bytes))
    }

    /// The names in `dir`, hidden ones included.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_verified_snapshot_is_renamed_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("acme-1.db");
        let data = snapshot();
        let size = save_verified(&data[..], &target, &sha256(&data), &ProgressBar::hidden()).unwrap();
        assert_eq!(size, data.len() as u64);
        assert_eq!(std::fs::read(&target).unwrap(), data);
        assert_eq!(names(dir.path()), ["acme-1.db"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&target).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_checksum_mismatch_leaves_no_file_and_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("acme-1.db");
        let data = snapshot();
        let error = save_verified(&data[..], &target, &sha256(b"other"), &ProgressBar::hidden()).unwrap_err();
        let cause = error.downcast_ref::<DownloadError>().unwrap();
        assert!(matches!(cause, DownloadError::Checksum { .. }), "{error:#}");
        assert!(error.to_string().contains(&format!("is {}, not {}", sha256(&data), sha256(b"other"))));
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));

        std::fs::write(&target, b"an older download").unwrap();
        save_verified(&data[..], &target, &sha256(b"other"), &ProgressBar::hidden()).unwrap_err();
        assert_eq!(std::fs::read(&target).unwrap(), b"an older download");
        assert_eq!(names(dir.path()), ["acme-1.db"]);
    }

    #[test]
    fn a_transfer_ended_early_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("acme-1.db");
        let data = snapshot();
        let error = save_verified(Broken(&data[..100_000]), &target, &sha256(&data), &ProgressBar::hidden())
            .unwrap_err();
        let cause = error.downcast_ref::<DownloadError>().unwrap();
        assert!(matches!(cause, DownloadError::Receive(_)), "{error:#}");
        assert!(error.to_string().contains("stopped before the end"), "{error:#}");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn copies_count_progress_and_compare_hashes() {
        let data = snapshot();
        let progress = ProgressBar::hidden();
        let mut written = Vec::new();
        let size = copy_verified(&data[..], &mut written, &sha256(&data), &progress).unwrap();
        assert_eq!(
            (size, written, progress.position()),
            (data.len() as u64, data.clone(), data.len() as u64)
        );
        let error = copy_verified(&data[..], io::sink(), "00", &ProgressBar::hidden()).unwrap_err();
        assert!(matches!(error, DownloadError::Checksum { .. }));
    }
}
