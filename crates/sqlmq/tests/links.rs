//! The docs' links hold: every relative link of README.md, CHANGELOG.md and the Markdown under
//! docs/ (the user guide, the map, the benchmarks, the design notes) names a file or folder that
//! exists, and a `#fragment` names a heading of its page (as GitHub and mdBook make anchors from
//! headings). The guide's SUMMARY.md lists every page of the guide, and every page it lists
//! exists. Web links (`https://…`) are not fetched: CI has no internet. No database needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every Markdown file the links of which are checked.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![repo().join("README.md"), repo().join("CHANGELOG.md")];
    walk(&repo().join("docs"), &mut docs);
    docs.sort();
    docs
}

/// `text` without fenced code blocks and inline code spans, where `](` is code, not a link.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            // Drop inline code: every other backtick-separated part.
            let plain: String = line
                .split('`')
                .enumerate()
                .filter(|(i, _)| i % 2 == 0)
                .map(|(_, part)| part)
                .collect::<Vec<_>>()
                .join(" ");
            out.push_str(&plain);
        }
        out.push('\n');
    }
    out
}

/// The targets of the Markdown links and images of `text`: `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    for (i, _) in prose.match_indices("](") {
        let rest = &prose[i + 2..];
        if let Some(end) = rest.find(')') {
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_owned());
        }
    }
    out
}

/// The anchor GitHub and mdBook give a heading: lower case, letters, digits, `-` and `_` kept,
/// spaces made `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// What is wrong with `target`, a link of `doc`, if anything.
fn check(doc: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".into());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        doc.to_path_buf()
    } else {
        doc.parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("{target}: no such file"));
    }
    let fragment = fragment?;
    if file.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&file).unwrap();
    (!anchors(&text).contains(fragment)).then(|| format!("{target}: no heading with that anchor"))
}

#[test]
fn every_relative_link_of_the_docs_leads_somewhere() {
    let docs = documents();
    assert!(docs.len() > 30, "found {} documents", docs.len());
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for target in links(&text) {
            checked += 1;
            if let Some(why) = check(doc, &target) {
                let name = doc.strip_prefix(repo()).unwrap_or(doc);
                broken.push(format!("{}: {why}", name.display()));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_guide_s_summary_lists_every_page() {
    let src = repo().join("docs/guide/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let pages: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    assert_eq!(
        listed, pages,
        "SUMMARY.md against the pages in docs/guide/src"
    );
}

#[test]
fn the_checker_finds_broken_links_and_anchors() {
    assert_eq!(
        slug(" `sqlmq serve`: HTTP API, dashboard"),
        "sqlmq-serve-http-api-dashboard"
    );
    assert_eq!(
        slug("TLS to MySQL/MariaDB"),
        "tls-to-mysqlmariadb",
        "as GitHub makes it"
    );
    assert_eq!(
        links("a [b](c.md#d) `[e](f)` ![g](h.png)\n```\n[i](j)\n```\n"),
        ["c.md#d", "h.png"]
    );
    let readme = repo().join("README.md");
    assert!(check(&readme, "docs/ARCHITECTURE.md").is_none());
    assert!(check(&readme, "docs/ARCHITECTURE.md#the-seam").is_none());
    assert!(check(&readme, "docs/ARCHITECTURE.md#no-such-heading").is_some());
    assert!(check(&readme, "docs/NO_SUCH_FILE.md").is_some());
    assert!(check(&readme, "https://example.com/anything").is_none());
}
