//! `docs/api-guide.md`, run as written: every `sh` block, in order, with
//! `bash -euo pipefail` against a fresh server (`CMS` its URL, `TOKEN` the
//! admin's login token, `PASSWORD` the admin's password), in one working
//! directory so that files one block writes are there for the next. Each
//! must exit 0, and where a `text` block follows it, print what that block
//! shows, line by line, with `...` standing for anything.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cms_e2e::{ADMIN_PASSWORD, Server};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The longest one example may run.
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(60);

/// One `sh` block of the guide and the output it shows, if any.
#[derive(Debug)]
struct Example {
    line: usize,
    script: String,
    expected: Option<String>,
}

fn guide_path() -> PathBuf {
    cms_e2e::repository().join("docs/api-guide.md")
}

/// The fenced blocks of a Markdown text: (language, first line number, body,
/// whether only blank lines separate it from the previous block).
fn blocks(markdown: &str) -> Vec<(String, usize, String, bool)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    let mut only_blank_since_last = false;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(language)) => open = Some((language.trim().to_string(), index + 1, String::new())),
            (Some(_), Some(_)) => {
                let (language, start, body) = open.take().expect("a block is open");
                blocks.push((language, start, body, only_blank_since_last));
                only_blank_since_last = true;
            }
            (Some((_, _, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {
                if !trimmed.is_empty() {
                    only_blank_since_last = false;
                }
            }
        }
    }
    assert!(open.is_none(), "docs/api-guide.md has an unclosed code block");
    blocks
}

fn examples(markdown: &str) -> Vec<Example> {
    let blocks = blocks(markdown);
    let mut examples: Vec<Example> = Vec::new();
    for (index, (language, line, body, _)) in blocks.iter().enumerate() {
        if language != "sh" {
            continue;
        }
        let expected = blocks
            .get(index + 1)
            .filter(|(language, _, _, adjacent)| language == "text" && *adjacent)
            .map(|(_, _, body, _)| body.clone());
        examples.push(Example { line: *line, script: body.clone(), expected });
    }
    examples
}

/// Whether `actual` matches `pattern`, where `...` stands for anything.
fn matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Runs one example to completion, killing it after [`EXAMPLE_TIMEOUT`].
#[allow(clippy::disallowed_methods)] // The guide's examples are shell scripts; running them is the test.
fn run(script: &str, dir: &Path, env: &[(&str, String)]) -> Output {
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for variable in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        command.env_remove(variable);
    }
    command.env("NO_PROXY", "*");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("bash runs");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        let _ = stderr.read_to_end(&mut err);
        let status = child.wait().expect("bash is waited for");
        let _ = sender.send(Output { status, stdout: out, stderr: err });
    });
    match receiver.recv_timeout(EXAMPLE_TIMEOUT) {
        Ok(output) => output,
        Err(_) => {
            let _ = kill(pid, Signal::SIGKILL);
            panic!("an example ran longer than {EXAMPLE_TIMEOUT:?}:\n{script}");
        }
    }
}

fn require_tool(tool: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(found, "the API guide's examples need `{tool}` on PATH; install it (the test never skips)");
}

#[test]
fn output_patterns() {
    assert!(matches("201", "201"));
    assert!(!matches("201", "2011"));
    assert!(matches(
        r#"{"error":"...nope...","code":"NotFound"}"#,
        r#"{"error":"tenant nope not found","code":"NotFound"}"#
    ));
    assert!(!matches("a...b", "ab-c"));
    assert!(matches("a...", "a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_of_the_api_guide_runs_as_shown() {
    require_tool("curl");
    require_tool("jq");
    let markdown = std::fs::read_to_string(guide_path()).expect("docs/api-guide.md is readable");
    let examples = examples(&markdown);
    assert!(examples.len() >= 10, "the guide has {} examples", examples.len());
    assert!(
        examples.iter().any(|example| example.script.contains("curl -sS -N --max-time")),
        "a watch example"
    );

    let server = Server::start().await;
    let env = [
        ("CMS", format!("http://{}", server.addr())),
        ("TOKEN", server.api().token().expect("the harness logs in").to_string()),
        ("PASSWORD", ADMIN_PASSWORD.to_string()),
    ];
    let dir = tempfile::tempdir().expect("a working directory");
    for example in &examples {
        let script = example.script.clone();
        let path = dir.path().to_path_buf();
        let env = env.clone();
        let output =
            tokio::task::spawn_blocking(move || run(&script, &path, &env)).await.expect("the example ran");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let context = format!(
            "the example at docs/api-guide.md:{}\n{}\n--- stdout ---\n{stdout}--- stderr ---\n{}",
            example.line,
            example.script,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "failed ({}): {context}\n{}", output.status, server.output());
        let Some(expected) = &example.expected else { continue };
        let actual: Vec<&str> = stdout.lines().map(str::trim_end).collect();
        let wanted: Vec<&str> = expected.lines().map(str::trim_end).collect();
        assert_eq!(actual.len(), wanted.len(), "printed other lines than the guide shows: {context}");
        for (want, got) in wanted.iter().zip(&actual) {
            assert!(matches(want, got), "printed {got:?} where the guide shows {want:?}: {context}");
        }
    }
}
