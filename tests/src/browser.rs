//! A real browser for the web console's tests: headless Chromium driven by
//! `chromedriver` over WebDriver, with waits that poll up to a deadline,
//! same-origin `fetch` from the page, PNG screenshots, and accessibility
//! checks with a vendored axe-core.
//!
//! Chromium and chromedriver are the distribution's packages, which `.ci/run`
//! installs; nothing downloads a browser at test time, and a missing one fails
//! the test, it is never skipped. Each [`Browser`] runs its own chromedriver
//! in a process group of its own, with its own scratch directory for the
//! browser profile; dropping it kills the group (chromedriver and every
//! Chromium process) and removes the directory.

use std::fmt;
use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tokio::sync::mpsc;

/// How long the `wait_*` helpers poll before they fail the test: generous,
/// for a loaded machine, since a wait returns as soon as its condition holds.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(20);
/// The size of the browser's viewport, fixed so that screenshots are comparable.
pub const WINDOW_SIZE: (u32, u32) = (1280, 900);
/// The axe-core release vendored under `tests/assets/axe-core`.
pub const AXE_VERSION: &str = "4.14.1";

/// The SHA-256 of `tests/assets/axe-core/axe.min.js`, as its README records.
const AXE_SHA256: &str = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c";
/// The distribution's Chromium, the only browser the tests run.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The WebDriver server, found on `PATH`.
const CHROMEDRIVER: &str = "chromedriver";
/// How long chromedriver may take to print the port it listens on.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long creating the WebDriver session (starting Chromium) may take.
const SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one page load or one script may take inside the browser.
const PAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one WebDriver command may take, seen from the test.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(45);
/// The interval between two probes of a wait.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// What a missing browser tells the reader to do.
const INSTALL_HINT: &str = "the console's browser tests need Debian's `chromium` and `chromium-driver` \
     packages, which `bash .ci/run` installs when they are missing \
     (`apt-get install -y --no-install-recommends chromium chromium-driver`)";

