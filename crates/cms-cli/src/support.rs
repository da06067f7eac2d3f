//! `cms support TENANT [-f FILE]`: the tenant's support bundle, a zip the
//! server streams as it builds it. It is written to a temporary file beside
//! the target and renamed into place only once whole (its central directory
//! read back), with the bytes received shown on standard error as they come
//! and the entries counted at the end.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::client::{Client, disposition_file_name};
use crate::output::out;

/// How often progress is shown at most.
const EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Args)]
pub(crate) struct SupportArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// File to write (default: the server's file name, such as acme-support-20260102T030405Z.zip).
    /// `-f` as every download: `-o` is the output format of every command
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
}

/// `cms support TENANT`.
pub(crate) fn support(client: &Client, args: &SupportArgs) -> Result<()> {
    let response = client.open(&format!("/api/v1/tenants/{}/support", args.tenant))?;
    let target = match &args.file {
        Some(file) => file.clone(),
        None => {
            let header = response.headers().get("content-disposition").and_then(|value| value.to_str().ok());
            let name = header.and_then(disposition_file_name);
            PathBuf::from(name.unwrap_or_else(|| format!("{}-support.zip", args.tenant)))
        }
    };
    let (size, entries) = save(response, &target)?;
    out(&format!("wrote {} ({entries} entries, {})\n", target.display(), bytes(size)))
}

/// Streams `reader` into a temporary file beside `target`, checks that it
/// is a whole zip, and renames it into place. On any failure `target` is
/// left as it was. Gives the size and the number of entries.
fn save(reader: impl Read, target: &Path) -> Result<(u64, usize)> {
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = target.file_name().ok_or_else(|| anyhow!("{} is not a file path", target.display()))?;
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let size = copy(reader, temporary.as_file_mut(), &mut io::stderr())?;
    temporary.as_file().sync_all().with_context(|| format!("writing {}", temporary.path().display()))?;
    let entries = count_entries(temporary.reopen()?)?;
    eprintln!("received {} in {entries} entries", bytes(size));
    temporary
        .persist(target)
        .map_err(|err| err.error)
        .with_context(|| format!("writing {}", target.display()))?;
    Ok((size, entries))
}

/// Copies the bundle, showing the bytes received on `progress` at most
/// every [`EVERY`].
fn copy(mut reader: impl Read, mut writer: impl Write, progress: &mut impl Write) -> Result<u64> {
    let mut buffer = vec![0; 64 * 1024];
    let mut size = 0u64;
    let mut shown = Instant::now();
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(anyhow!("the transfer stopped before the end: {err}")),
        };
        writer.write_all(&buffer[..read]).context("writing the bundle")?;
        size += read as u64;
        if shown.elapsed() >= EVERY {
            shown = Instant::now();
            let _ = writeln!(progress, "received {}", bytes(size));
        }
    }
    writer.flush().context("writing the bundle")?;
    Ok(size)
}

/// The entries of a whole zip; one cut short has no central directory.
fn count_entries(file: File) -> Result<usize> {
    let archive = zip::ZipArchive::new(file)
        .map_err(|err| anyhow!("the bundle is not a whole zip ({err}): the server stopped early"))?;
    Ok(archive.len())
}

/// A size as people read it: `512 B`, `3.2 KiB`, `1.5 MiB`.
fn bytes(size: u64) -> String {
    match size {
        0..1024 => format!("{size} B"),
        1024..1_048_576 => format!("{:.1} KiB", size as f64 / 1024.0),
        _ => format!("{:.1} MiB", size as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_bundle_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("b.zip");
        let err = save(&b"PK\x03\x04 not a whole zip"[..], &target).unwrap_err();
        assert!(err.to_string().contains("not a whole zip"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file is left");

        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("a.txt", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(b"a").unwrap();
        let whole = zip.finish().unwrap().into_inner();
        let (size, entries) = save(&whole[..], &target).unwrap();
        assert_eq!((size, entries), (whole.len() as u64, 1));
        assert_eq!(std::fs::read(&target).unwrap(), whole);
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
