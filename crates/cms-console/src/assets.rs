//! The scripts and the stylesheet, embedded in the binary and served under
//! names that carry the first eight hex digits of their SHA-256
//! (`/assets/console.<hash8>.js`), computed once on first use. A changed
//! file gets a new name, so browsers may keep each one for a year without
//! asking again.

use std::sync::LazyLock;

use http::header::CACHE_CONTROL;
use http::{HeaderValue, StatusCode};
use sha2::{Digest, Sha256};

use crate::failure::Failure;
use crate::reply::{self, Outcome};

/// One embedded file under its hashed name.
struct Asset {
    /// The file name, such as `console.1a2b3c4d.js`.
    name: String,
    content_type: &'static str,
    bytes: &'static [u8],
}

impl Asset {
    fn new(stem: &str, extension: &str, content_type: &'static str, bytes: &'static [u8]) -> Asset {
        let digest = hex::encode(Sha256::digest(bytes));
        Asset { name: format!("{stem}.{}.{extension}", &digest[..8]), content_type, bytes }
    }

    fn path(&self) -> String {
        format!("/assets/{}", self.name)
    }
}

/// The script, the stylesheet and the machine page's logs panel script, in
/// that order.
static ASSETS: LazyLock<[Asset; 3]> = LazyLock::new(|| {
    [
        Asset::new("console", "js", "text/javascript; charset=utf-8", include_bytes!("../assets/console.js")),
        Asset::new("console", "css", "text/css; charset=utf-8", include_bytes!("../assets/console.css")),
        Asset::new("logs", "js", "text/javascript; charset=utf-8", include_bytes!("../assets/logs.js")),
    ]
});

/// The path of the script.
pub(crate) fn script_path() -> String {
    ASSETS[0].path()
}

/// The path of the stylesheet.
pub(crate) fn style_path() -> String {
    ASSETS[1].path()
}

/// The path of the machine page's logs panel script.
pub(crate) fn logs_script_path() -> String {
    ASSETS[2].path()
}

/// `GET /assets/{file}`: the file, cached for a year; `404` for a name that
/// is not the current one.
pub(crate) fn serve(file: &str) -> Outcome {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == file) else {
        return Err(Failure::new(StatusCode::NOT_FOUND, "There is no such file.").page(None).into());
    };
    let mut response = reply::bytes(StatusCode::OK, asset.content_type, asset.bytes);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_content_hash() {
        let script = script_path();
        let hash = script.strip_prefix("/assets/console.").and_then(|rest| rest.strip_suffix(".js"));
        assert!(
            hash.is_some_and(|hash| hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit())),
            "{script}"
        );
        assert!(style_path().ends_with(".css"));
        assert!(serve(script.trim_start_matches("/assets/")).is_ok());
        assert!(serve("console.00000000.js").is_err());
    }
}