/// Headless Chromium under a chromedriver of its own. Dropping it kills both.
#[derive(Debug)]
pub struct Browser {
    client: Client,
    driver: Driver,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session in
    /// headless Chromium with a fixed window size. Fails the test, with
    /// chromedriver's output, when either cannot start in time.
    pub async fn start() -> Browser {
        assert!(Path::new(CHROMIUM).is_file(), "{CHROMIUM} does not exist: {INSTALL_HINT}");
        let driver = Driver::start().await;
        let profile = driver.scratch.path().join("profile");
        let (width, height) = WINDOW_SIZE;
        let options = json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                format!("--window-size={width},{height}"),
                format!("--user-data-dir={}", profile.display()),
                "--force-device-scale-factor=1",
                "--hide-scrollbars",
                "--lang=en-US",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-extensions",
            ],
        });
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).expect("a short duration");
        let mut capabilities = fantoccini::wd::Capabilities::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), options);
        capabilities.insert(
            "timeouts".into(),
            json!({"implicit": 0, "pageLoad": millis(PAGE_TIMEOUT), "script": millis(PAGE_TIMEOUT)}),
        );
        let url = format!("http://127.0.0.1:{}", driver.port);
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        let client = match tokio::time::timeout(SESSION_TIMEOUT, builder.connect(&url)).await {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => panic!("chromedriver did not start Chromium: {err}\n{}", driver.output()),
            Err(_) => panic!("Chromium did not start within {SESSION_TIMEOUT:?}\n{}", driver.output()),
        };
        let browser = Browser { client, driver };
        browser.fit_viewport().await;
        browser
    }

    /// Resizes the window so that the page's viewport, not the window with
    /// its frame, is [`WINDOW_SIZE`]: what screenshots show and what the
    /// page lays out for.
    async fn fit_viewport(&self) {
        const FRAME: &str =
            "return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]";
        let frame = self.execute(FRAME, Vec::new()).await;
        let extra =
            |index: usize| frame[index].as_u64().and_then(|value| u32::try_from(value).ok()).unwrap_or(0);
        let (width, height) = WINDOW_SIZE;
        let resize = self.client.set_window_size(width + extra(0), height + extra(1));
        self.command("resize the window", resize).await;
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Loads `url` and waits for the page's load event.
    pub async fn goto(&self, url: &str) {
        self.command(&format!("open {url}"), self.client.goto(url)).await;
    }

    /// Loads the current page again.
    pub async fn reload(&self) {
        self.command("reload the page", self.client.refresh()).await;
    }

    /// The current page's path and query, such as `/tenants?x=1`.
    pub async fn path(&self) -> String {
        let url = self.command("read the current URL", self.client.current_url()).await;
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// The first element matching the CSS `selector`, waiting for it to appear.
    pub async fn find(&self, selector: &str) -> Element {
        let client = &self.client;
        self.wait_until(&format!("an element matches `{selector}`"), move || async move {
            client.find(Locator::Css(selector)).await.ok()
        })
        .await
    }

    /// Every element matching `selector` now, without waiting.
    pub async fn find_all(&self, selector: &str) -> Vec<Element> {
        self.command(&format!("find `{selector}`"), self.client.find_all(Locator::Css(selector))).await
    }

    /// Whether an element matches `selector` now, without waiting.
    pub async fn exists(&self, selector: &str) -> bool {
        !self.find_all(selector).await.is_empty()
    }

    /// The rendered text of the first element matching `selector`.
    pub async fn text(&self, selector: &str) -> String {
        let element = self.find(selector).await;
        self.command(&format!("read the text of `{selector}`"), element.text()).await
    }

    /// The attribute `name` of the first element matching `selector`.
    pub async fn attr(&self, selector: &str, name: &str) -> Option<String> {
        let element = self.find(selector).await;
        self.command(&format!("read {name} of `{selector}`"), element.attr(name)).await
    }

    /// Replaces the value of the field matching `selector` by typing `value`.
    pub async fn fill(&self, selector: &str, value: &str) {
        let field = self.find(selector).await;
        self.command(&format!("clear `{selector}`"), field.clear()).await;
        self.command(&format!("type into `{selector}`"), field.send_keys(value)).await;
    }

    /// Chooses the option whose value is `value` in the select matching `selector`.
    pub async fn select(&self, selector: &str, value: &str) {
        let field = self.find(selector).await;
        self.command(&format!("choose {value} in `{selector}`"), field.select_by_value(value)).await;
    }

    /// Clicks the element matching `selector`.
    pub async fn click(&self, selector: &str) {
        let element = self.find(selector).await;
        self.command(&format!("click `{selector}`"), element.click()).await;
    }

    /// Submits the form matching `selector` as a user would: by clicking its
    /// first submit button, so that the browser's own validation runs.
    pub async fn submit(&self, selector: &str) {
        self.click(&format!("{selector} [type=submit]")).await;
    }

    /// Polls `probe` until it returns `Some`, for at most [`WAIT_TIMEOUT`];
    /// then fails the test, saying that `what` never happened and showing the
    /// page. A wait is the only way to expect a change: never a fixed sleep.
    pub async fn wait_until<T, F, Fut>(&self, what: &str, probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        self.wait_within(WAIT_TIMEOUT, what, probe).await
    }

    /// [`Browser::wait_until`] with a limit other than [`WAIT_TIMEOUT`].
    pub async fn wait_within<T, F, Fut>(&self, limit: Duration, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Ok(Some(value)) = tokio::time::timeout_at(deadline, probe()).await {
                return value;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("waited {limit:?} in vain until {what}\n{}", self.describe().await);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Waits until the current path (with its query) is `path`.
    pub async fn wait_for_path(&self, path: &str) {
        self.wait_until(&format!("the browser is at {path}"), || async {
            (self.path().await == path).then_some(())
        })
        .await;
    }

    /// Waits until the first element matching `selector` shows `needle` in
    /// its text, and returns that text.
    pub async fn wait_for_text(&self, selector: &str, needle: &str) -> String {
        let client = &self.client;
        self.wait_until(&format!("`{selector}` shows {needle:?}"), move || async move {
            let text = client.find(Locator::Css(selector)).await.ok()?.text().await.ok()?;
            text.contains(needle).then_some(text)
        })
        .await
    }

    /// Waits until no element matches `selector`.
    pub async fn wait_gone(&self, selector: &str) {
        let client = &self.client;
        self.wait_until(&format!("nothing matches `{selector}`"), move || async move {
            client.find_all(Locator::Css(selector)).await.ok().filter(Vec::is_empty).map(drop)
        })
        .await;
    }

    /// Runs `script` as the body of a function in the page, with `args` as
    /// `arguments`, and returns what it returns. WebDriver's scripts are not
    /// subject to the page's Content-Security-Policy.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.command("run a script", self.client.execute(script, args)).await
    }

    /// Runs `script` with a callback as its last argument, and returns what
    /// it passes to the callback.
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.command("run an asynchronous script", self.client.execute_async(script, args)).await
    }

    /// Sends a request with `fetch` from the current page, so with its
    /// origin and its cookies, as the console's own scripts would.
    pub async fn fetch(&self, request: Fetch<'_>) -> Fetched {
        const SCRIPT: &str = "const [method, path, headers, body, done] = arguments;
            fetch(path, {method, headers, body, credentials: 'same-origin', redirect: 'manual'})
              .then(async (reply) => done({status: reply.status, body: await reply.text(),
                contentType: reply.headers.get('content-type')}))
              .catch((error) => done({error: String(error)}));";
        let headers: serde_json::Map<String, Value> =
            request.headers.iter().map(|(name, value)| ((*name).to_string(), json!(value))).collect();
        let args =
            vec![json!(request.method), json!(request.path), Value::Object(headers), json!(request.body)];
        let reply = self.execute_async(SCRIPT, args).await;
        if let Some(error) = reply.get("error") {
            panic!("fetch {} {} failed in the page: {error}", request.method, request.path);
        }
        Fetched {
            status: reply["status"].as_u64().and_then(|status| u16::try_from(status).ok()).expect("a status"),
            body: reply["body"].as_str().expect("a body").to_string(),
            content_type: reply["contentType"].as_str().map(str::to_string),
        }
    }

    /// Writes a PNG of the window to `path`, creating its folder.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.command("take a screenshot", self.client.screenshot()).await;
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is not a PNG");
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .unwrap_or_else(|err| panic!("cannot create {}: {err}", folder.display()));
        }
        std::fs::write(path, png).unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    }

    /// The serious and critical accessibility violations of the current page.
    pub async fn axe(&self) -> Vec<Violation> {
        axe(&self.client).await
    }

    /// Fails the test, listing them, when the current page has serious or
    /// critical accessibility violations; `page` names it in the message.
    pub async fn assert_accessible(&self, page: &str) {
        let violations = self.axe().await;
        let listed: Vec<String> = violations.iter().map(|violation| format!("  - {violation}")).collect();
        assert!(
            violations.is_empty(),
            "axe-core {AXE_VERSION} finds {} serious or critical violation(s) on {page} ({}):\n{}",
            violations.len(),
            self.path().await,
            listed.join("\n")
        );
    }

    /// Ends the WebDriver session, which closes Chromium, then stops chromedriver.
    pub async fn close(self) {
        let Browser { client, driver } = self;
        let _ = tokio::time::timeout(COMMAND_TIMEOUT, client.close()).await;
        drop(driver);
    }

    /// Awaits one WebDriver command, failing the test when it errs or hangs.
    async fn command<T>(
        &self,
        what: &str,
        command: impl Future<Output = Result<T, fantoccini::error::CmdError>>,
    ) -> T {
        match tokio::time::timeout(COMMAND_TIMEOUT, command).await {
            Ok(Ok(value)) => value,
            Ok(Err(err)) => panic!("the browser could not {what}: {err}\n{}", self.describe().await),
            Err(_) => {
                panic!("the browser did not {what} within {COMMAND_TIMEOUT:?}\n{}", self.driver.output())
            }
        }
    }

    /// The current URL and the page's text, for a failure message.
    async fn describe(&self) -> String {
        const SCRIPT: &str =
            "return document.body ? document.body.innerText : document.documentElement.outerHTML";
        let probe = async {
            let url = self.client.current_url().await.map(|url| url.to_string()).unwrap_or_default();
            let text = self.client.execute(SCRIPT, Vec::new()).await.unwrap_or_default();
            (url, text.as_str().unwrap_or_default().chars().take(2000).collect::<String>())
        };
        match tokio::time::timeout(Duration::from_secs(5), probe).await {
            Ok((url, text)) => format!("--- page at {url} ---\n{text}\n--- end of page ---"),
            Err(_) => "(the page could not be read)".to_string(),
        }
    }
}

