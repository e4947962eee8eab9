//! The map stays true: every file or folder that docs/ARCHITECTURE.md, the design notes under
//! docs/design/ and the module headers (`//!` lines of every crate's sources) name exists. A
//! name is a backticked path (`store/body/keys.rs`, `tests/conformance/`) or a file named in
//! the layout tree of ARCHITECTURE. No database needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Extensions of the files the docs name.
const EXTENSIONS: &[&str] = &["rs", "sql", "md", "py", "pyi", "sh", "toml", "ts", "yml"];

/// Whether a backticked text names a file or a folder.
fn is_path(text: &str) -> bool {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-*".contains(c))
        && !text.starts_with('.')
        && !text.starts_with('-')
        && !text.contains("..")
        // Build output, made by a run.
        && !text.starts_with("target/");
    let ext = text.rsplit_once('.').map(|(_, e)| e);
    plain && (text.ends_with('/') || ext.is_some_and(|e| EXTENSIONS.contains(&e)))
}

/// The backticked texts of `text`.
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// Whether `name` (which may hold `*`) exists in `dir`.
fn exists_in(dir: &Path, name: &str) -> bool {
    let name = name.trim_end_matches('/');
    if !name.contains('*') {
        return dir.join(name).exists();
    }
    let (folder, pattern) = match name.rsplit_once('/') {
        Some((f, p)) => (dir.join(f), p),
        None => (dir.to_path_buf(), name),
    };
    let (head, tail) = pattern.split_once('*').unwrap();
    std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.len() >= head.len() + tail.len() && n.starts_with(head) && n.ends_with(tail)
        })
}

/// Every file under `dir` (recursively), skipping build output and dependencies.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if ["target", "node_modules", ".git", "__pycache__"].contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Where a name in the docs may be relative to: the repository, each crate, each crate's
/// sources, and the library's store.
fn doc_roots(all: &[PathBuf]) -> Vec<PathBuf> {
    let repo = repo();
    let mut roots = vec![repo.clone(), repo.join("docs"), repo.join("crates")];
    for krate in std::fs::read_dir(repo.join("crates")).unwrap().flatten() {
        roots.push(krate.path());
        roots.push(krate.path().join("src"));
    }
    let store = repo.join("crates/sqlmq/src/store");
    roots.extend([store.clone(), store.join("body")]);
    // A bare file name may be anywhere: the folders that hold one of that name.
    roots.extend(all.iter().filter_map(|f| f.parent().map(Path::to_path_buf)));
    roots.sort();
    roots.dedup();
    roots
}

/// The paths of the layout tree (the first code block of ARCHITECTURE's "## Layout"): each
/// entry by its indentation under its parents, and the files its description names (with the
/// folder they are in or below).
fn tree_paths(map: &str) -> Vec<(String, PathBuf, Option<PathBuf>)> {
    let layout = &map[map.find("## Layout").expect("a layout section")..];
    let block = layout.split("```").nth(1).expect("a layout tree");
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        let mut words = line.split_whitespace();
        let first = words.next().unwrap();
        // A continuation line of a description starts far to the right.
        let is_entry = indent < 22 && (first.ends_with('/') || first.contains('.'));
        let here: PathBuf = stack.iter().map(|(_, n)| n.as_str()).collect();
        if is_entry {
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            let parent: PathBuf = stack.iter().map(|(_, n)| n.as_str()).collect();
            out.push((line.trim().to_owned(), parent.join(first), None));
            if first.ends_with('/') {
                stack.push((indent, first.trim_end_matches('/').to_owned()));
            }
        }
        let dir: PathBuf = if is_entry && first.ends_with('/') {
            stack.iter().map(|(_, n)| n.as_str()).collect()
        } else {
            here
        };
        // Files named in the description, relative to the entry's folder.
        let rest: Vec<&str> = if is_entry {
            words.collect()
        } else {
            line.split_whitespace().collect()
        };
        for word in rest {
            let word = word.trim_matches(|c: char| "(),:;".contains(c));
            let named = [".rs", ".sql", ".py"].iter().any(|e| word.ends_with(e));
            if named && is_path(word) {
                out.push((line.trim().to_owned(), dir.join(word), Some(dir.clone())));
            }
        }
    }
    out
}

#[test]
fn every_path_the_map_names_exists() {
    let repo = repo();
    let mut all = Vec::new();
    files(&repo.join("crates"), &mut all);
    let roots = doc_roots(&all);
    let mut missing = BTreeSet::new();
    let mut checked = 0;

    let mut docs = vec![repo.join("docs/ARCHITECTURE.md")];
    if let Ok(design) = std::fs::read_dir(repo.join("docs/design")) {
        docs.extend(design.flatten().map(|e| e.path()));
    }
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let name = doc.strip_prefix(&repo).unwrap().display().to_string();
        for token in backticked(&text).filter(|t| is_path(t)) {
            checked += 1;
            if !roots.iter().any(|r| exists_in(r, token)) {
                missing.insert(format!("{name}: `{token}`"));
            }
        }
    }
    let map = std::fs::read_to_string(repo.join("docs/ARCHITECTURE.md")).unwrap();
    for (line, path, named_in) in tree_paths(&map) {
        checked += 1;
        let found = match named_in {
            // A file a description names: in the entry's folder or below it.
            Some(folder) => {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                all.iter()
                    .filter(|f| f.starts_with(repo.join(&folder)))
                    .any(|f| exists_in(f.parent().unwrap(), &name))
            }
            None => exists_in(&repo, &path.to_string_lossy()),
        };
        if !found {
            missing.insert(format!("ARCHITECTURE layout: {} ({line})", path.display()));
        }
    }

    // Module headers: relative to the module's folder (a `mod.rs`, `lib.rs` or `main.rs` is
    // in it; `foo.rs` is the module whose folder is `foo/`), else to the crate or the repo.
    for file in all
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let dir = file.parent().unwrap();
        let own = dir.join(file.file_stem().unwrap());
        let krate = file
            .ancestors()
            .find(|a| a.join("Cargo.toml").exists())
            .unwrap();
        for token in backticked(&header).filter(|t| is_path(t)) {
            checked += 1;
            let places = [dir, own.as_path(), krate, &krate.join("src"), &repo];
            if !places.iter().any(|p| exists_in(p, token)) {
                let at = file.strip_prefix(&repo).unwrap().display();
                missing.insert(format!("{at}: `{token}`"));
            }
        }
    }
    assert!(checked > 300, "only {checked} names checked");
    assert!(missing.is_empty(), "named but not there:\n{}", {
        let list: Vec<String> = missing.into_iter().collect();
        list.join("\n")
    });
}
