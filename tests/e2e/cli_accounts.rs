//! The `cms` client's login and contexts, users, tokens, downloads, version
//! and completions, against the real server.

use std::os::unix::fs::PermissionsExt;

use cms_e2e::Server;
use cms_e2e::cli::Cli;
use cms_e2e::fixtures::{TENANTS, tenant};
use serde_json::{Value, json};

const PASSWORD: &str = "e2e-admin-password\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_contexts_and_precedence() {
    let server = Server::start().await;
    let url = format!("http://{}", server.addr());
    let cli = Cli::bare();

    // --print shows the token and saves nothing.
    let token = cli
        .run_with_input(&["login", "--server", &url, "-u", "admin", "--password-stdin", "--print"], PASSWORD);
    let token = token.ok().trim().to_string();
    assert!(token.len() > 20);
    assert!(!cli.config_path().exists());
    let with_env = Cli::bare().env("CMS_SERVER", &url).env("SERVICE_TOKEN", &token);
    with_env.run(&["get", "tenants"]).expect(0);

    // A saved login: the file is private and the server comes from it.
    let saved = cli.run_with_input(&["login", "--server", &url, "-u", "admin", "--password-stdin"], PASSWORD);
    saved.expect(0);
    assert!(saved.stderr.contains(&format!("Logged in to {url} as admin")), "{saved}");
    let mode = std::fs::metadata(cli.config_path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    cli.run(&["get", "tenants"]).expect(0);
    // The environment beats the context, and flags beat the environment.
    let env_token = cli.env("SERVICE_TOKEN", "not-a-token");
    env_token.run(&["get", "tenants"]).expect(6);
    env_token.run(&["--token", &token, "get", "tenants"]).expect(0);
    let env_server = env_token.env("CMS_SERVER", "http://127.0.0.1:9");
    env_server.run(&["--token", &token, "get", "tenants"]).expect(5);
    env_server.run(&["--token", &token, "--server", &url, "get", "tenants"]).expect(0);

    // A wrong password is refused with the server's message.
    let wrong =
        Cli::bare().run_with_input(&["login", "--server", &url, "-u", "admin", "--password-stdin"], "nope\n");
    wrong.expect(6);
    assert!(wrong.stderr.contains("HTTP 401"), "{wrong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_and_tokens() {
    let server = Server::start().await;
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], PASSWORD).expect(0);

    let created = cli.run_with_input(
        &["users", "create", "dana", "--role", "view", "--password-stdin"],
        "dana-password\n",
    );
    assert_eq!(created.ok(), "user/dana created\n");
    let users = cli.run(&["users", "get"]);
    assert!(users.ok().starts_with("NAME    ROLE    AGE\nadmin   admin   "), "{users}");
    assert!(users.stdout.contains("\ndana    view    "), "{users}");
    assert_eq!(cli.run(&["users", "update", "dana", "--role", "edit"]).ok(), "user/dana updated\n");
    let args = ["users", "update", "dana", "--password", "--password-stdin"];
    cli.run_with_input(&args, "dana-password-2\n").expect(0);
    let dana = json_of(cli.run(&["users", "get", "dana", "-o", "json"]).ok());
    assert_eq!(dana["spec"]["role"], "edit");
    assert!(dana["spec"].get("password").is_none());

    // Dana logs in with the new password, in a context of her own.
    let args = ["--context", "dana", "login", "-u", "dana", "--password-stdin"];
    cli.run_with_input(&args, "dana-password-2\n").expect(0);
    let token = cli.run(&["--context", "dana", "tokens", "create", "ci", "--expires-in", "24h"]);
    let token = token.ok().trim().to_string();
    assert!(token.starts_with("cms_"), "{token}");
    let tokens = cli.run(&["--context", "dana", "tokens", "get"]);
    assert!(tokens.ok().contains("ci     in 23h    never"), "{tokens}");
    let ci = Cli::new(&server).env("SERVICE_TOKEN", &token);
    ci.run(&["get", "tenants"]).expect(0);
    // An edit user may not manage users.
    ci.run(&["users", "get"]).expect(6);
    // Admins see anyone's tokens with --user; a token-only caller must name the user.
    cli.run(&["--context", "default", "tokens", "get", "--user", "dana", "-o", "name"]).expect(0);
    ci.run(&["tokens", "get"]).expect(2);
    assert_eq!(ci.run(&["tokens", "delete", "ci", "--user", "dana"]).ok(), "token/ci deleted\n");
    ci.run(&["get", "tenants"]).expect(6);

    assert_eq!(cli.run(&["--context", "default", "users", "delete", "dana"]).ok(), "user/dana deleted\n");
    cli.run(&["--context", "default", "users", "get", "dana"]).expect(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_version_and_completions() {
    let server = Server::start().await;
    let mut body = tenant("delta");
    body["spec"]["controlPlaneEndpoint"] = json!("https://10.2.0.10:6443");
    server.api().post(TENANTS, &body).await.expect(201);
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], PASSWORD).expect(0);

    assert_eq!(cli.run(&["kubeconfig", "delta"]).ok(), "wrote delta-kubeconfig.yaml\n");
    let file = cli.home().join("delta-kubeconfig.yaml");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let printed = cli.run(&["kubeconfig", "delta", "--ttl", "1h", "-f", "-"]);
    assert!(printed.ok().contains("https://10.2.0.10:6443"), "{printed}");
    cli.run(&["kubeconfig", "delta", "--ttl", "1000h"]).expect(1);

    // --merge keeps the other entries and replaces this tenant's by name.
    let kube = cli.home().join(".kube").join("config");
    std::fs::create_dir_all(kube.parent().unwrap()).unwrap();
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {server: 'https://o:6443'}\n\
                 users:\n- name: o\n  user: {token: x}\ncontexts:\n- name: other\n  context: {cluster: other, user: o}\n\
                 current-context: other\n";
    std::fs::write(&kube, other).unwrap();
    cli.run(&["kubeconfig", "delta", "--merge"]).expect(0);
    cli.run(&["kubeconfig", "delta", "--merge"]).expect(0);
    let merged: Value = serde_saphyr::from_str(&std::fs::read_to_string(&kube).unwrap()).unwrap();
    let names =
        |key: &str| merged[key].as_array().unwrap().iter().map(|e| e["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names("clusters").len(), 2, "{merged}");
    assert_eq!(names("contexts").len(), 2, "{merged}");
    assert_eq!(names("clusters")[0], "other");
    assert_ne!(merged["current-context"], "other");

    assert_eq!(cli.run(&["talosconfig", "delta", "-f", "talos.yaml"]).ok(), "wrote talos.yaml\n");
    let talos: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(cli.home().join("talos.yaml")).unwrap()).unwrap();
    assert!(talos["contexts"].is_object(), "{talos}");
    assert_eq!(cli.run(&["secrets", "delta"]).ok(), "wrote delta-secrets.yaml\n");
    cli.run(&["kubeconfig", "nobody"]).expect(3);

    let version = cli.run(&["version"]);
    assert!(version.ok().starts_with("Client: cms 0.0.0\nServer: http://"), "{version}");
    let both = json_of(cli.run(&["version", "-o", "json"]).ok());
    assert!(both["server"]["gitCommit"].is_string(), "{both}");
    assert!(Cli::bare().run(&["version", "--client"]).ok().starts_with("Client: cms "));
    for shell in ["bash", "zsh", "fish"] {
        let script = cli.run(&["completion", shell]);
        assert!(script.ok().contains("kubeconfig"), "{shell}: {script}");
    }
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}
