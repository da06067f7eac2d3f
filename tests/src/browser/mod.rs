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

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long the `wait_*` helpers poll before they fail the test: generous,
/// for a loaded machine, since a wait returns as soon as its condition holds.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(20);
/// The size of the browser's viewport, fixed so that screenshots are comparable.
pub const WINDOW_SIZE: (u32, u32) = (1280, 900);

/// The distribution's Chromium, the only browser the tests run.
const CHROMIUM: &str = "/usr/bin/chromium";
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

mod axe;
mod driver;

pub use axe::{AXE_VERSION, Violation, axe};
use driver::Driver;
