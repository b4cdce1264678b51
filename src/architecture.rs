//! The layers' rules (ARCHITECTURE.md), checked on the source: every file under `src/`, at any
//! depth, its tests aside. Data flows one way, facts → rules → report: each layer imports only
//! the layers below it, no file imports another that imports it back (directly or round a
//! longer cycle), and the rules touch no I/O, clock, serialization or command line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each layer may import, besides itself. A layer missing here is plumbing (the crate's
/// root files) or a command, which compose everything.
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("facts", &[]),
    ("rules", &["facts"]),
    ("config", &["facts", "rules"]),
    ("report", &["facts", "rules", "config", "exit"]),
    (
        "observe",
        &["facts", "rules", "config", "error", "deadline", "budget"],
    ),
    ("cli", &["facts", "rules", "config", "error", "observe"]),
];

/// What the rules never mention: the layers above them, a clock, an I/O API, serialization.
const NOT_IN_RULES: &[&str] = &[
    "clap",
    "serde",
    "tokio",
    "async_nats",
    "libc",
    "nix::",
    "std::fs",
    "std::net::Tcp",
    "std::net::Udp",
    "std::io",
    "std::process",
    "std::env",
    "std::thread",
    "SystemTime",
    "Instant",
];

/// One source file: its module path (`["report", "human"]`) and its code without tests and
/// comments.
struct Source {
    path: PathBuf,
    module: Vec<String>,
    code: String,
}

fn sources(dir: &Path, found: &mut Vec<Source>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            found.push(Source {
                module: module_of(&path),
                code: without_comments(without_tests(&text)),
                path,
            });
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code before the file's test module (tests come last in every file, and may import
/// anything).
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "#[cfg(test)]" {
            let rest = text[at + line.len()..].trim_start();
            if rest.starts_with("mod ") || rest.starts_with("pub(crate) mod ") {
                return &text[..at];
            }
        }
        at += line.len();
    }
    text
}

fn without_comments(code: &str) -> String {
    code.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal ("http://") keeps its line.
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path the code names: `crate::a::b`, `super::x`, `self::y`, a declared child
/// module's `child::z`, and each branch of a `use` tree's braces.
fn named_paths(s: &Source, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = s.code.as_bytes();
    let word_at = |i: usize| -> Option<(String, usize)> {
        let start = i;
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        (j > start).then(|| (s.code[start..j].to_string(), j))
    };
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        if !boundary {
            i += 1;
            continue;
        }
        let Some((first, end)) = word_at(i) else {
            i += 1;
            continue;
        };
        let base: Option<Vec<String>> = match first.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(s.module.clone()),
            "super" => Some(s.module[..s.module.len().saturating_sub(1)].to_vec()),
            w if children.contains(w) && s.code[end..].starts_with("::") => {
                Some([s.module.clone(), vec![w.to_string()]].concat())
            }
            _ => None,
        };
        let Some(base) = base.filter(|_| s.code[end..].starts_with("::")) else {
            i = end;
            continue;
        };
        i = tree(&s.code, end, base, &mut paths);
    }
    paths
}

/// Reads `::a::b`, `::{a, b::c}` or `::*` after `base` at `at`; pushes each full path.
fn tree(code: &str, mut at: usize, mut base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let bytes = code.as_bytes();
    loop {
        if !code[at..].starts_with("::") {
            out.push(base);
            return at;
        }
        at += 2;
        if bytes.get(at) == Some(&b'{') {
            at += 1;
            loop {
                while at < bytes.len()
                    && (bytes[at] == b' ' || bytes[at] == b'\n' || bytes[at] == b',')
                {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    return at + 1;
                }
                let start = at;
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
                let word = &code[start..at];
                let mut inner = base.clone();
                match word {
                    "self" | "" => {}
                    "super" => {
                        inner.pop();
                    }
                    w => inner.push(w.to_string()),
                }
                at = tree(code, at, inner, out);
                // Skip `as name` and anything else up to the next branch.
                while at < bytes.len() && bytes[at] != b',' && bytes[at] != b'}' {
                    at += 1;
                }
            }
        }
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        match &code[start..at] {
            "" => {
                out.push(base);
                return at;
            }
            "super" => {
                base.pop();
            }
            w => base.push(w.to_string()),
        }
    }
}

/// The file a path lands in: the deepest module of it that has a file.
fn file_of<'a>(path: &[String], files: &'a BTreeMap<Vec<String>, PathBuf>) -> Option<&'a PathBuf> {
    (0..=path.len()).rev().find_map(|k| files.get(&path[..k]))
}

