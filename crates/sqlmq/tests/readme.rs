//! The README's Rust code compiles: every ```rust block of README.md must stand unchanged in one
//! of `crates/sqlmq/examples/*.rs`, its lines (each trimmed) in order and contiguous. `cargo
//! test` builds the examples, so a README block that stops compiling fails the build, and one
//! edited without its example (or the other way round) fails this test. No database needed.

use std::path::Path;

/// The README, read at compile time so that editing it rebuilds this test.
const README: &str = include_str!("../../../README.md");

/// README sections whose code must be covered; each must hold at least one ```rust block.
const SECTIONS: &[&str] = &[
    "## Using the library",
    "### The worker runtime",
    "### Topics and consumer groups",
    "### Limits: in flight, rate, per key",
    "### Recurring schedules",
    "### Batches and workflows",
    "### Backends: MySQL/MariaDB and SQLite",
];

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

/// `Ok` when some example holds `block`, else a message naming the README line and the first
/// line of the block that the closest example lacks.
fn find(block: &Block, examples: &[(String, String)]) -> Result<String, String> {
    let (best, name) = examples
        .iter()
        .map(|(name, text)| (matched_lines(text, &block.lines), name))
        .max()
        .ok_or("no examples")?;
    if best == block.lines.len() {
        return Ok(name.clone());
    }
    Err(format!(
        "README.md:{}: the ```rust block is not in any example; closest: {name}, which differs \
         at the block's line {} ({:?})",
        block.line,
        best + 1,
        block.lines[best]
    ))
}

#[test]
fn every_readme_rust_block_is_in_an_example() {
    let blocks = rust_blocks(README);
    let examples = examples();
    let failures: Vec<String> = blocks
        .iter()
        .filter_map(|b| find(b, &examples).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The sections the README promises code in have it (so that this test cannot pass
    // vacuously because the fences changed shape).
    let lines: Vec<&str> = README.lines().collect();
    for section in SECTIONS {
        let start = lines
            .iter()
            .position(|l| l.trim() == *section)
            .unwrap_or_else(|| panic!("README.md has no {section:?} section"));
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.starts_with('#'))
            .map_or(lines.len(), |n| start + 1 + n);
        assert!(
            blocks.iter().any(|b| b.line > start && b.line <= end),
            "README.md section {section:?} has no ```rust block"
        );
    }
}

#[test]
fn a_changed_removed_or_reordered_line_is_caught() {
    let examples = examples();
    let block = rust_blocks(README).into_iter().next().expect("a block");
    assert!(find(&block, &examples).is_ok());
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
        let err = find(&edited, &examples).expect_err("an edited block is not in the examples");
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
