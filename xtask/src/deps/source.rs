//! A crate's sources as the module guard reads them: every `.rs` file under `src` keyed by its
//! module path, with comments, string and character literals and `#[cfg(test)] mod … { … }`
//! blocks left out (a test may read a document through the reader it tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Every `.rs` file under `src`, keyed by module path (`format::chrome`; the crate root is "").
pub(super) fn read_sources(src: &Path) -> Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap_or(&path).with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts
                    .last()
                    .is_some_and(|p| p == "lib" || p == "main" || p == "mod")
                {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                files.insert(parts.join("::"), text);
            }
        }
    }
    Ok(files)
}

/// `text` without comments, string and character literals (their contents become blanks) and
/// `#[cfg(test)] mod name { … }` blocks.
pub(super) fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        let next = chars.get(k + 1).copied();
        if c == '/' && next == Some('/') {
            while k < chars.len() && chars[k] != '\n' {
                k += 1;
            }
        } else if c == '/' && next == Some('*') {
            k += 2;
            while k + 1 < chars.len() && !(chars[k] == '*' && chars[k + 1] == '/') {
                k += 1;
            }
            k += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&chars, k)
        {
            // Raw string: r"…", r#"…"#, …
            let mut hashes = 0;
            let mut j = k + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                k += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            k = j;
        } else if c == '"' {
            k += 1;
            while k < chars.len() && chars[k] != '"' {
                if chars[k] == '\\' {
                    k += 1;
                }
                k += 1;
            }
            k += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&chars, k) {
            k += 1;
            if chars.get(k) == Some(&'\\') {
                k += 1;
            }
            while k < chars.len() && chars[k] != '\'' {
                k += 1;
            }
            k += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            k += 1;
        }
    }
    drop_test_modules(&out)
}

fn prev_is_ident(chars: &[char], k: usize) -> bool {
    k > 0 && (chars[k - 1].is_alphanumeric() || chars[k - 1] == '_')
}

/// `'x'`, `'\n'`, `'\u{..}'` — not a lifetime (`'a`).
fn is_char_literal(chars: &[char], k: usize) -> bool {
    match chars.get(k + 1) {
        Some('\\') => true,
        Some(_) => chars.get(k + 2) == Some(&'\''),
        None => false,
    }
}

fn drop_test_modules(code: &str) -> String {
    let mut code = code.to_string();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = &code[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ");
        let Some(open) = after.find('{').filter(|_| is_mod) else {
            // Not a module: drop only the attribute.
            code.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        };
        let open = at + "#[cfg(test)]".len() + open;
        let end = matching_brace(&code, open).map_or(code.len(), |e| e + 1);
        code.replace_range(at..end, "");
    }
    code
}

/// Index of the `}` closing the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}
