//! The kernel's layers, read from its own sources: no two files import each other, directly or
//! round a circle, the ledger and the execution loop import no plan, evaluation or sweep
//! code, the computations (`lines/`) import nothing outside their folder, and no file but
//! the built-ins' table names a built-in (one engine: the tuned paths serve shapes). Imports are the `crate::` and `super::` paths of each file's code (comments and test
//! modules left out), each resolved to the file that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src` (`a::b` for `src/a/b.rs` or `src/a/b/mod.rs`) and its code.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let code = without_tests(&without_comments(&std::fs::read_to_string(&path).unwrap()));
            out.insert(parts.join("::"), code);
        }
    }
    out
}

/// The text with `//` comments removed (a `//` inside a string on its line is kept).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut quotes = 0;
            for (i, c) in line.char_indices() {
                if c == '"' {
                    quotes += 1;
                }
                if quotes % 2 == 0 && line[i..].starts_with("//") {
                    return &line[..i];
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The code without its `#[cfg(test)] mod x { ... }` blocks: tests may import anything.
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let Some(open) = after.find('{') else {
            return out;
        };
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The paths a module's code names: `crate::a::b`, the items of `use crate::{...}`, and
/// `super::x` as the sibling it is.
fn named_paths(module: &str, code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find("};").unwrap_or(group.len())];
            out.extend(body.split([',', '{', '}', ' ', '\n']).map(ident));
        } else {
            out.push(ident(rest));
        }
    }
    let parent: Vec<&str> = module.split("::").collect();
    let parent = parent[..parent.len().saturating_sub(1)].join("::");
    for (at, _) in code.match_indices("super::") {
        let item = ident(&code[at + 7..]);
        out.push(if parent.is_empty() {
            item
        } else {
            format!("{parent}::{item}")
        });
    }
    out
}

/// Each module's imports: the modules its paths resolve to (the longest module prefix), its
/// own folder's parents left out (a child module may read the module that declares it).
fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    mods.iter()
        .map(|(m, code)| {
            let deps = named_paths(m, code)
                .into_iter()
                .filter_map(|p| {
                    let parts: Vec<&str> = p.trim_matches(':').split("::").collect();
                    (1..=parts.len())
                        .rev()
                        .map(|i| parts[..i].join("::"))
                        .find(|c| mods.contains_key(c))
                })
                .filter(|d| d != m && !d.is_empty() && !m.starts_with(&format!("{d}::")))
                .collect();
            (m.clone(), deps)
        })
        .collect()
}

/// A circle of imports, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_kernel_files_import_each_other_without_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&modules(&src));
    assert!(graph.len() > 30, "read {} modules", graph.len());
    // The reader sees real imports: the sweep reads the ledger, the ledger the execution loop.
    assert!(graph["sweep"].contains("ledger") && graph["ledger"].contains("execution"));
    assert_eq!(circle(&graph), None);
    // Below the sweep: the ledger and the execution loop know no plan, evaluation or sweep.
    let below = ["ledger", "execution", "record", "keys"];
    for low in graph.keys().filter(|m| {
        below
            .iter()
            .any(|b| *m == b || m.starts_with(&format!("{b}::")))
    }) {
        let above: Vec<&String> = graph[low]
            .iter()
            .filter(|d| {
                ["plan", "eval", "sweep", "combos", "strategy", "signal"]
                    .iter()
                    .any(|a| *d == a || d.starts_with(&format!("{a}::")))
            })
            .collect();
        assert!(above.is_empty(), "{low} imports {above:?}");
    }
    // The computations: `lines/` imports nothing above it (arrays in, arrays out).
    let lines: Vec<&String> = graph.keys().filter(|m| m.starts_with("lines")).collect();
    assert!(lines.len() >= 7, "read {lines:?}");
    for m in lines {
        let outside: Vec<&String> = graph[m]
            .iter()
            .filter(|d| !(*d == "lines" || d.starts_with("lines::") || *d == "error"))
            .collect();
        assert!(outside.is_empty(), "{m} imports {outside:?}");
    }
    // The reader would see a circle: two modules naming each other.
    let mut two = BTreeMap::new();
    two.insert("a".to_owned(), "use crate::b::X;".to_owned());
    two.insert("b".to_owned(), "fn f() { crate::a::g() }".to_owned());
    assert!(circle(&imports(&two)).is_some());
}

/// Whole identifiers of `code` (letters, digits, `_`).
fn identifiers(code: &str) -> BTreeSet<&str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn no_file_but_the_builtins_table_names_a_builtin() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    // The typed combos' variants and the strategies' names, as code and as text.
    let variants = [
        "HmaSar",
        "SmaCross",
        "EmaCross",
        "Donchian",
        "RsiRevert",
        "Params",
    ];
    let names = [
        "hma_sar",
        "sma_cross",
        "ema_cross",
        "donchian",
        "rsi_revert",
    ];
    let table = &mods["builtins"];
    let found = identifiers(table);
    assert!(
        variants.iter().all(|v| found.contains(v)),
        "the reader sees the table's names"
    );
    let mut named = Vec::new();
    for (m, code) in mods.iter().filter(|(m, _)| *m != "builtins") {
        let m = if m.is_empty() { "lib" } else { m.as_str() };
        let ids = identifiers(code);
        named.extend(
            variants
                .iter()
                .filter(|v| ids.contains(*v))
                .map(|v| format!("{m}: {v}")),
        );
        named.extend(
            names
                .iter()
                .filter(|n| code.contains(&format!("\"{n}\"")))
                .map(|n| format!("{m}: \"{n}\"")),
        );
    }
    // The crate's root re-exports the table's types for its callers.
    let allowed = ["lib: Params"];
    named.retain(|n| !allowed.contains(&n.as_str()));
    assert!(
        named.is_empty(),
        "built-ins named outside builtins.rs: {named:?}"
    );
}
