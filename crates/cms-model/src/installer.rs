//! The installer image a machine installs Talos from and upgrades with: the
//! default Talos installer, an Image Factory schematic's installer (whose
//! system extensions then survive upgrades), or an image repository the
//! tenant or its node group names. [`installer_image`] is the one answer
//! every part of `cms` asks; the checks of `installerImage` and `schematic`
//! live here too.
//!
//! Both fields end up in machine configs (YAML) and node API calls, so they
//! are checked strictly: a repository of lowercase DNS host and path
//! characters, never a tag, a digest, whitespace or anything a YAML or
//! template parser would read twice.

use crate::node_group::NodeGroupSpec;
use crate::tenant::TenantSpec;
use crate::validate::FieldError;

/// The repository of the stock Talos installer.
pub const DEFAULT_INSTALLER_REPOSITORY: &str = "ghcr.io/siderolabs/installer";
/// The Image Factory's installer repository; a schematic's installer is
/// `<this>/<schematic>`.
pub const IMAGE_FACTORY_INSTALLER_REPOSITORY: &str = "factory.talos.dev/installer";
/// The longest `installerImage` accepted.
pub const MAX_INSTALLER_IMAGE: usize = 255;
/// The length of an Image Factory schematic id (lowercase hex SHA-256).
pub const SCHEMATIC_LENGTH: usize = 64;

/// The installer image of a machine of `group` (when it has one) in the
/// tenant `tenant`, for Talos `talos_version` (`1.14.0` or `v1.14.0`):
/// `<repository>:v<version>`, where the repository is the group's choice
/// (its `installerImage`, or its `schematic`'s Image Factory installer),
/// else the tenant's, else [`DEFAULT_INSTALLER_REPOSITORY`].
///
/// Machine configs name it as their install image and upgrades ask for
/// it, so a node built from a schematic keeps its system extensions
/// through upgrades. The fields are trusted as checked on write.
pub fn installer_image(tenant: &TenantSpec, group: Option<&NodeGroupSpec>, talos_version: &str) -> String {
    let repository = group
        .and_then(|group| repository(group.installer_image.as_deref(), group.schematic.as_deref()))
        .or_else(|| repository(tenant.installer_image.as_deref(), tenant.schematic.as_deref()))
        .unwrap_or_else(|| DEFAULT_INSTALLER_REPOSITORY.to_string());
    let version = talos_version.strip_prefix('v').unwrap_or(talos_version);
    format!("{repository}:v{version}")
}

/// The repository one object chooses, if it chooses one.
fn repository(installer_image: Option<&str>, schematic: Option<&str>) -> Option<String> {
    match (installer_image, schematic) {
        (Some(image), _) => Some(image.to_string()),
        (None, Some(schematic)) => Some(format!("{IMAGE_FACTORY_INSTALLER_REPOSITORY}/{schematic}")),
        (None, None) => None,
    }
}

/// Checks the `installerImage` and `schematic` of the object at `path`
/// (such as `spec` or `spec.nodeGroups[0]`): at most one of the two, each
/// well formed.
pub(crate) fn check_installer(
    path: &str,
    installer_image: Option<&str>,
    schematic: Option<&str>,
) -> Result<(), FieldError> {
    if installer_image.is_some() && schematic.is_some() {
        return Err(FieldError::new(
            format!("{path}.schematic"),
            "set either installerImage or schematic, not both: a schematic means the installer \
             factory.talos.dev/installer/<schematic>",
        ));
    }
    if let Some(image) = installer_image {
        check_repository(&format!("{path}.installerImage"), image)?;
    }
    if let Some(schematic) = schematic {
        check_schematic(&format!("{path}.schematic"), schematic)?;
    }
    Ok(())
}

/// Checks an Image Factory schematic id: exactly 64 lowercase hex digits.
fn check_schematic(field: &str, schematic: &str) -> Result<(), FieldError> {
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if schematic.len() != SCHEMATIC_LENGTH || !schematic.as_bytes().iter().all(hex) {
        return Err(FieldError::new(
            field,
            format!("must be an Image Factory schematic id: {SCHEMATIC_LENGTH} lowercase hex digits"),
        ));
    }
    Ok(())
}