/// A request sent by [`Browser::fetch`] from the page.
#[derive(Debug, Clone, Copy)]
pub struct Fetch<'a> {
    /// The method, such as `GET` or `POST`.
    pub method: &'a str,
    /// The path on the page's origin, such as `/tenants`.
    pub path: &'a str,
    /// Extra request headers.
    pub headers: &'a [(&'a str, &'a str)],
    /// The request body, if any.
    pub body: Option<&'a str>,
}

impl<'a> Fetch<'a> {
    /// A `GET` of `path`.
    pub fn get(path: &'a str) -> Fetch<'a> {
        Fetch { method: "GET", path, headers: &[], body: None }
    }

    /// A `POST` of the URL-encoded form `body` to `path`, as a form would send it.
    pub fn post_form(path: &'a str, body: &'a str) -> Fetch<'a> {
        const FORM: &[(&str, &str)] = &[("content-type", "application/x-www-form-urlencoded")];
        Fetch { method: "POST", path, headers: FORM, body: Some(body) }
    }
}

/// The reply to a [`Fetch`]. Redirects are not followed: a redirect's status
/// reads 0, as `fetch` reports an opaque redirect.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
    /// The `content-type` header, if any.
    pub content_type: Option<String>,
}

/// One accessibility rule that a page breaks, as axe-core reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule, such as `color-contrast`.
    pub id: String,
    /// `serious` or `critical`.
    pub impact: String,
    /// What the rule asks for.
    pub help: String,
    /// CSS selectors of the offending elements.
    pub targets: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}, at {}", self.id, self.impact, self.help, self.targets.join(", "))
    }
}

