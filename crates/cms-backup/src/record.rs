//! Where a backup's parts live, and its id. A backup as the API shows
//! it ([`cms_model::Backup`]) is kept as a JSON sidecar beside the
//! encrypted file in the backup store: `<tenant>/<id>.json` next to
//! `<tenant>/<id>.etcd`. The sidecar is written after the file, so a
//! listed backup always has its file; a file without a sidecar is the
//! remains of a failed take and is never listed.

use chrono::{DateTime, Utc};

/// The key of a backup's encrypted file.
pub(crate) fn file_key(tenant: &str, id: &str) -> String {
    format!("{tenant}/{id}.etcd")
}

/// The key of a backup's sidecar.
pub(crate) fn record_key(tenant: &str, id: &str) -> String {
    format!("{tenant}/{id}.json")
}

/// A new id for a backup taken at `time`: sorting ids sorts by time.
pub(crate) fn new_id(time: DateTime<Utc>) -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", time.format("%Y%m%dt%H%M%S%3fz"), &suffix[..4])
}

/// Whether `id` could be a backup id: what a path may name.
pub(crate) fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_are_plain() {
        let early = new_id("2026-11-25T07:42:11.123Z".parse().unwrap());
        let late = new_id("2026-11-25T07:42:11.124Z".parse().unwrap());
        assert!(early.starts_with("20261125t074211123z-"));
        assert!(early < late);
        assert!(is_id(&early));
        assert!(!is_id("../x") && !is_id("") && !is_id("A"));
    }
}
