//! The page shell: navigation, styles, the flash message, and the auto-refresh with its pause
//! toggle (the only script: a reload timer whose state is kept in `localStorage`).

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::Access;

/// Seconds between automatic reloads.
pub const REFRESH_SECS: u32 = 5;

const STYLE: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff;margin-right:12px}
header .right{margin-left:auto;display:flex;gap:10px;align-items:center}
main{padding:16px;max-width:1300px}
h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:8px}
th,td{padding:5px 8px;border-bottom:1px solid #e3e6ec;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{background:#fff;border:1px solid #e3e6ec;padding:8px 14px;min-width:90px}
.card b{display:block;font-size:22px}.muted{color:#6b7386}.err{color:#b3261e}
.flash{background:#e7f5ea;border:1px solid #9ad3a6;padding:6px 10px;margin-bottom:10px}
.alert{background:#fdecea;border:1px solid #f1aaa4;padding:6px 10px;margin:4px 0}
form.inline{display:inline}button{cursor:pointer}button.danger{color:#b3261e}
.row{display:flex;gap:16px;flex-wrap:wrap}.row>div{flex:1;min-width:380px}
pre{white-space:pre-wrap;word-break:break-all;margin:0;max-width:520px}
svg{background:#fff;border:1px solid #e3e6ec}.badge{padding:1px 6px;border-radius:8px;background:#eef0f4;color:#1d2330}
.nowrap{white-space:nowrap}
.progress{display:flex;height:14px;max-width:640px;background:#e3ecfc;border:1px solid #c8cdd8;margin-top:12px}
.progress span{display:block;height:100%}
ol.timeline{list-style:none;padding:0;margin:0;max-width:900px;border-left:3px solid #c8cdd8}
ol.timeline li{background:#fff;border:1px solid #e3e6ec;margin:0 0 6px 12px;padding:6px 10px;position:relative}
ol.timeline li:before{content:"";position:absolute;left:-20px;top:10px;width:11px;height:11px;border-radius:6px;background:#2e7d32}
ol.timeline li.waiting:before{background:#f9a825}ol.timeline li.timed-out:before{background:#b3261e}
ol.timeline li.muted:before{background:#c8cdd8}
.waiting b{color:#8a5a00}
"#;

const SCRIPT: &str = r#"
(function(){
  var key='sqlmq-refresh-paused', b=document.getElementById('refresh');
  function paused(){return localStorage.getItem(key)==='1'}
  function show(){b.textContent=paused()?'Resume auto-refresh':'Pause auto-refresh'}
  b.onclick=function(){localStorage.setItem(key,paused()?'0':'1');show()};
  show();
  setInterval(function(){
    var typing=document.activeElement&&['INPUT','SELECT','TEXTAREA'].indexOf(document.activeElement.tagName)>=0;
    if(!paused()&&!typing){location.reload()}
  }, REFRESH*1000);
})();
"#;

/// Which navigation entry is highlighted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Processes,
    Schedules,
    Events,
    Alerts,
    None,
}

/// What surrounds every page: the read-only badge, the flash message, the sign-out button.
pub struct Chrome<'a> {
    pub access: Access,
    pub flash: Option<&'a str>,
    pub signed_in: bool,
}

impl Default for Chrome<'_> {
    /// An anonymous visitor (login and error pages).
    fn default() -> Self {
        Chrome {
            access: Access::Read,
            flash: None,
            signed_in: false,
        }
    }
}

/// A whole page.
pub fn page(title: &str, nav: Nav, chrome: Chrome<'_>, body: Markup) -> Markup {
    let Chrome {
        access,
        flash,
        signed_in,
    } = chrome;
    let link = |href: &str, label: &str, this: Nav| {
        html! { a href=(href) class=[(nav == this).then_some("on")] { (label) } }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · sqlmq" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    span.brand { "sqlmq" }
                    (link("/", "Overview", Nav::Overview))
                    (link("/processes", "Processes", Nav::Processes))
                    (link("/schedules", "Schedules", Nav::Schedules))
                    (link("/events", "Events", Nav::Events))
                    (link("/alerts", "Alerts", Nav::Alerts))
                    div.right {
                        @if !access.can_write() { span.badge #read-only { "read-only" } }
                        button #refresh type="button" { "Pause auto-refresh" }
                        @if signed_in {
                            form.inline method="post" action="/logout" { button #sign-out type="submit" { "Sign out" } }
                        }
                    }
                }
                main {
                    @if let Some(text) = flash { div.flash #flash { (text) } }
                    (body)
                }
                script { (PreEscaped(SCRIPT.replace("REFRESH", &REFRESH_SECS.to_string()))) }
            }
        }
    }
}

/// A POST button for an action, asking for confirmation first when `confirm` is given.
pub fn action(path: &str, label: &str, confirm: Option<&str>, fields: &[(&str, &str)]) -> Markup {
    let onsubmit = confirm.map(|c| format!("return confirm({})", js_string(c)));
    html! {
        form.inline method="post" action=(path) onsubmit=[onsubmit] {
            @for (k, v) in fields { input type="hidden" name=(k) value=(v); }
            button type="submit" class=[confirm.is_some().then_some("danger")] { (label) }
        }
    }
}

/// A JavaScript string literal (for `confirm(…)` in an attribute; maud escapes the attribute).
fn js_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"Are you sure?\"".to_owned())
}

/// Milliseconds as a short human duration (`1h 2m`, `3s`, `250ms`).
pub fn age(ms: Option<u64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) => {
            let d = std::time::Duration::from_secs(ms / 1000);
            let text = humantime::format_duration(d).to_string();
            text.split(' ').take(2).collect::<Vec<_>>().join(" ")
        }
    }
}

/// A body for display: text, or `<N bytes>` for binary.
pub fn preview(body: &Option<String>, b64: &Option<String>) -> String {
    match (body, b64) {
        (Some(t), _) if t.chars().count() > 300 => {
            format!("{}…", t.chars().take(300).collect::<String>())
        }
        (Some(t), _) => t.clone(),
        (None, Some(b)) => format!("<{} bytes of binary>", b.len() * 3 / 4),
        _ => String::new(),
    }
}

/// URL-encode a path segment or query value.
pub fn enc(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