/// Runs the vendored axe-core on the current page of `client` (injecting it
/// when the page does not have it yet) and returns its violations of impact
/// `serious` or `critical`. The script is checked against its recorded
/// SHA-256 first.
pub async fn axe(client: &Client) -> Vec<Violation> {
    const RUN: &str = "const done = arguments[arguments.length - 1];
        window.axe.run(document, {resultTypes: ['violations']})
          .then((results) => done({violations: results.violations
            .filter((rule) => rule.impact === 'serious' || rule.impact === 'critical')
            .map((rule) => ({id: rule.id, impact: rule.impact, help: rule.help,
              targets: rule.nodes.map((node) => node.target.flat(Infinity).join(' '))}))}))
          .catch((error) => done({error: String(error)}));";
    let present = client.execute("return window.axe ? window.axe.version : null", Vec::new()).await;
    if present.ok().as_ref().and_then(Value::as_str) != Some(AXE_VERSION) {
        let script = format!("{}\nreturn window.axe ? window.axe.version : null;", axe_source());
        let version = client
            .execute(&script, Vec::new())
            .await
            .unwrap_or_else(|err| panic!("axe-core could not be injected: {err}"));
        assert_eq!(version.as_str(), Some(AXE_VERSION), "axe-core did not load into the page");
    }
    let reply = tokio::time::timeout(COMMAND_TIMEOUT, client.execute_async(RUN, Vec::new()))
        .await
        .unwrap_or_else(|_| panic!("axe-core did not finish within {COMMAND_TIMEOUT:?}"))
        .unwrap_or_else(|err| panic!("axe-core could not run: {err}"));
    if let Some(error) = reply.get("error") {
        panic!("axe-core failed in the page: {error}");
    }
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    reply["violations"]
        .as_array()
        .expect("axe-core reports a list of violations")
        .iter()
        .map(|rule| Violation {
            id: text(&rule["id"]),
            impact: text(&rule["impact"]),
            help: text(&rule["help"]),
            targets: rule["targets"].as_array().into_iter().flatten().map(text).collect(),
        })
        .collect()
}