/// Checks an image repository without tag or digest:
/// `HOST[:PORT]/COMPONENT[/COMPONENT...]`, the host a DNS name (or
/// `localhost`, or an IPv4 address) in lowercase, each path component
/// `[a-z0-9]+([._-][a-z0-9]+)*`, at most [`MAX_INSTALLER_IMAGE`] bytes.
fn check_repository(field: &str, image: &str) -> Result<(), FieldError> {
    let invalid = |why: &str| {
        FieldError::new(
            field,
            format!(
                "{why}; expected an image repository such as registry.example.com/talos/installer \
                 (the service appends :v<talosVersion>)"
            ),
        )
    };
    if image.is_empty() {
        return Err(invalid("is empty"));
    }
    if image.len() > MAX_INSTALLER_IMAGE {
        return Err(invalid(&format!("is longer than {MAX_INSTALLER_IMAGE} characters")));
    }
    if image.contains('@') {
        return Err(invalid("must not carry a digest"));
    }
    if image.contains("://") {
        return Err(invalid("must not carry a scheme"));
    }
    let Some((host, path)) = image.split_once('/') else {
        return Err(invalid("must name a registry host and a repository path"));
    };
    check_host(host).map_err(|why| invalid(&why))?;
    for component in path.split('/') {
        if let Some((name, _)) = component.split_once(':')
            && is_path_component(name)
        {
            return Err(invalid("must not carry a tag"));
        }
        if !is_path_component(component) {
            return Err(invalid(&format!(
                "has the path component {component:?}: use lowercase letters and digits, \
                 separated by single '.', '_' or '-'"
            )));
        }
    }
    Ok(())
}

/// Checks a registry host with an optional port.
fn check_host(host: &str) -> Result<(), String> {
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let label = |label: &str| {
        let bytes = label.as_bytes();
        let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
        !bytes.is_empty()
            && bytes.len() <= 63
            && bytes.iter().all(inner)
            && bytes.first() != Some(&b'-')
            && bytes.last() != Some(&b'-')
    };
    if name.is_empty() || !name.split('.').all(label) {
        return Err(format!("has the registry host {name:?}: use a lowercase DNS name"));
    }
    if let Some(port) = port {
        let digits = !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
        if !digits || !port.parse::<u16>().is_ok_and(|port| port > 0) {
            return Err(format!("has the registry port {port:?}, not a port number"));
        }
    }
    // Without a dot, a port or `localhost`, the first component would be
    // read as a Docker Hub namespace rather than a registry.
    if !name.contains('.') && port.is_none() && name != "localhost" {
        return Err(format!(
            "starts with {name:?}, which is not a registry host: name the registry, such as docker.io/{name}"
        ));
    }
    Ok(())
}