/// Each file and the files it imports from.
fn graph() -> (Vec<Source>, BTreeMap<PathBuf, BTreeSet<PathBuf>>) {
    let mut all = Vec::new();
    sources(&src(), &mut all);
    let files: BTreeMap<Vec<String>, PathBuf> = all
        .iter()
        .filter(|s| !s.path.ends_with("main.rs"))
        .map(|s| (s.module.clone(), s.path.clone()))
        .collect();
    let mut edges = BTreeMap::new();
    for s in &all {
        let children: BTreeSet<String> = s
            .code
            .lines()
            .filter_map(|l| {
                let l = l.trim().trim_start_matches("pub ");
                l.strip_prefix("mod ")?
                    .strip_suffix(';')
                    .map(str::to_string)
            })
            .collect();
        let to: BTreeSet<PathBuf> = named_paths(s, &children)
            .iter()
            .filter_map(|p| file_of(p, &files))
            .filter(|f| **f != s.path)
            .cloned()
            .collect();
        edges.insert(s.path.clone(), to);
    }
    (all, edges)
}

fn layer(path: &Path) -> String {
    module_of(path).first().cloned().unwrap_or_default()
}

fn short(path: &Path) -> String {
    path.strip_prefix(src()).unwrap().display().to_string()
}

/// Each layer imports only what `MAY_IMPORT` allows it.
fn layer_violations(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, tos) in edges {
        let mine = layer(from);
        let Some((_, allowed)) = MAY_IMPORT.iter().find(|(l, _)| *l == mine) else {
            continue;
        };
        for to in tos {
            let theirs = layer(to);
            if theirs != mine && !allowed.contains(&theirs.as_str()) {
                found.push(format!("{} imports {}", short(from), short(to)));
            }
        }
    }
    found
}

/// Every cycle of files importing each other, as the files in it.
fn cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<String>> {
    // Tarjan's strongly connected components.
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a PathBuf) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        for w in st.edges.get(v).into_iter().flatten() {
            let Some((w, _)) = st.edges.get_key_value(w) else {
                continue;
            };
            if !st.index.contains_key(w) {
                visit(st, w);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.stack.contains(&w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut component = Vec::new();
            while let Some(w) = st.stack.pop() {
                component.push(short(w));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                st.found.push(component);
            }
        }
    }
    let mut st = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.found
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let (all, edges) = graph();
    assert!(all.len() >= 40, "read {} files", all.len());
    let found = layer_violations(&edges);
    assert!(
        found.is_empty(),
        "upward imports (ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_files_import_each_other() {
    let (_, edges) = graph();
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "files importing each other (ARCHITECTURE.md):\n{}",
        found
            .iter()
            .map(|c| c.join(" <-> "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_rules_stay_pure() {
    let (all, _) = graph();
    let mut checked = 0;
    for s in all
        .iter()
        .filter(|s| s.module.first().is_some_and(|m| m == "rules"))
    {
        for word in NOT_IN_RULES {
            assert!(
                !s.code.contains(word),
                "{} mentions `{word}`: the rules must stay pure (ARCHITECTURE.md)",
                short(&s.path)
            );
        }
        checked += 1;
    }
    assert!(checked >= 9, "read {checked} rule modules");
}

/// The checks themselves: each catches what it is for, on made-up files.
#[test]
fn the_checks_catch_what_they_are_for() {
    let s = |module: &[&str], code: &str| Source {
        path: src().join(module.join("/") + ".rs"),
        module: module.iter().map(|m| m.to_string()).collect(),
        code: without_comments(without_tests(code)),
    };
    let none = BTreeSet::new();
    let paths = named_paths(
        &s(
            &["report", "check"],
            "use super::human;\nuse crate::rules::{check::{Health, Verdict}, consumer};\n// crate::observe\nfn f() { crate::facts::Wanted::new(); }\n#[cfg(test)]\nmod tests { use crate::observe::X; }",
        ),
        &none,
    );
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "report::human",
            "rules::check::Health",
            "rules::check::Verdict",
            "rules::consumer",
            "facts::Wanted::new"
        ]
    );
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        (
            src().join("report/check.rs"),
            [src().join("report/human.rs"), src().join("observe/mod.rs")].into(),
        ),
        (
            src().join("report/human.rs"),
            [src().join("report/check.rs")].into(),
        ),
        (src().join("observe/mod.rs"), BTreeSet::new()),
    ]
    .into();
    assert_eq!(
        layer_violations(&edges),
        ["report/check.rs imports observe/mod.rs"]
    );
    assert_eq!(cycles(&edges), [["report/check.rs", "report/human.rs"]]);
}
