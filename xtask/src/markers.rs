//! Merge-conflict markers left in committed files: a merge resolved by hand can leave
//! `<<<<<<<` / `=======` / `>>>>>>>` lines in a document that no compiler reads (it happened to
//! ARCHITECTURE.md once). CI fails on any such line in a tracked text file.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// The 1-based numbers of the conflict-marker lines of `text`: every line opening a conflict
/// (`<<<<<<< `) or closing one (`>>>>>>> `), and the `=======` separator between them (a line of
/// seven `=` outside a conflict is a Markdown heading rule, not a marker).
pub fn conflict_markers(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.starts_with("<<<<<<< ") || line == "<<<<<<<" {
            open = true;
            found.push(i + 1);
        } else if line.starts_with(">>>>>>> ") || line == ">>>>>>>" {
            open = false;
            found.push(i + 1);
        } else if open && line == "=======" {
            found.push(i + 1);
        }
    }
    found
}

/// Check every file git tracks (binary and non-UTF-8 files skipped).
pub fn check() -> Result<()> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .output()
        .context("cannot run git ls-files")?;
    if !out.status.success() {
        bail!("git ls-files failed");
    }
    let mut problems = Vec::new();
    let mut files = 0usize;
    for path in out.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path).into_owned();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        files += 1;
        problems.extend(
            conflict_markers(&text)
                .into_iter()
                .map(|line| format!("{path}:{line}: merge-conflict marker")),
        );
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    eprintln!("no merge-conflict markers in {files} tracked text files");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_a_conflict_is_found() {
        let text = "intro\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> wt-18\nafter\n";
        assert_eq!(conflict_markers(text), vec![2, 4, 6]);
    }

    #[test]
    fn a_heading_rule_outside_a_conflict_is_not_a_marker() {
        let text = "Title\n=======\n\nbody with <<<<<<< inside a line\n";
        assert_eq!(conflict_markers(text), Vec::<usize>::new());
    }

    #[test]
    fn crlf_lines_are_markers_too() {
        assert_eq!(
            conflict_markers("<<<<<<< a\r\n=======\r\n>>>>>>> b\r\n"),
            vec![1, 2, 3]
        );
    }
}