/// Whether `component` is `[a-z0-9]+([._-][a-z0-9]+)*`.
fn is_path_component(component: &str) -> bool {
    let alphanumeric = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let separator = |b: u8| matches!(b, b'.' | b'_' | b'-');
    let bytes = component.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    alphanumeric(first)
        && alphanumeric(last)
        && bytes.iter().all(|&b| alphanumeric(b) || separator(b))
        && !bytes.windows(2).any(|pair| separator(pair[0]) && separator(pair[1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;
    use crate::validate::Validate;

    const SCHEMATIC: &str = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba";

    fn tenant(extra: &str) -> Result<TenantSpec, FieldError> {
        let mut spec: TenantSpec =
            parse_json(format!(r#"{{"kubernetesVersion":"1.31.0"{extra}}}"#).as_bytes()).expect("parses");
        spec.normalize("spec").map(|_| spec)
    }

    fn group(extra: &str) -> NodeGroupSpec {
        let json = format!(
            r#"{{"name":"w","role":"worker","count":1,"providerClass":"metal:bare",
                "providerConfig":{{"hosts":[{{"address":"10.0.0.1"}}]}}{extra}}}"#
        );
        let mut spec: NodeGroupSpec = parse_json(json.as_bytes()).expect("parses");
        spec.normalize("spec").expect("a valid group");
        spec
    }

    #[test]
    fn good_repositories_pass() {
        let good = [
            "registry.example.com/talos/installer",
            "factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba",
            "ghcr.io/siderolabs/installer",
            "localhost:5000/installer",
            "localhost/installer",
            "10.0.0.5:5000/talos/installer",
            "registry-1.example.com:443/a.b/c_d/e-f",
            "docker.io/library/x",
        ];
        for image in good {
            assert_eq!(check_repository("f", image), Ok(()), "{image}");
        }
        let longest = format!("r.io/{}", "a".repeat(MAX_INSTALLER_IMAGE - "r.io/".len()));
        assert_eq!(check_repository("f", &longest), Ok(()));
    }

    #[test]
    fn hostile_and_malformed_repositories_are_refused_naming_the_field() {
        let bad = [
            ("", "is empty"),
            ("installer", "registry host"),
            ("siderolabs/installer", "not a registry host"),
            ("ghcr.io/siderolabs/installer:v1.14.0", "tag"),
            ("ghcr.io/siderolabs/installer@sha256:abcd", "digest"),
            ("ghcr.io/siderolabs/installer:latest@sha256:abcd", "digest"),
            ("GHCR.io/siderolabs/installer", "registry host"),
            ("ghcr.io/SideroLabs/installer", "path component"),
            ("ghcr.io/siderolabs/installer ", "path component"),
            (" ghcr.io/siderolabs/installer", "registry host"),
            ("ghcr.io/sidero labs/installer", "path component"),
            ("ghcr.io/siderolabs/installer\n", "path component"),
            ("ghcr.io/siderolabs/installer\nimage: evil", "path component"),
            ("ghcr.io/a\tb", "path component"),
            ("ghcr.io/", "path component"),
            ("ghcr.io//installer", "path component"),
            ("ghcr.io/installer/", "path component"),
            ("ghcr.io/a..b", "path component"),
            ("ghcr.io/a.-b", "path component"),
            ("ghcr.io/-a", "path component"),
            ("ghcr.io/a_", "path component"),
            ("ghcr.io/${file(\"x\")}", "path component"),
            ("ghcr.io/{{.Values}}", "path component"),
            ("ghcr.io/'quoted'", "path component"),
            ("ghcr.io/\"quoted\"", "path component"),
            ("ghcr.io/a#comment", "path component"),
            ("ghcr.io/é", "path component"),
            ("ghcr.io/../etc", "path component"),
            ("-ghcr.io/a", "registry host"),
            ("ghcr..io/a", "registry host"),
            ("ghcr_io.x/a", "registry host"),
            ("https://ghcr.io/a", "scheme"),
            ("ghcr.io:/a", "port"),
            ("ghcr.io:99999/a", "port"),
            ("ghcr.io:0/a", "port"),
            ("ghcr.io:50x/a", "port"),
            ("[::1]:5000/a", "registry host"),
        ];
        for (image, says) in bad {
            let err = check_repository("spec.installerImage", image).expect_err(image);
            assert_eq!(err.field, "spec.installerImage", "{image:?}");
            assert!(err.message.contains(says), "{image:?}: {}", err.message);
        }
        let too_long = format!("r.io/{}", "a".repeat(MAX_INSTALLER_IMAGE));
        assert!(check_repository("f", &too_long).unwrap_err().message.contains("longer than"));
    }

    #[test]
    fn schematics_are_64_lowercase_hex_digits() {
        assert_eq!(check_schematic("f", SCHEMATIC), Ok(()));
        for bad in [
            "",
            &SCHEMATIC[1..],
            &format!("{SCHEMATIC}0"),
            &SCHEMATIC.to_uppercase(),
            &format!("{}g", &SCHEMATIC[1..]),
            &format!("{} ", &SCHEMATIC[1..]),
            &format!("../{}", &SCHEMATIC[3..]),
        ] {
            assert_eq!(
                check_schematic("spec.schematic", bad).unwrap_err().field,
                "spec.schematic",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn specs_check_both_fields_and_refuse_the_pair() {
        tenant(r#","installerImage":"registry.example.com/talos/installer""#).expect("an image");
        tenant(&format!(r#","schematic":"{SCHEMATIC}""#)).expect("a schematic");
        let err = tenant(&format!(r#","installerImage":"r.io/i","schematic":"{SCHEMATIC}""#)).unwrap_err();
        assert_eq!(err.field, "spec.schematic");
        assert!(err.message.contains("not both"), "{err}");
        assert_eq!(tenant(r#","installerImage":"r.io/i:v1""#).unwrap_err().field, "spec.installerImage");
        assert_eq!(tenant(r#","schematic":"abc""#).unwrap_err().field, "spec.schematic");

        let groups = |extra: &str| {
            format!(
                r#","nodeGroups":[{{"name":"w","role":"worker","count":1,"providerClass":"metal:bare",
                    "providerConfig":{{"hosts":[{{"address":"10.0.0.1"}}]}}{extra}}}]"#
            )
        };
        let err = tenant(&groups(r#","installerImage":"r.io/I""#)).unwrap_err();
        assert_eq!(err.field, "spec.nodeGroups[0].installerImage");
        let err =
            tenant(&groups(&format!(r#","installerImage":"r.io/i","schematic":"{SCHEMATIC}""#))).unwrap_err();
        assert_eq!(err.field, "spec.nodeGroups[0].schematic");
        let err = tenant(&groups(r#","schematic":"ABC""#)).unwrap_err();
        assert_eq!(err.field, "spec.nodeGroups[0].schematic");
    }

    #[test]
    fn the_group_overrides_the_tenant_and_the_default_is_the_stock_installer() {
        let plain = tenant("").unwrap();
        assert_eq!(installer_image(&plain, None, "1.14.0"), "ghcr.io/siderolabs/installer:v1.14.0");
        assert_eq!(installer_image(&plain, None, "v1.14.0"), "ghcr.io/siderolabs/installer:v1.14.0");
        let bare = group("");
        assert_eq!(installer_image(&plain, Some(&bare), "1.9.2"), "ghcr.io/siderolabs/installer:v1.9.2");

        let factory = tenant(&format!(r#","schematic":"{SCHEMATIC}""#)).unwrap();
        let expected = format!("factory.talos.dev/installer/{SCHEMATIC}:v1.14.0");
        assert_eq!(installer_image(&factory, None, "1.14.0"), expected);
        assert_eq!(installer_image(&factory, Some(&bare), "v1.14.0"), expected, "a group without one");

        let mirrored = group(r#","installerImage":"registry.example.com/talos/installer""#);
        assert_eq!(
            installer_image(&factory, Some(&mirrored), "1.14.0"),
            "registry.example.com/talos/installer:v1.14.0"
        );
        let own = tenant(r#","installerImage":"registry.example.com/talos/installer""#).unwrap();
        let extended = group(&format!(r#","schematic":"{SCHEMATIC}""#));
        assert_eq!(
            installer_image(&own, Some(&extended), "1.14.1"),
            format!("factory.talos.dev/installer/{SCHEMATIC}:v1.14.1")
        );
        assert_eq!(installer_image(&own, None, "1.14.1"), "registry.example.com/talos/installer:v1.14.1");
    }

    #[test]
    fn the_fields_are_camel_case_and_absent_when_unset() {
        let spec = tenant(&format!(r#","schematic":"{SCHEMATIC}""#)).unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["schematic"], SCHEMATIC);
        assert!(json.get("installerImage").is_none(), "{json}");
        let group = group(r#","installerImage":"r.io/i""#);
        let json = serde_json::to_value(&group).unwrap();
        assert_eq!(json["installerImage"], "r.io/i");
        assert!(json.get("schematic").is_none(), "{json}");
    }
}
