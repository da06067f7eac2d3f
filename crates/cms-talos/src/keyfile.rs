//! The sealing key file: created with mode 0600 when missing.
//!
//! The file holds one key per line, `<key id> <base64 of 32 bytes>`; the first
//! line is the current key and later lines are older keys that still open old
//! blobs. Blank lines and lines starting with `#` are ignored. To rotate, put
//! a new line first and keep the old one below it.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::Path;

use secrecy::{ExposeSecret, SecretString};

use crate::error::{Result, TalosError};
use crate::seal::{Sealer, SealingKey};

/// The id of the key written into a new key file.
const FIRST_KEY_ID: &str = "k1";

impl Sealer {
    /// Reads the key file at `path`, or creates it (mode 0600, one fresh key
    /// with id `k1`) when it does not exist.
    pub fn from_key_file(path: &Path) -> Result<Sealer> {
        let io = |source| TalosError::KeyFile { path: path.display().to_string(), source };
        match create(path) {
            Ok(sealer) => return Ok(sealer),
            Err(err) if err.kind() == ErrorKind::AlreadyExists => {}
            Err(err) => return Err(io(err)),
        }
        let text = SecretString::from(fs::read_to_string(path).map_err(io)?);
        parse(path, &text)
    }

    /// The key file text for this sealer's keys, current first.
    pub fn to_key_file(&self) -> SecretString {
        let mut text = String::from("# cms sealing keys: `<id> <base64>`, the current key first\n");
        for key in self.keys() {
            text.push_str(&format!("{} {}\n", key.id(), key.to_base64().expose_secret()));
        }
        SecretString::from(text)
    }
}

fn create(path: &Path) -> std::io::Result<Sealer> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    let key = SealingKey::generate(FIRST_KEY_ID).map_err(std::io::Error::other)?;
    let sealer = Sealer::new(key);
    let written =
        file.write_all(sealer.to_key_file().expose_secret().as_bytes()).and_then(|()| file.sync_all());
    if let Err(err) = written {
        // A half-written file would hold a key nobody can trust; leave none.
        let _ = fs::remove_file(path);
        return Err(err);
    }
    Ok(sealer)
}

fn parse(path: &Path, text: &SecretString) -> Result<Sealer> {
    let invalid =
        |line: usize, why: &str| TalosError::InvalidKey(format!("{}:{line}: {why}", path.display()));
    let mut keys = Vec::new();
    for (index, line) in text.expose_secret().lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, key) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| invalid(index + 1, "expected `<id> <key>`"))?;
        let key = SealingKey::from_base64(id, &SecretString::from(key.trim().to_string()))
            .map_err(|err| invalid(index + 1, &err.to_string()))?;
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(invalid(0, "the file holds no key"));
    }
    let current = keys.remove(0);
    Sealer::with_previous(current, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_created_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sealing.key");
        let first = Sealer::from_key_file(&path).unwrap();
        assert_eq!(first.current_key_id(), "k1");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let blob = first.seal("t", "p", b"data").unwrap();
        let again = Sealer::from_key_file(&path).unwrap();
        assert_eq!(again.open("t", "p", &blob).unwrap(), b"data");
    }

    #[test]
    fn rotated_files_keep_old_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        let old = Sealer::from_key_file(&path).unwrap();
        let blob = old.seal("t", "p", b"data").unwrap();
        let new = SealingKey::generate("k2").unwrap();
        let rotated = Sealer::with_previous(new, vec![SealingKey::generate("unused").unwrap()]).unwrap();
        let text = format!(
            "{}{}",
            rotated.to_key_file().expose_secret(),
            old.to_key_file().expose_secret().lines().nth(1).unwrap()
        );
        fs::write(&path, text).unwrap();
        let loaded = Sealer::from_key_file(&path).unwrap();
        assert_eq!(loaded.current_key_id(), "k2");
        assert_eq!(loaded.open("t", "p", &blob).unwrap(), b"data");
    }

    #[test]
    fn malformed_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "# only a comment\n", "k1\n", "k1 notbase64\n"] {
            let path = dir.path().join("bad");
            fs::write(&path, bad).unwrap();
            assert!(matches!(Sealer::from_key_file(&path), Err(TalosError::InvalidKey(_))), "{bad:?}");
        }
        let missing_dir = dir.path().join("no/such/dir/key");
        assert!(matches!(Sealer::from_key_file(&missing_dir), Err(TalosError::KeyFile { .. })));
    }
}
