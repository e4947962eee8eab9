//! The library's modules import only the layers below them (docs/ARCHITECTURE.md, "Which way
//! the arrows point"): no module cycles, `domain` a leaf, the store below the engine, the
//! client below the concepts that add to it. It reads the sources: every `crate::name` path and
//! `use crate::{…}` group of a module's non-test code is an edge to the top-level module that
//! `name` is (or that the crate root re-exports `name` from). No database needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may name modules of lower layers only; a module that is
/// not listed fails the test until it is given its place.
const LAYERS: &[&[&str]] = &[
    &["domain"],
    // Leaves over the domain: metrics and trace context, test pause points, a driver
    // workaround, and the public modules that only re-export plain types.
    &[
        "telemetry",
        "failpoints",
        "nodelay",
        "error",
        "inspect",
        "admin",
    ],
    &["store"],
    &["conns"],
    &["tx"],
    &["outage", "coalesce"],
    &["client"],
    &["consume"],
    &["queue", "topic"],
    &["job", "source", "flow", "schedule"],
    &["worker"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `text` without `//` comments (doc comments included: their paths are links, not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without its test module: everything from a `#[cfg(test)]` followed by `mod … {`
/// (sqlmq puts unit tests at the end of a file).
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    while let Some(i) = text[at..].find("#[cfg(test)]") {
        let start = at + i;
        let rest = text[start + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") && rest.split('\n').next().is_some_and(|l| l.contains('{')) {
            return &text[..start];
        }
        at = start + 1;
    }
    text
}

/// The modules `file` declares with `mod name;`, but not those compiled for tests only.
fn declared_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut test_only = false;
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            test_only = true;
            continue;
        }
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("pub(super) mod "))
            .or_else(|| line.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';'))
            && !test_only
        {
            out.push(name.to_owned());
        }
        if !line.starts_with("#[") {
            test_only = false;
        }
    }
    out
}

/// The source files of module `name` declared in `dir`: `name.rs` or `name/mod.rs`, and the
/// non-test modules they declare, recursively.
fn module_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let (file, sub) = if dir.join(format!("{name}.rs")).exists() {
        (dir.join(format!("{name}.rs")), dir.join(name))
    } else {
        (dir.join(name).join("mod.rs"), dir.join(name))
    };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut files = vec![file];
    for child in declared_modules(without_tests(&text)) {
        files.extend(module_files(&sub, &child));
    }
    files
}

/// The names that follow `crate::` in `code`: `crate::name` gives `name`, `crate::{a, b::c}`
/// gives `a` and `b`.
fn crate_names(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        {
            // `$crate::` in a macro: the same crate, but resolved where the macro is used.
            if !code[..i].ends_with('$') {
                continue;
            }
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: the first identifier after `{` and each comma at depth 0.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                if start && (c.is_ascii_alphanumeric() || c == '_') {
                    names.insert(ident(&group[j..]));
                    start = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    _ => {}
                }
            }
        } else {
            names.insert(ident(rest));
        }
    }
    names
}

/// What the crate root re-exports: name → the module it comes from.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for statement in lib.split(';') {
        // Attributes (`#[cfg(feature = …)]`) may stand before the `pub use`.
        let Some(path) = statement.split_once("pub use ").map(|(_, path)| path) else {
            continue;
        };
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                out.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    out
}

/// Whether the crate root itself defines `name` (a type alias such as `DefaultBackend`): no
/// module to point at.
fn defined_at_root(lib: &str, name: &str) -> bool {
    lib.contains(&format!("pub type {name} "))
}

/// Top-level module → the top-level modules its non-test code names.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let modules = declared_modules(&lib);
    let exports = root_exports(&code(&lib));
    let mut edges = BTreeMap::new();
    for module in &modules {
        let mut to = BTreeSet::new();
        for file in module_files(&src(), module) {
            let text = std::fs::read_to_string(&file).unwrap();
            for name in crate_names(&code(without_tests(&text))) {
                let target = if defined_at_root(&lib, &name) {
                    continue;
                } else if modules.contains(&name) {
                    name
                } else if let Some(from) = exports.get(&name) {
                    from.clone()
                } else {
                    panic!(
                        "{}: crate::{name} is neither a module nor re-exported",
                        file.display()
                    );
                };
                // `sqlx` (the backends' type names) is a crate, not a module of ours.
                if &target != module && modules.contains(&target) {
                    to.insert(target);
                }
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let edges = edges();
    assert!(edges.len() > 15, "found only {:?}", edges.keys());
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        let Some(own) = layer_of(from) else {
            wrong.push(format!(
                "module `{from}` has no layer in LAYERS (tests/layers.rs)"
            ));
            continue;
        };
        for to in tos {
            match layer_of(to) {
                Some(below) if below < own => {}
                _ => wrong.push(format!("`{from}` imports `{to}`, which is not below it")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_edges_and_ignores_tests_and_comments() {
    let text = "use crate::client::Client;\nuse crate::{domain::Error, Queue};\n\
                // crate::topic in a comment\nfn f() { $crate::store::x() }\n\
                #[cfg(test)]\nmod tests {\n    use crate::worker;\n}\n";
    let names = crate_names(&code(without_tests(text)));
    let expected: BTreeSet<String> = ["client", "domain", "Queue", "store"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
    assert_eq!(
        declared_modules("mod a;\n#[cfg(test)]\nmod b;\npub(crate) mod c;\n"),
        ["a", "c"]
    );
}
