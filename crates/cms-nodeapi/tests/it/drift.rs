//! The comparison behind the drift guard: what of our `.proto` files (as a
//! compiled descriptor set) Talos's own do not say the same way.
//!
//! For every method of our services: it exists upstream, with the same
//! input and output types and the same client and server streaming. For
//! every message, nested ones included: it exists upstream under the same
//! full name, and each of our fields exists there with the same name,
//! number, type (with the message or enum it names) and label (repeated or
//! not). For every enum, nested ones included: it exists upstream, and each
//! of our values has the same number there. What upstream has beyond ours
//! is no drift: our copy is trimmed on purpose.

use std::collections::HashMap;
use std::fmt;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet, MethodDescriptorProto,
    ServiceDescriptorProto,
};

/// One difference: where (such as `field machine.Version.features`) and
/// what differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Drift {
    pub(crate) place: String,
    pub(crate) problem: String,
}

impl Drift {
    pub(crate) fn new(place: impl Into<String>, problem: impl Into<String>) -> Drift {
        Drift { place: place.into(), problem: problem.into() }
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

/// Everything in `ours` that `upstream` does not say the same way, in the
/// order of our files. Google's well-known types (`google/protobuf/`),
/// which the compiler brings to both, are left out.
pub(crate) fn drift(ours: &FileDescriptorSet, upstream: &FileDescriptorSet) -> Vec<Drift> {
    let index = Index::of(upstream);
    let mut found = Vec::new();
    for file in ours.file.iter().filter(|file| !file.name().starts_with("google/protobuf/")) {
        let scope = match file.package() {
            "" => String::new(),
            package => format!(".{package}"),
        };
        for service in &file.service {
            compare_service(&index, &format!("{scope}.{}", service.name()), service, &mut found);
        }
        for message in &file.message_type {
            compare_message(&index, &scope, message, &mut found);
        }
        for enumeration in &file.enum_type {
            compare_enum(&index, &scope, enumeration, &mut found);
        }
    }
    found
}

/// Upstream's services, messages and enums by full name (`.machine.Version`,
/// `.machine.ResetRequest.WipeMode`), as fields and methods name them.
struct Index<'a> {
    services: HashMap<String, &'a ServiceDescriptorProto>,
    messages: HashMap<String, &'a DescriptorProto>,
    enums: HashMap<String, &'a EnumDescriptorProto>,
}

impl<'a> Index<'a> {
    fn of(set: &'a FileDescriptorSet) -> Index<'a> {
        let mut index = Index { services: HashMap::new(), messages: HashMap::new(), enums: HashMap::new() };
        for file in &set.file {
            let scope = match file.package() {
                "" => String::new(),
                package => format!(".{package}"),
            };
            for service in &file.service {
                index.services.insert(format!("{scope}.{}", service.name()), service);
            }
            for message in &file.message_type {
                index.add_message(&scope, message);
            }
            for enumeration in &file.enum_type {
                index.enums.insert(format!("{scope}.{}", enumeration.name()), enumeration);
            }
        }
        index
    }

    fn add_message(&mut self, scope: &str, message: &'a DescriptorProto) {
        let name = format!("{scope}.{}", message.name());
        for nested in &message.nested_type {
            self.add_message(&name, nested);
        }
        for enumeration in &message.enum_type {
            self.enums.insert(format!("{name}.{}", enumeration.name()), enumeration);
        }
        self.messages.insert(name, message);
    }
}

/// A full name as people write it: without the leading dot.
fn shown(full_name: &str) -> &str {
    full_name.strip_prefix('.').unwrap_or(full_name)
}

fn compare_service(index: &Index<'_>, name: &str, ours: &ServiceDescriptorProto, found: &mut Vec<Drift>) {
    let Some(theirs) = index.services.get(name) else {
        found.push(Drift::new(format!("service {}", shown(name)), "missing upstream"));
        return;
    };
    for method in &ours.method {
        let place = format!("method {}/{}", shown(name), method.name());
        match theirs.method.iter().find(|candidate| candidate.name() == method.name()) {
            None => found.push(Drift::new(place, "missing upstream")),
            Some(upstream) => compare_method(&place, method, upstream, found),
        }
    }
}

fn compare_method(
    place: &str,
    ours: &MethodDescriptorProto,
    theirs: &MethodDescriptorProto,
    found: &mut Vec<Drift>,
) {
    for (what, ours, theirs) in [
        ("input", ours.input_type(), theirs.input_type()),
        ("output", ours.output_type(), theirs.output_type()),
    ] {
        if ours != theirs {
            found.push(Drift::new(place, format!("{what} {} here, {} upstream", shown(ours), shown(theirs))));
        }
    }
    for (what, ours, theirs) in [
        ("client streaming", ours.client_streaming(), theirs.client_streaming()),
        ("server streaming", ours.server_streaming(), theirs.server_streaming()),
    ] {
        if ours != theirs {
            found.push(Drift::new(place, format!("{what} {} here, {} upstream", yes(ours), yes(theirs))));
        }
    }
}

fn yes(flag: bool) -> &'static str {
    if flag { "yes" } else { "no" }
}

fn compare_message(index: &Index<'_>, scope: &str, ours: &DescriptorProto, found: &mut Vec<Drift>) {
    let name = format!("{scope}.{}", ours.name());
    let Some(theirs) = index.messages.get(&name) else {
        found.push(Drift::new(format!("message {}", shown(&name)), "missing upstream"));
        return;
    };
    for field in &ours.field {
        let place = format!("field {}.{}", shown(&name), field.name());
        match theirs.field.iter().find(|candidate| candidate.name() == field.name()) {
            Some(upstream) => compare_field(&place, field, upstream, found),
            None => {
                let taken = theirs.field.iter().find(|candidate| candidate.number() == field.number());
                let problem = match taken {
                    Some(other) => {
                        format!("missing upstream, where number {} is `{}`", field.number(), other.name())
                    }
                    None => "missing upstream".to_string(),
                };
                found.push(Drift::new(place, problem));
            }
        }
    }
    for nested in &ours.nested_type {
        compare_message(index, &name, nested, found);
    }
    for enumeration in &ours.enum_type {
        compare_enum(index, &name, enumeration, found);
    }
}

fn compare_field(
    place: &str,
    ours: &FieldDescriptorProto,
    theirs: &FieldDescriptorProto,
    found: &mut Vec<Drift>,
) {
    if ours.number() != theirs.number() {
        found.push(Drift::new(place, format!("number {} here, {} upstream", ours.number(), theirs.number())));
    }
    if type_of(ours) != type_of(theirs) {
        found.push(Drift::new(place, format!("type {} here, {} upstream", type_of(ours), type_of(theirs))));
    }
    let repeated = |field: &FieldDescriptorProto| field.label() == Label::Repeated;
    if repeated(ours) != repeated(theirs) {
        found.push(Drift::new(
            place,
            format!("repeated {} here, {} upstream", yes(repeated(ours)), yes(repeated(theirs))),
        ));
    }
}

/// A field's type as `.proto` writes it: `uint64`, or the message or enum
/// it names (`machine.VersionInfo`).
fn type_of(field: &FieldDescriptorProto) -> String {
    match field.r#type() {
        Type::Message | Type::Enum | Type::Group => shown(field.type_name()).to_string(),
        scalar => scalar.as_str_name().trim_start_matches("TYPE_").to_lowercase(),
    }
}

fn compare_enum(index: &Index<'_>, scope: &str, ours: &EnumDescriptorProto, found: &mut Vec<Drift>) {
    let name = format!("{scope}.{}", ours.name());
    let Some(theirs) = index.enums.get(&name) else {
        found.push(Drift::new(format!("enum {}", shown(&name)), "missing upstream"));
        return;
    };
    for value in &ours.value {
        let place = format!("enum value {}.{}", shown(&name), value.name());
        match theirs.value.iter().find(|candidate| candidate.name() == value.name()) {
            None => found.push(Drift::new(place, "missing upstream")),
            Some(upstream) if upstream.number() != value.number() => found.push(Drift::new(
                place,
                format!("number {} here, {} upstream", value.number(), upstream.number()),
            )),
            Some(_) => {}
        }
    }
}
