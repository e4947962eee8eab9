//! A minimal W3C WebDriver client over HTTP (reqwest), enough to drive Debian's headless
//! Chromium through `chromedriver`: open pages, find and click elements, type, accept
//! `confirm()` dialogs, read text, take screenshots.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running chromedriver with one browser session; both end on drop.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: Child,
    profile: std::path::PathBuf,
}

impl Browser {
    /// Start chromedriver and a headless Chromium session.
    pub async fn start() -> Browser {
        let driver_bin = super::require_tool(
            "chromedriver",
            "SQLMQ_CHROMEDRIVER",
            "apt-get install -y chromium chromium-driver (bash .ci/run does it)",
        );
        let chromium = super::require_tool(
            "chromium",
            "SQLMQ_CHROMIUM",
            "apt-get install -y chromium chromium-driver (bash .ci/run does it)",
        );
        let port = sqlmq_testkit::free_port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        super::eventually(Duration::from_secs(20), "chromedriver ready", || async {
            let r = http.get(format!("{base}/status")).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            v["value"]["ready"].as_bool().filter(|r| *r)
        })
        .await;
        let profile =
            std::env::temp_dir().join(format!("sqlmq-chromium-{}", rand::random::<u32>()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync", "--no-first-run",
                         "--disable-dev-shm-usage", "--window-size=1280,1600",
                         format!("--user-data-dir={}", profile.display())],
            },
        }}});
        let r: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_owned();
        Browser {
            http,
            base,
            session,
            driver,
            profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        if let Some(err) = v["value"]["error"].as_str() {
            panic!("WebDriver {path}: {err}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    /// Open `url`.
    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The page's HTML.
    pub async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Element ids matching a CSS selector.
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let v = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e[ELEMENT]
                    .as_str()
                    .unwrap_or_else(|| panic!("not an element: {e}"))
                    .to_owned()
            })
            .collect()
    }

    /// The first element matching `css` (fails if none).
    pub async fn find(&self, css: &str) -> String {
        self.find_all(css)
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no element matches {css}"))
    }

    /// The visible text of `css`'s first match.
    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        self.call(reqwest::Method::GET, &format!("/element/{id}/text"), None)
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// The open `confirm()` dialog's text; accepts it.
    pub async fn accept_confirm(&self) -> String {
        let text = super::eventually(Duration::from_secs(5), "a confirm dialog", || async {
            let url = format!("{}/session/{}/alert/text", self.base, self.session);
            let v: Value = self.http.get(url).send().await.ok()?.json().await.ok()?;
            v["value"].as_str().map(str::to_owned)
        })
        .await;
        self.call(reqwest::Method::POST, "/alert/accept", Some(json!({})))
            .await;
        text
    }

    /// Run a script and return its value.
    pub async fn script(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Save a PNG of the whole page (the window is resized to the page's height first).
    pub async fn screenshot(&self, path: &Path) {
        let height = self
            // The content's height (the document is at least as tall as the window).
            .script("var m = document.querySelector('main') || document.body; return Math.min(4000, Math.max(400, Math.ceil(m.getBoundingClientRect().bottom + window.scrollY + 24)))")
            .await
            .as_u64()
            .unwrap_or(1600);
        // Headless windows are capped at the screen's size; device metrics are not.
        let metrics = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": {
            "width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": false}});
        self.call(reqwest::Method::POST, "/goog/cdp/execute", Some(metrics))
            .await;
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let clear = json!({"cmd": "Emulation.clearDeviceMetricsOverride", "params": {}});
        self.call(reqwest::Method::POST, "/goog/cdp/execute", Some(clear))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    pub async fn quit(mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = self.http.delete(url).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
