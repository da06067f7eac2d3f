//! What the engine tests share: where the real engine is.

use std::path::PathBuf;

/// The engine's shim: `CMS_TEST_TOFU`, else where `.ci/tofu-engine` puts it.
/// A missing engine fails the test: it is never skipped.
pub(crate) fn engine() -> PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(
        path.is_file(),
        "the test engine {} is missing: run `bash .ci/tofu-engine` (CI does)",
        path.display()
    );
    path
}
