//! The drift guard: our trimmed `.proto` files (`proto/`) against the
//! unmodified copy of Talos's (`../cms-fake-node/proto-upstream/`, whose
//! `SOURCE.md` names the commit), and the guard shown able to fail on
//! copies of ours drifted on purpose.

use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet, MethodDescriptorProto};

use crate::drift::{Drift, drift};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn compile(include: &Path) -> FileDescriptorSet {
    protox::compile(["machine/machine.proto"], [include])
        .unwrap_or_else(|err| panic!("compiling {}: {err:?}", include.display()))
}

/// Our copy, the one the client is built from.
fn ours() -> FileDescriptorSet {
    compile(&manifest_dir().join("proto"))
}

/// Talos's own files, as the fake node is built from them.
fn upstream() -> FileDescriptorSet {
    compile(&manifest_dir().join("../cms-fake-node/proto-upstream"))
}

#[test]
fn our_protos_say_what_talos_says() {
    let found = drift(&ours(), &upstream());
    let lines: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        found.is_empty(),
        "crates/cms-nodeapi/proto drifted from Talos's own files \
         (crates/cms-fake-node/proto-upstream, see its SOURCE.md):\n{}",
        lines.join("\n")
    );
}

#[test]
fn the_guard_covers_every_call_the_client_makes() {
    let ours = ours();
    let service =
        ours.file.iter().flat_map(|file| &file.service).find(|service| service.name() == "MachineService");
    let methods: Vec<&str> =
        service.expect("MachineService").method.iter().map(|method| method.name()).collect();
    for call in [
        "Version",
        "ApplyConfiguration",
        "Upgrade",
        "Bootstrap",
        "EtcdSnapshot",
        "EtcdRecover",
        "Reset",
        "Logs",
        "Dmesg",
        "ServiceList",
    ] {
        assert!(methods.contains(&call), "{call} is not in our MachineService: {methods:?}");
    }
}

/// Makes `change` to our copy and checks that the guard finds `expected`
/// (in any order) beyond what it finds in our copy as it is.
fn check(change: impl FnOnce(&mut FileDescriptorSet), expected: &[Drift]) {
    let (ours, upstream) = (ours(), upstream());
    let before = drift(&ours, &upstream);
    let mut changed = ours;
    change(&mut changed);
    let mut found: Vec<Drift> =
        drift(&changed, &upstream).into_iter().filter(|found| !before.contains(found)).collect();
    let mut expected = expected.to_vec();
    let order = |a: &Drift, b: &Drift| (&a.place, &a.problem).cmp(&(&b.place, &b.problem));
    found.sort_by(order);
    expected.sort_by(order);
    assert_eq!(found, expected);
}

fn message<'a>(set: &'a mut FileDescriptorSet, path: &[&str]) -> &'a mut DescriptorProto {
    let file = set.file.iter_mut().find(|file| file.package() == "machine").expect("the machine file");
    let (first, rest) = path.split_first().expect("a message name");
    let mut message = file.message_type.iter_mut().find(|message| message.name() == *first).expect(first);
    for name in rest {
        message = message.nested_type.iter_mut().find(|nested| nested.name() == *name).expect(name);
    }
    message
}

fn field<'a>(set: &'a mut FileDescriptorSet, message_name: &str, name: &str) -> &'a mut FieldDescriptorProto {
    message(set, &[message_name]).field.iter_mut().find(|field| field.name() == name).expect(name)
}

fn method<'a>(set: &'a mut FileDescriptorSet, name: &str) -> &'a mut MethodDescriptorProto {
    let file = set.file.iter_mut().find(|file| file.package() == "machine").expect("the machine file");
    file.service[0].method.iter_mut().find(|method| method.name() == name).expect(name)
}

#[test]
fn a_renumbered_field_is_found() {
    check(
        |set| field(set, "ApplyConfigurationRequest", "mode").number = Some(7),
        &[Drift::new("field machine.ApplyConfigurationRequest.mode", "number 7 here, 4 upstream")],
    );
}

#[test]
fn a_flipped_streaming_flag_is_found() {
    check(
        |set| {
            method(set, "EtcdSnapshot").server_streaming = Some(false);
            method(set, "EtcdRecover").client_streaming = Some(false);
        },
        &[
            Drift::new("method machine.MachineService/EtcdRecover", "client streaming no here, yes upstream"),
            Drift::new(
                "method machine.MachineService/EtcdSnapshot",
                "server streaming no here, yes upstream",
            ),
        ],
    );
}

#[test]
fn another_input_or_output_type_is_found() {
    check(
        |set| {
            method(set, "Upgrade").input_type = Some(".machine.ResetRequest".into());
            method(set, "Version").output_type = Some(".machine.Version".into());
        },
        &[
            Drift::new(
                "method machine.MachineService/Upgrade",
                "input machine.ResetRequest here, machine.UpgradeRequest upstream",
            ),
            Drift::new(
                "method machine.MachineService/Version",
                "output machine.Version here, machine.VersionResponse upstream",
            ),
        ],
    );
}

#[test]
fn another_type_or_label_is_found() {
    check(
        |set| {
            field(set, "EtcdMember", "id").set_type(Type::Int64);
            field(set, "ApplyConfiguration", "mode").type_name =
                Some(".machine.UpgradeRequest.RebootMode".into());
            field(set, "VersionResponse", "messages").set_label(Label::Optional);
        },
        &[
            Drift::new("field machine.EtcdMember.id", "type int64 here, uint64 upstream"),
            Drift::new(
                "field machine.ApplyConfiguration.mode",
                "type machine.UpgradeRequest.RebootMode here, machine.ApplyConfigurationRequest.Mode upstream",
            ),
            Drift::new("field machine.VersionResponse.messages", "repeated no here, yes upstream"),
        ],
    );
}

#[test]
fn missing_names_and_enum_numbers_are_found() {
    check(
        |set| {
            field(set, "EtcdMemberStatus", "db_size").name = Some("database_size".into());
            let wipe = message(set, &["ResetRequest"]).enum_type.iter_mut().find(|e| e.name() == "WipeMode");
            let value = wipe.expect("WipeMode").value.iter_mut().find(|v| v.name() == "USER_DISKS");
            value.expect("USER_DISKS").number = Some(3);
            message(set, &["PlatformInfo"]).name = Some("Platform".into());
        },
        &[
            Drift::new("message machine.Platform", "missing upstream"),
            Drift::new(
                "field machine.EtcdMemberStatus.database_size",
                "missing upstream, where number 2 is `db_size`",
            ),
            Drift::new("enum value machine.ResetRequest.WipeMode.USER_DISKS", "number 3 here, 2 upstream"),
        ],
    );
}
