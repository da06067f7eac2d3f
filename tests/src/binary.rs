//! Finding the binaries under test: `cms-server` and the `cms` client.

use std::path::PathBuf;

/// The environment variable that names the server binary explicitly.
const BINARY_VARIABLE: &str = "CMS_SERVER_BIN";
/// The environment variable that names the `cms` client binary explicitly.
const CLI_VARIABLE: &str = "CMS_CLI_BIN";

/// The path of the `cms-server` binary: `$CMS_SERVER_BIN` when set, otherwise
/// `cms-server` in the profile folder of the target directory holding this
/// test executable (tests run from `target/<profile>/deps`).
///
/// Panics with instructions when the binary is missing: an end-to-end test
/// that cannot find the server fails, it is never skipped.
pub fn server_binary() -> PathBuf {
    find_binary("cms-server", "cms-server", BINARY_VARIABLE)
}

/// The path of the `cms` client binary, found like [`server_binary`]
/// (`$CMS_CLI_BIN`, else next to `cms-server`).
pub fn cli_binary() -> PathBuf {
    find_binary("cms", "cms-cli", CLI_VARIABLE)
}

fn find_binary(name: &str, package: &str, variable: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{variable} names {}, which is not a file", path.display());
        return path;
    }
    let exe = std::env::current_exe().expect("the path of the running test executable");
    let profile_dir = exe
        .parent()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "deps"))
        .and_then(|deps| deps.parent())
        .or_else(|| exe.parent())
        .expect("the test executable lives in a folder");
    let path = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "the end-to-end tests need the {name} binary, and {} does not exist.\n\
         Build it first with `cargo build -p {package}` (same profile as the tests), \
         or run `cargo xtask e2e`, which builds it and runs these tests,\n\
         or point {variable} at a built binary.",
        path.display()
    );
    path
}
