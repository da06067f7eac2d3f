//! The README's walkthrough, run line by line with the real `cms` binary: the
//! commands between the `cli-walkthrough` markers are read from README.md, so
//! the README cannot drift from what this test runs.
//!
//! The liberties taken: the server listens on a free port, which replaces
//! `localhost:8080`; the harness's already built binaries stand in for
//! `cargo run` and `cargo install`; and since the harness starts every server
//! with its own first-admin password, the README's is set through the API.

use std::path::PathBuf;

use cms_e2e::Server;
use cms_e2e::cli::Cli;
use serde_json::{Value, json};

fn repository() -> PathBuf {
    cms_e2e::repository()
}

/// The shell lines of the walkthrough, without comments.
fn walkthrough() -> Vec<String> {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md is readable");
    let start = readme.find("<!-- cli-walkthrough:start -->").expect("the walkthrough's start marker");
    let end = readme.find("<!-- cli-walkthrough:end -->").expect("the walkthrough's end marker");
    readme[start..end]
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with('#')
                && !line.starts_with("```")
                && !line.starts_with("<!--")
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walkthrough_runs_as_written() {
    let lines = walkthrough();
    let start = &lines[0];
    let password = start
        .strip_prefix("CMS_BOOTSTRAP_ADMIN_PASSWORD=")
        .and_then(|rest| rest.strip_suffix(" cargo run --release -p cms-server"))
        .unwrap_or_else(|| panic!("the walkthrough starts the server, not `{start}`"));
    let server = Server::start().await;
    let admin = server.api().get("/api/v1/users/admin").await.expect(200);
    let body = json!({"metadata": admin["metadata"], "spec": {"role": "admin", "password": password}});
    server.api().put("/api/v1/users/admin", &body).await.expect(200);
    let url = format!("http://{}", server.addr());

    // The client names no server but the one the walkthrough logs in to.
    let cli = Cli::bare();
    // The example file, at the path the walkthrough names from the repository's root.
    let example = "docs/examples/demo.yaml";
    let target = cli.home().join(example);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(repository().join(example), target).expect("the example file exists");
    let mut ran = Vec::new();
    for line in &lines[1..] {
        if line.starts_with("cargo install --path crates/cms-cli") {
            continue;
        }
        let line = line.replace("http://localhost:8080", &url);
        let (input, command) = match line.split_once(" | ") {
            Some((echo, command)) => {
                let text =
                    echo.strip_prefix("echo ").unwrap_or_else(|| panic!("unexpected pipe in `{line}`"));
                (format!("{text}\n"), command.to_string())
            }
            None => (String::new(), line.clone()),
        };
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args[0], "cms", "every walkthrough step after the first runs cms: `{line}`");
        let run = cli.run_with_input(&args[1..], &input);
        run.expect(0);
        ran.push((args[1].to_string(), run));
    }
    let steps: Vec<&str> = ran.iter().map(|(step, _)| step.as_str()).collect();
    assert_eq!(steps, ["login", "apply", "get", "wait", "kubeconfig"]);

    assert!(cli.config_path().is_file(), "login saved a context");
    let applied = &ran[1].1.stdout;
    assert_eq!(applied, "tenant/demo created\nnodegroup/cp created\nconfigpatch/sysctls created\n");
    assert!(ran[2].1.stdout.starts_with("NAME "), "{}", ran[2].1);
    assert!(ran[2].1.stdout.contains("\ndemo "), "{}", ran[2].1);
    assert_eq!(ran[3].1.stdout, "tenant/demo condition met\n");
    let kubeconfig =
        std::fs::read_to_string(cli.home().join("demo-kubeconfig.yaml")).expect("the kubeconfig");
    let parsed: Value = serde_saphyr::from_str(&kubeconfig).unwrap();
    assert_eq!(parsed["clusters"][0]["cluster"]["server"], "https://10.0.0.10:6443");

    // What the client did is what the API shows.
    let tenant = server.api().get("/api/v1/tenants/demo").await.expect(200);
    assert_eq!(tenant["spec"]["nodeGroups"][0]["name"], "cp");
    assert_eq!(tenant["status"]["conditions"][0]["status"], "True");
}