/// The vendored `axe.min.js`, read once and checked against [`AXE_SHA256`].
fn axe_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = axe_path();
        let bytes =
            std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let digest = format!("{:x}", Sha256::digest(&bytes));
        assert_eq!(
            digest,
            AXE_SHA256,
            "{} is not the vendored axe-core {AXE_VERSION}: its SHA-256 differs from the one recorded \
             in tests/assets/axe-core/README.md; restore the file or vendor a release anew",
            path.display()
        );
        String::from_utf8(bytes).expect("axe.min.js is UTF-8")
    })
}

/// Where the vendored axe-core lives in this checkout.
fn axe_path() -> PathBuf {
    crate::repository().join("tests/assets/axe-core/axe.min.js")
}

/// A chromedriver process, in a process group of its own so that killing the
/// group also kills the Chromium it started; its scratch directory holds the
/// browser profile and temporary files, and goes with it.
#[derive(Debug)]
struct Driver {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    scratch: TempDir,
}

impl Driver {
    async fn start() -> Driver {
        let scratch =
            tempfile::Builder::new().prefix("cms-e2e-browser-").tempdir().expect("a temporary directory");
        let mut child = spawn_chromedriver(scratch.path());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        pump(child.stdout.take().expect("stdout is piped"), log.clone(), Some(lines_tx));
        pump(child.stderr.take().expect("stderr is piped"), log.clone(), None);
        let mut driver = Driver { child, port: 0, log, scratch };
        let deadline = tokio::time::Instant::now() + DRIVER_START_TIMEOUT;
        driver.port = loop {
            match tokio::time::timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => {
                    if let Some(port) = parse_started(&line) {
                        break port;
                    }
                }
                Ok(None) => {
                    let status = driver.child.wait();
                    panic!("chromedriver exited ({status:?}) before it listened\n{}", driver.output());
                }
                Err(_) => panic!(
                    "chromedriver did not say it listened within {DRIVER_START_TIMEOUT:?}\n{}",
                    driver.output()
                ),
            }
        };
        driver
    }

    /// Everything chromedriver printed so far.
    fn output(&self) -> String {
        let lines = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        format!("--- chromedriver output ---\n{}\n--- end of chromedriver output ---", lines.join("\n"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Starts chromedriver on a free port that the system picks (it prints the
/// port; it accepts local connections only), in a new process group, with `scratch` as `TMPDIR`
/// so that whatever Chromium leaves behind is removed with it.
#[allow(clippy::disallowed_methods)] // The console's tests drive a real browser through chromedriver, its own process.
fn spawn_chromedriver(scratch: &Path) -> Child {
    Command::new(CHROMEDRIVER)
        .arg("--port=0")
        .env("TMPDIR", scratch)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| match err.kind() {
            std::io::ErrorKind::NotFound => panic!("{CHROMEDRIVER} is not on PATH: {INSTALL_HINT}"),
            _ => panic!("cannot start {CHROMEDRIVER}: {err}"),
        })
}

/// Copies a pipe of chromedriver, line by line, into the log and the channel.
fn pump(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<Vec<String>>>,
    lines: Option<mpsc::UnboundedSender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line.clone());
            if let Some(lines) = &lines {
                let _ = lines.send(line);
            }
        }
    });
}

/// The port in chromedriver's `ChromeDriver was started successfully on port N.`
fn parse_started(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once("started successfully on port ")?;
    rest.trim_end().trim_end_matches('.').parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_started;

    #[test]
    fn the_port_is_read_from_chromedrivers_banner() {
        assert_eq!(parse_started("ChromeDriver was started successfully on port 45011."), Some(45011));
        assert_eq!(parse_started("Starting ChromeDriver 156.0 on port 0"), None);
        assert_eq!(parse_started("Only local connections are allowed."), None);
    }
}
