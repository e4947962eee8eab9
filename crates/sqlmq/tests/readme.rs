//! The docs' Rust code compiles: every ```rust block of README.md and of the user guide's pages
//! (`docs/guide/src/*.md`) must stand unchanged in one of `crates/sqlmq/examples/*.rs`, its
//! lines (each trimmed) in order and contiguous. `cargo test` builds the examples, so a block
//! that stops compiling fails the build, and one edited without its example (or the other way
//! round) fails this test. No database needed.

use std::path::Path;

/// The README, read at compile time so that editing it rebuilds this test.
const README: &str = include_str!("../../../README.md");

/// Documents (relative to the repository) whose code must be covered, each with a section that
/// must hold at least one ```rust block (so that the test cannot pass vacuously because the
/// fences changed shape).
const SECTIONS: &[(&str, &str)] = &[
    ("README.md", "## A first program"),
    (
        "docs/guide/src/queues.md",
        "# Queues: sending and receiving",
    ),
    ("docs/guide/src/workers.md", "# The worker runtime"),
    ("docs/guide/src/topics.md", "# Topics and consumer groups"),
    (
        "docs/guide/src/limits.md",
        "# Limits: in flight, rate, per key",
    ),
    ("docs/guide/src/schedules.md", "# Recurring schedules"),
    ("docs/guide/src/workflows.md", "# Batches and workflows"),
    (
        "docs/guide/src/durable.md",
        "# Durable workflows: steps, sleeps, events and child runs",
    ),
    ("README.md", "## Durable workflows"),
    (
        "docs/guide/src/backends.md",
        "# Backends: MySQL/MariaDB and SQLite",
    ),
];

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every page of the user guide: path (relative to the repository) and text.
fn documents() -> Vec<(String, String)> {
    let guide = repo().join("docs/guide/src");
    let mut docs = vec![("README.md".to_owned(), README.to_owned())];
    let mut pages: Vec<_> = std::fs::read_dir(&guide)
        .unwrap_or_else(|e| panic!("{}: {e}", guide.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for page in pages {
        let name = format!(
            "docs/guide/src/{}",
            page.file_name().unwrap().to_string_lossy()
        );
        docs.push((name, std::fs::read_to_string(&page).unwrap()));
    }
    docs
}

/// A ```rust block: the README line of its opening fence and its lines, trimmed.
struct Block {
    line: usize,
    lines: Vec<String>,
}

/// Every ```rust block of `markdown` (an opening fence ```` ```rust ````, with or without
/// attributes such as `,no_run`, up to the next ```` ``` ````).
fn rust_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim();
        match &mut current {
            None if trimmed.starts_with("```rust") => {
                current = Some(Block {
                    line: i + 1,
                    lines: Vec::new(),
                })
            }
            None => {}
            Some(_) if trimmed == "```" => blocks.extend(current.take()),
            Some(block) => block.lines.push(trimmed.to_owned()),
        }
    }
    assert!(current.is_none(), "a ```rust block is not closed");
    blocks
}

/// How many of `block`'s lines stand at the start of its best match in `file`: all of them when
/// `file` holds the block in order and contiguous (each line trimmed).
fn matched_lines(file: &str, block: &[String]) -> usize {
    let lines: Vec<&str> = file.lines().map(str::trim).collect();
    (0..lines.len())
        .map(|start| {
            block
                .iter()
                .zip(&lines[start..])
                .take_while(|(want, have)| want.as_str() == **have)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Every example: its file name and text.
fn examples() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// `Ok` when some example holds `block`, else a message naming the document's line and the
/// first line of the block that the closest example lacks.
fn find(doc: &str, block: &Block, examples: &[(String, String)]) -> Result<String, String> {
    let (best, name) = examples
        .iter()
        .map(|(name, text)| (matched_lines(text, &block.lines), name))
        .max()
        .ok_or("no examples")?;
    if best == block.lines.len() {
        return Ok(name.clone());
    }
    Err(format!(
        "{doc}:{}: the ```rust block is not in any example; closest: {name}, which differs \
         at the block's line {} ({:?})",
        block.line,
        best + 1,
        block.lines[best]
    ))
}

#[test]
fn every_rust_block_of_the_docs_is_in_an_example() {
    let examples = examples();
    let docs = documents();
    assert!(docs.len() > 10, "the guide's pages: {}", docs.len());
    let mut failures = Vec::new();
    for (doc, text) in &docs {
        for block in rust_blocks(text) {
            failures.extend(find(doc, &block, &examples).err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    for (doc, section) in SECTIONS {
        let text = &docs
            .iter()
            .find(|(name, _)| name == doc)
            .unwrap_or_else(|| panic!("no document {doc}"))
            .1;
        let blocks = rust_blocks(text);
        let lines: Vec<&str> = text.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.trim() == *section)
            .unwrap_or_else(|| panic!("{doc} has no {section:?} section"));
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.starts_with("# ") || l.starts_with("## "))
            .map_or(lines.len(), |n| start + 1 + n);
        assert!(
            blocks.iter().any(|b| b.line > start && b.line <= end),
            "{doc} section {section:?} has no ```rust block"
        );
    }
}

#[test]
fn a_changed_removed_or_reordered_line_is_caught() {
    let examples = examples();
    let block = rust_blocks(README).into_iter().next().expect("a block");
    assert!(find("README.md", &block, &examples).is_ok());
    let n = block.lines.len();
    assert!(n >= 3, "the first block is long enough to edit");

    let mut changed = block.lines.clone();
    changed[n / 2].push_str(" // edited");
    let mut removed = block.lines.clone();
    removed.remove(n / 2);
    let mut reordered = block.lines.clone();
    reordered.swap(0, n - 1);
    for lines in [changed, removed, reordered] {
        let edited = Block { line: 0, lines };
        let err = find("README.md", &edited, &examples)
            .expect_err("an edited block is not in the examples");
        assert!(err.contains("README.md:0"), "{err}");
    }
}

#[test]
fn blocks_are_read_with_their_fences() {
    let markdown = "text\n```rust,no_run\n  let a = 1;\n\n```\n```sh\nls\n```\n```rust\nx\n```\n";
    let blocks = rust_blocks(markdown);
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        (blocks[0].line, &blocks[0].lines[..]),
        (2, &["let a = 1;".to_owned(), String::new()][..])
    );
    assert_eq!(blocks[1].lines, ["x"]);
    assert_eq!(matched_lines("a\n  x\n", &["x".to_owned()]), 1);
}
