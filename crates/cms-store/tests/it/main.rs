//! The store conformance suite on embedded SQLite.

fn sqlite() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    (url, dir)
}

cms_store::conformance_suite!(sqlite());
