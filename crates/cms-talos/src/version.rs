//! Talos versions and what each minor version expects.

use std::fmt;

use crate::error::{Result, TalosError};

/// The oldest Talos minor version that `cms` renders configs for.
pub const MIN_TALOS_MINOR: u32 = 8;
/// The newest Talos minor version that `cms` renders configs for.
pub const MAX_TALOS_MINOR: u32 = 14;

/// A parsed Talos version such as `1.9.2` (a leading `v` is accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TalosVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl TalosVersion {
    /// Parses `MAJOR.MINOR.PATCH` or `vMAJOR.MINOR.PATCH`; a pre-release suffix
    /// on the patch (`1.14.0-rc.1`) is accepted and ignored.
    pub fn parse(version: &str) -> Result<TalosVersion> {
        let malformed = || TalosError::UnsupportedVersion {
            version: version.to_string(),
            reason: "not MAJOR.MINOR.PATCH",
        };
        let bare = version.strip_prefix('v').unwrap_or(version);
        let mut parts = bare.splitn(3, '.');
        let number = |part: Option<&str>| -> Result<u32> {
            let part = part.ok_or_else(malformed)?;
            if part.is_empty() || part.len() > 6 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed());
            }
            part.parse().map_err(|_| malformed())
        };
        let major = number(parts.next())?;
        let minor = number(parts.next())?;
        let patch_part = parts.next().map(|p| p.split_once('-').map_or(p, |(n, _)| n));
        let patch = number(patch_part)?;
        Ok(TalosVersion { major, minor, patch })
    }

    /// Parses a version and checks that configs can be rendered for it.
    pub fn supported(version: &str) -> Result<TalosVersion> {
        let parsed = TalosVersion::parse(version)?;
        if parsed.major != 1 || parsed.minor < MIN_TALOS_MINOR || parsed.minor > MAX_TALOS_MINOR {
            return Err(TalosError::UnsupportedVersion {
                version: version.to_string(),
                reason: "cms supports Talos 1.8 to 1.14",
            });
        }
        Ok(parsed)
    }

    /// Whether this version is at least `1.<minor>`.
    pub fn at_least(self, minor: u32) -> bool {
        self.major > 1 || (self.major == 1 && self.minor >= minor)
    }

    /// The cluster id is standard base64 from 1.14 on, URL-safe base64 before.
    pub(crate) fn standard_cluster_id(self) -> bool {
        self.at_least(14)
    }

    /// From 1.14 on, Kubernetes settings live in their own documents
    /// (`KubeClusterConfig`, `KubeNetworkConfig`, ...), not in `cluster`.
    pub(crate) fn multidoc_kubernetes(self) -> bool {
        self.at_least(14)
    }
}

impl fmt::Display for TalosVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_range_is_checked() {
        assert_eq!(TalosVersion::parse("v1.9.2").unwrap(), TalosVersion { major: 1, minor: 9, patch: 2 });
        assert_eq!(TalosVersion::parse("1.14.0-rc.1").unwrap().minor, 14);
        for bad in ["", "1.9", "x.1.2", "1..2", "v", "1.2.3.4x"] {
            assert!(TalosVersion::parse(bad).is_err(), "{bad}");
        }
        assert!(TalosVersion::supported("1.8.0").is_ok());
        assert!(TalosVersion::supported("1.14.3").is_ok());
        assert!(TalosVersion::supported("1.7.6").is_err());
        assert!(TalosVersion::supported("1.15.0").is_err());
        assert!(TalosVersion::supported("2.0.0").is_err());
    }
}
