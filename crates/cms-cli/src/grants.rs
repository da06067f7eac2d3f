//! `cms create grant NAME --role R ...`: a grant from flags. Grants are
//! also read with `cms get grants`, changed with `cms apply -f` or
//! `cms edit grant NAME`, and removed with `cms delete grant NAME`.

use anyhow::Result;
use cms_model::{Grant, GrantSpec, ObjectMeta, Subject, SubjectKind, TenantSet, UserRole};
use reqwest::Method;

use crate::accounts::done;
use crate::cli::{CreateGrantArgs, Output};
use crate::client::Client;
use crate::failure::usage;

/// The grant the flags describe; checked with the server's own rules
/// before it is sent.
pub(crate) fn grant(args: &CreateGrantArgs) -> Result<Grant> {
    let role = UserRole::from_name(&args.role)
        .ok_or_else(|| usage(format!("unknown role {:?}: use view or edit", args.role)))?;
    let subjects = [
        (SubjectKind::User, &args.users),
        (SubjectKind::Group, &args.groups),
        (SubjectKind::Workload, &args.workloads),
    ]
    .into_iter()
    .flat_map(|(kind, names)| names.iter().map(move |name| Subject { kind, name: name.clone() }))
    .collect();
    let tenants = TenantSet { names: args.tenants.clone(), selector: args.selector.clone() };
    let spec = GrantSpec { role, subjects, tenants };
    if let Some(message) = spec.refused_role() {
        return Err(usage(message));
    }
    spec.validate().map_err(|err| {
        let hint = match err.field.as_str() {
            "spec.subjects" => " (pass --user, --group or --workload)",
            "spec.tenants" => " (pass --tenant or --selector)",
            _ => "",
        };
        usage(format!("{err}{hint}"))
    })?;
    Ok(Grant { metadata: ObjectMeta::named(&args.name), spec, status: Default::default() })
}

/// `cms create grant`.
pub(crate) fn create(client: &Client, args: &CreateGrantArgs, format: Output) -> Result<()> {
    let grant = grant(args)?;
    let created: Grant = client.write(Method::POST, "/api/v1/grants", &grant)?;
    done(&created, "grant", "created", format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flags: &[&str]) -> CreateGrantArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: CreateGrantArgs,
        }
        let mut argv = vec!["cms", "a-devs"];
        argv.extend_from_slice(flags);
        Wrapper::try_parse_from(argv).expect("flags parse").args
    }

    #[test]
    fn flags_make_the_grant() {
        let grant =
            grant(&args(&["--role", "edit", "--group", "a-devs", "--user", "alice", "--selector", "team=a"]))
                .unwrap();
        let json = serde_json::to_value(&grant).unwrap();
        assert_eq!(
            json["spec"],
            serde_json::json!({"role": "edit", "subjects": [{"kind": "User", "name": "alice"},
                {"kind": "Group", "name": "a-devs"}], "tenants": {"selector": "team=a"}})
        );
        assert_eq!(json["metadata"]["name"], "a-devs");
    }

    #[test]
    fn a_grant_needs_subjects_and_tenants() {
        let message = |flags: &[&str]| grant(&args(flags)).unwrap_err().to_string();
        assert!(message(&["--role", "view", "--tenant", "x"]).contains("--group"));
        assert!(message(&["--role", "view", "--group", "g"]).contains("--selector"));
        assert!(message(&["--role", "view", "--group", "g", "--selector", "team in ("]).contains("selector"));
    }
}
