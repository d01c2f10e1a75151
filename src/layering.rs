//! The layering, checked: each module's top comment names what it may import ("May import:"),
//! and this test holds every `crate::` path in its source (and `lastcall::` in main.rs) to that
//! list. A module may always use itself and, as a submodule, its own parent.
//!
//! May import: nothing (it reads the sources as text).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The crate's top-level modules, as lib.rs declares them.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    fs::read_to_string(src.join("lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod ").and_then(|rest| rest.strip_suffix(';')))
        .map(str::to_string)
        .collect()
}

/// Every source file under `dir`, with the top-level module it belongs to.
fn sources(dir: &Path, src: &Path, found: &mut Vec<(PathBuf, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, src, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(src).unwrap();
            let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
            found.push((path.clone(), first.trim_end_matches(".rs").to_string()));
        }
    }
}

/// The words of the "May import:" paragraph of a file's top comment, or None without one.
fn allowed(text: &str) -> Option<String> {
    let mut lines = text.lines().skip_while(|l| !l.contains("May import:"));
    let first = lines.next()?;
    let mut paragraph = first[first.find("May import:").unwrap()..].to_string();
    for line in lines {
        match line.strip_prefix("//!") {
            Some(rest) if !rest.trim().is_empty() => paragraph.push_str(rest),
            _ => break,
        }
    }
    Some(paragraph)
}

fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == word)
}

/// The top-level modules a file's code names: `crate::x` paths, `use crate::{x, y::z}` groups,
/// and `lastcall::x` in the binary.
fn used(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for root in ["crate::", "lastcall::"] {
        for (at, _) in text.match_indices(root) {
            let rest = &text[at + root.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    found.insert(name);
                }
            } else {
                found.insert(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
            }
        }
    }
    found.retain(|name| modules.contains(name));
    found
}

#[test]
fn every_module_imports_only_what_its_header_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    let mut files = Vec::new();
    sources(&src, &src, &mut files);
    let mut wrong = Vec::new();
    for (path, owner) in &files {
        let text = fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(&src).unwrap().display().to_string();
        let Some(header) = allowed(&text) else {
            wrong.push(format!("{name}: no \"May import:\" line in its top comment"));
            continue;
        };
        for module in used(&text, &modules) {
            if module == *owner || has_word(&header, &module) {
                continue;
            }
            wrong.push(format!("{name} uses {module}, which its header does not allow"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_paths_groups_and_headers() {
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    assert_eq!(used("use crate::{a, b::x};\nlet y = crate::c::f();", &modules), modules);
    assert_eq!(used("lastcall::a::run()", &modules), ["a".to_string()].into());
    let header = allowed("//! Owns x.\n//!\n//! May import: a (`T`),\n//! b.\n\nuse std::fs;").unwrap();
    assert!(has_word(&header, "a") && has_word(&header, "b") && !has_word(&header, "c"));
    assert!(allowed("//! Owns x.").is_none());
}
