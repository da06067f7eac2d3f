//! `cms login`, `cms users ...` and `cms tokens ...`.

use std::io::BufRead;

use anyhow::{Context, Result, anyhow};
use cms_model::{ApiToken, ApiTokenSpec, LoginRequest, LoginResponse, ObjectMeta, User, UserRole, UserSpec};
use reqwest::Method;

use crate::cli::{Global, LoginArgs, Output, TokenUser, TokensCommand, UsersCommand};
use crate::client::Client;
use crate::context::{ContextFile, Resolved, SavedContext, login_context_name, path};
use crate::failure::usage;
use crate::get::list_all;
use crate::output::{encode, out, show};

/// `cms login`: exchanges a password for a login token.
pub(crate) fn login(client: &Client, args: &LoginArgs, global: &Global) -> Result<()> {
    let (username, reply) = match &args.username {
        Some(username) if !args.sso => {
            let password = read_password(args.password_stdin, "Password: ")?;
            let request = LoginRequest { username: username.clone(), password };
            let reply: LoginResponse = client.write(Method::POST, "/api/v1/auth/login", &request)?;
            (username.clone(), reply)
        }
        _ => crate::sso::login(client, args)?,
    };
    if args.print {
        return out(&format!("{}\n", reply.token));
    }
    let file_path = path()?;
    let mut file = ContextFile::load(&file_path)?;
    let name = login_context_name(global);
    file.upsert(SavedContext {
        name: name.clone(),
        server: client.server().to_string(),
        user: Some(username.clone()),
        token: Some(reply.token),
        expires_at: Some(reply.expires_at),
    });
    file.save(&file_path)?;
    eprintln!(
        "Logged in to {} as {} (context {name}, saved in {}); the token expires at {}.",
        client.server(),
        username,
        file_path.display(),
        reply.expires_at.to_rfc3339()
    );
    Ok(())
}

/// A password from the terminal without echo, or one line of standard input.
fn read_password(from_stdin: bool, prompt: &str) -> Result<String> {
    let password = if from_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).context("reading the password from standard input")?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else {
        rpassword::prompt_password(prompt)
            .context("reading the password from the terminal; use --password-stdin without one")?
    };
    if password.is_empty() {
        return Err(usage("the password is empty"));
    }
    Ok(password)
}

/// `cms users ...`.
pub(crate) fn users(client: &Client, command: &UsersCommand, format: Output) -> Result<()> {
    match command {
        UsersCommand::Get { name: Some(name) } => {
            let user: User = client.get(&format!("/api/v1/users/{name}"))?;
            show(&[user], format, true)
        }
        UsersCommand::Get { name: None } => show(&list_all::<User>(client, "/api/v1/users")?, format, false),
        UsersCommand::Create { name, role, password_stdin } => {
            let password = read_password(*password_stdin, "Password for the new user: ")?;
            let user = User {
                metadata: ObjectMeta::named(name),
                spec: UserSpec { role: role_of(role)?, password: Some(password) },
                status: Default::default(),
            };
            let created: User = client.write(Method::POST, "/api/v1/users", &with_password(&user)?)?;
            done(&created, "user", "created", format)
        }
        UsersCommand::Update { name, role, password, password_stdin } => {
            if role.is_none() && !password {
                return Err(usage("nothing to change: pass --role, --password or both"));
            }
            let path = format!("/api/v1/users/{name}");
            let mut user: User = client.get(&path)?;
            if let Some(role) = role {
                user.spec.role = role_of(role)?;
            }
            if *password {
                user.spec.password = Some(read_password(*password_stdin, "New password: ")?);
            }
            let updated: User = client.write(Method::PUT, &path, &with_password(&user)?)?;
            done(&updated, "user", "updated", format)
        }
        UsersCommand::Delete { name } => {
            client.delete(&format!("/api/v1/users/{name}"))?;
            out(&format!("user/{name} deleted\n"))
        }
    }
}

/// A user as a request body. The shared type never serializes a password, so
/// that none is ever printed; a request carries it explicitly.
fn with_password(user: &User) -> Result<serde_json::Value> {
    let mut body = serde_json::to_value(user)?;
    if let Some(password) = &user.spec.password {
        body["spec"]["password"] = password.clone().into();
    }
    Ok(body)
}

fn role_of(name: &str) -> Result<Option<UserRole>> {
    UserRole::from_global_name(name)
        .ok_or_else(|| usage(format!("unknown role {name:?}: use admin, edit, view or none")))
}

/// `cms tokens ...`.
pub(crate) fn tokens(
    client: &Client,
    command: &TokensCommand,
    resolved: &Resolved,
    format: Output,
) -> Result<()> {
    match command {
        TokensCommand::Get(user) => {
            let path = format!("/api/v1/users/{}/tokens", token_user(user, resolved)?);
            show(&list_all::<ApiToken>(client, &path)?, format, false)
        }
        TokensCommand::Create { name, expires_in, user } => {
            let path = format!("/api/v1/users/{}/tokens", token_user(user, resolved)?);
            let token = ApiToken {
                metadata: ObjectMeta::named(name),
                spec: ApiTokenSpec { expires_in: expires_in.clone() },
                status: Default::default(),
            };
            let created: ApiToken = client.write(Method::POST, &path, &token)?;
            if matches!(format, Output::Json | Output::Yaml) {
                return out(&encode(&created, format)?);
            }
            let value = created.status.token.ok_or_else(|| anyhow!("the server returned no token value"))?;
            eprintln!("token/{name} created; its value is shown only this once:");
            out(&format!("{value}\n"))
        }
        TokensCommand::Delete { name, user } => {
            client.delete(&format!("/api/v1/users/{}/tokens/{name}", token_user(user, resolved)?))?;
            out(&format!("token/{name} deleted\n"))
        }
    }
}

/// The tokens' owner: `--user`, else the user of the saved login.
fn token_user(user: &TokenUser, resolved: &Resolved) -> Result<String> {
    user.user
        .clone()
        .or_else(|| resolved.user.clone())
        .ok_or_else(|| usage("whose tokens? pass --user NAME (only a saved login knows its user)"))
}

pub(crate) fn done<T: crate::tables::Row>(object: &T, kind: &str, verb: &str, format: Output) -> Result<()> {
    match format {
        Output::Json | Output::Yaml => out(&encode(object, format)?),
        _ => out(&format!("{kind}/{} {verb}\n", object.name())),
    }
}
