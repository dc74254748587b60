//! The module graph of one crate and its circles.
//!
//! Every path in a module's code is resolved to the deepest module it names: `crate::a::b`,
//! `super::…` and `self::…`, a child's `fast::…`, the items of `use` groups (`a::{b, c::d}`), and
//! names a module imports (`use table::Row;` then `Row::new`), followed through re-exports
//! (`crate::Span` is `format::records::Span` when the root says `pub use format::records::Span`).
//!
//! A module counts with everything under it: a reference from anything inside `events` to
//! anything inside `table` is the edge `events → table` between the two siblings, and a module
//! naming its own ancestor or descendant is no edge. The guard asks that these sibling edges
//! form no circle, at every level of the tree.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::source::code_only;

/// How many re-exports a path is followed through before the guard gives up on it.
const MAX_HOPS: usize = 16;

/// One crate's modules, read.
pub(super) struct Crate {
    modules: BTreeMap<String, Module>,
}

/// What one module's code names.
#[derive(Default)]
struct Module {
    /// The names its `use` declarations bind, each with the path it stands for.
    imports: BTreeMap<String, Vec<String>>,
    /// Every path in its code (`use` trees expanded), as written.
    paths: Vec<Vec<String>>,
}

/// A circle between sibling modules: the siblings in order, the first repeated at the end, and
/// for each arrow the reference that makes it (`format::events::fast names format::table`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Circle {
    pub(super) modules: Vec<String>,
    pub(super) because: Vec<String>,
}

impl Crate {
    /// The crate whose module paths (`format::chrome`; the root is "") have these sources.
    pub(super) fn new(files: &BTreeMap<String, String>) -> Crate {
        let modules = files
            .iter()
            .map(|(path, text)| (path.clone(), Module::read(&code_only(text))))
            .collect();
        Crate { modules }
    }

    /// For each module, the modules its code names (each the deepest module the path reaches;
    /// itself left out).
    pub(super) fn references(&self) -> BTreeMap<&str, BTreeSet<String>> {
        self.modules
            .iter()
            .map(|(name, module)| {
                let named = module
                    .paths
                    .iter()
                    .filter_map(|path| self.resolve(name, path, 0))
                    .filter(|target| target != name)
                    .collect();
                (name.as_str(), named)
            })
            .collect()
    }

    /// The arrows between siblings: `(from, to) → (module, named)` for one reference that makes
    /// each.
    fn sibling_edges(&self) -> BTreeMap<String, BTreeMap<String, (String, String)>> {
        let mut edges: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
        for (module, named) in self.references() {
            for target in named {
                if let Some((from, to)) = siblings(module, &target) {
                    edges
                        .entry(from)
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| (module.to_string(), target.clone()));
                }
            }
        }
        edges
    }

    /// Every set of siblings that name each other in a circle, each as one shortest circle
    /// through its first member (in name order); empty when the tree has none.
    pub(super) fn circles(&self) -> Vec<Circle> {
        let edges = self.sibling_edges();
        let graph: BTreeMap<&str, BTreeSet<&str>> = edges
            .iter()
            .map(|(from, to)| (from.as_str(), to.keys().map(String::as_str).collect()))
            .collect();
        strongly_connected(&graph)
            .into_iter()
            .map(|component| {
                let modules = shortest_circle(&graph, &component);
                let because = modules
                    .windows(2)
                    .map(|pair| {
                        let (module, named) = &edges[&pair[0]][&pair[1]];
                        format!("{module} names {named}")
                    })
                    .collect();
                Circle { modules, because }
            })
            .collect()
    }

    /// The deepest module that `path`, written in `from`, names; `None` for what lies outside
    /// the crate (another crate, the prelude, a local item).
    fn resolve(&self, from: &str, path: &[String], hops: usize) -> Option<String> {
        let first = path.first()?;
        match first.as_str() {
            "crate" => self.walk(String::new(), &path[1..], hops),
            "self" => self.walk(from.to_string(), &path[1..], hops),
            "super" => {
                let mut module = from.to_string();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    module = parent(&module)?.to_string();
                    rest = &rest[1..];
                }
                self.walk(module, rest, hops)
            }
            name => {
                let child = join(from, name);
                if self.modules.contains_key(&child) {
                    return self.walk(child, &path[1..], hops);
                }
                let target = self.modules.get(from)?.imports.get(name)?;
                if hops >= MAX_HOPS {
                    return None;
                }
                let mut full = target.clone();
                full.extend_from_slice(&path[1..]);
                self.resolve(from, &full, hops + 1)
            }
        }
    }

    /// From `module`, down `rest` as far as it goes through child modules and re-exports.
    fn walk(&self, mut module: String, rest: &[String], hops: usize) -> Option<String> {
        for (k, segment) in rest.iter().enumerate() {
            let child = join(&module, segment);
            if self.modules.contains_key(&child) {
                module = child;
                continue;
            }
            let reexport = self
                .modules
                .get(&module)
                .and_then(|m| m.imports.get(segment.as_str()));
            if let Some(target) = reexport.filter(|_| hops < MAX_HOPS) {
                let mut full = target.clone();
                full.extend_from_slice(&rest[k + 1..]);
                // An import of something outside the crate is still named through `module`.
                return self.resolve(&module, &full, hops + 1).or(Some(module));
            }
            break;
        }
        Some(module)
    }
}

impl Module {
    fn read(code: &str) -> Module {
        let tokens = tokens(code);
        let mut module = Module::default();
        let mut i = 0;
        while i < tokens.len() {
            let starts_path = matches!(tokens[i], Token::Ident(_))
                && tokens.get(i + 1) == Some(&Token::PathSep)
                && (i == 0 || tokens[i - 1] != Token::PathSep);
            if tokens[i] == Token::Ident("use") {
                let mut leaves = Vec::new();
                i = tree(&tokens, i + 1, &[], &mut leaves);
                for leaf in leaves {
                    if let Some(name) = leaf.binds {
                        module.imports.insert(name, leaf.path.clone());
                    }
                    module.paths.push(leaf.path);
                }
            } else if starts_path {
                let mut leaves = Vec::new();
                i = tree(&tokens, i, &[], &mut leaves);
                module.paths.extend(leaves.into_iter().map(|l| l.path));
            } else {
                i += 1;
            }
        }
        module
    }
}

/// The two siblings that carry a reference from `from` to `to`: their ancestors just below the
/// deepest module the two share; `None` when one contains the other.
fn siblings(from: &str, to: &str) -> Option<(String, String)> {
    let a: Vec<&str> = from.split("::").filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = to.split("::").filter(|s| !s.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == a.len() || common == b.len() {
        return None;
    }
    Some((a[..=common].join("::"), b[..=common].join("::")))
}

fn parent(module: &str) -> Option<&str> {
    if module.is_empty() {
        return None;
    }
    Some(module.rsplit_once("::").map_or("", |(p, _)| p))
}

fn join(module: &str, name: &str) -> String {
    if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}

/// The pieces of code a path is made of; everything else is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Other,
}

fn tokens(code: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_alphabetic() || c == '_' {
            let mut end = at + c.len_utf8();
            while let Some(&(k, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = k + d.len_utf8();
                chars.next();
            }
            let word = &code[at..end];
            // A raw identifier `r#name` is `name`.
            if word == "r" && chars.peek().is_some_and(|&(_, d)| d == '#') {
                chars.next();
                continue;
            }
            out.push(Token::Ident(word));
        } else if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|&(_, d)| d.is_alphanumeric() || d == '_')
            {
                chars.next();
            }
            out.push(Token::Other);
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push(Token::PathSep);
        } else if !c.is_whitespace() {
            out.push(match c {
                '{' => Token::Open,
                '}' => Token::Close,
                ',' => Token::Comma,
                '*' => Token::Star,
                _ => Token::Other,
            });
        }
    }
    out
}

/// A path of a tree, and in a `use`, the name it binds (`None` for a glob or a group's prefix).
struct Leaf {
    path: Vec<String>,
    binds: Option<String>,
}

/// Reads the path tree at `i` (`a::b`, `a::{self, b, c::d as e}`, `a::*`, `::ext::x`) below
/// `prefix` into `leaves` (a group's prefix is a leaf too: it names that module); returns the
/// index after it.
fn tree(tokens: &[Token<'_>], mut i: usize, prefix: &[String], leaves: &mut Vec<Leaf>) -> usize {
    let mut path = prefix.to_vec();
    if tokens.get(i) == Some(&Token::PathSep) {
        // `::name` is another crate.
        path.push("::".to_string());
        i += 1;
    }
    loop {
        match tokens.get(i) {
            Some(Token::Ident(name)) => {
                path.push(name.to_string());
                i += 1;
                if tokens.get(i) == Some(&Token::PathSep) {
                    i += 1;
                    continue;
                }
                let mut binds = path.last().cloned();
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                    binds = path.last().cloned();
                }
                if tokens.get(i) == Some(&Token::Ident("as")) {
                    if let Some(Token::Ident(alias)) = tokens.get(i + 1) {
                        binds = Some(alias.to_string());
                        i += 2;
                    }
                }
                if binds.as_deref() == Some("_") {
                    binds = None;
                }
                leaves.push(Leaf { path, binds });
                return i;
            }
            Some(Token::Open) => {
                leaves.push(Leaf {
                    path: path.clone(),
                    binds: None,
                });
                i += 1;
                loop {
                    match tokens.get(i) {
                        None => return i,
                        Some(Token::Close) => return i + 1,
                        Some(Token::Comma) => i += 1,
                        Some(_) => {
                            let next = tree(tokens, i, &path, leaves);
                            i = if next == i { i + 1 } else { next };
                        }
                    }
                }
            }
            Some(Token::Star) => {
                leaves.push(Leaf { path, binds: None });
                return i + 1;
            }
            // The path ends after a `::` (`Vec::<u8>::new`, `<T as X>::f`).
            _ => {
                if path.len() > prefix.len() {
                    leaves.push(Leaf { path, binds: None });
                }
                return i;
            }
        }
    }
}

/// Tarjan's strongly connected components of more than one module, each sorted by name.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for &v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(v, edges, &mut s);
        }
    }
    s.found.sort();
    s.found
}

/// A shortest circle through the first module of `component` (breadth first, inside it), the
/// first module repeated at the end.
fn shortest_circle(edges: &BTreeMap<&str, BTreeSet<&str>>, component: &[&str]) -> Vec<String> {
    let start = component[0];
    let inside: BTreeSet<&str> = component.iter().copied().collect();
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in edges.get(v).into_iter().flatten() {
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                let mut circle = vec![start.to_string()];
                let mut at = v;
                while at != start {
                    circle.push(at.to_string());
                    at = came_from[at];
                }
                circle.push(start.to_string());
                circle.reverse();
                return circle;
            }
            if !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    // A strongly connected component always closes; keep its members if it somehow did not.
    component.iter().map(|m| m.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> Crate {
        Crate::new(
            &files
                .iter()
                .map(|(m, t)| (m.to_string(), t.to_string()))
                .collect(),
        )
    }

    fn circles(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        crate_of(files)
            .circles()
            .into_iter()
            .map(|c| c.modules)
            .collect()
    }

    /// The schema's format tree as it stood at 8c17d2b: `events` reaches `table` only through
    /// its child `fast`, which it names as `fast::`; `table` names `records`, which names
    /// `events`.
    const FORMAT_AT_8C17D2B: &[(&str, &str)] = &[
        ("", "pub mod format; pub use format::events::Pass;"),
        (
            "format",
            "pub mod events; pub mod records; pub mod table; pub mod diagnostics;",
        ),
        ("format::diagnostics", "pub enum Category { Syntax }"),
        (
            "format::events",
            "mod fast; use crate::format::diagnostics::Category;\n\
             pub(crate) use fast::Raw;\n\
             pub enum Pass { Forward }\n\
             fn decode(line: &[u8]) -> Option<Raw<'_>> { fast::decode(line) }",
        ),
        (
            "format::events::fast",
            "use crate::format::table::{Inputs, OpRow};\n\
             use super::{Pass, TraceEvent};\n\
             pub(crate) enum Raw<'a> { Op(OpRow<'a>) }",
        ),
        (
            "format::table",
            "use crate::format::records::{Lined, MemoryRecord};\n\
             pub struct OpRow<'a> { pub line: u64, pub name: &'a str }",
        ),
        (
            "format::records",
            "use crate::format::events::{CompactString, MemoryAction, Pass};\n\
             pub struct Lined<T> { pub line: u64, pub value: T }",
        ),
    ];

    #[test]
    fn the_format_circle_of_8c17d2b_is_found() {
        let found = crate_of(FORMAT_AT_8C17D2B).circles();
        assert_eq!(
            found,
            vec![Circle {
                modules: vec![
                    "format::events".into(),
                    "format::table".into(),
                    "format::records".into(),
                    "format::events".into()
                ],
                because: vec![
                    "format::events::fast names format::table".into(),
                    "format::table names format::records".into(),
                    "format::records names format::events".into(),
                ],
            }]
        );
    }

    #[test]
    fn moving_the_row_building_into_table_breaks_it() {
        // The fix made in the schema: `fast` names only its parent; `table` builds its rows
        // from `fast`'s records.
        let mut files = FORMAT_AT_8C17D2B.to_vec();
        files[4].1 = "use super::{Pass, TraceEvent}; pub(crate) struct RawOp<'a>(&'a str);";
        files[5].1 = "use crate::format::records::Lined;\n\
                      use crate::format::events::RawOp;\n\
                      pub struct OpRow<'a> { pub name: &'a str }";
        assert_eq!(circles(&files), Vec::<Vec<String>>::new());
    }

    #[test]
    fn a_circle_through_use_paths_is_found() {
        let files = [
            ("", "pub mod a; pub mod b; pub mod c;"),
            ("a", "use crate::b::Thing;"),
            ("b", "pub fn f() -> crate::c::X { todo() }"),
            ("c", "use crate::{a::Other, d};"),
        ];
        assert_eq!(circles(&files), vec![vec!["a", "b", "c", "a"]]);
    }

    #[test]
    fn a_module_counts_with_everything_under_it() {
        // `a::deep::x` names `b::inner`, `b::inner::y` names `a`: the circle is `a ↔ b`.
        let files = [
            ("", "pub mod a; pub mod b;"),
            ("a", "pub mod deep; pub struct A;"),
            ("a::deep", "pub mod x;"),
            ("a::deep::x", "fn f(_: crate::b::inner::B) {}"),
            ("b", "pub mod inner;"),
            ("b::inner", "pub mod y; pub struct B;"),
            ("b::inner::y", "use crate::a::A;"),
        ];
        assert_eq!(circles(&files), vec![vec!["a", "b", "a"]]);
        let found = crate_of(&files).circles();
        assert_eq!(
            found[0].because,
            vec!["a::deep::x names b::inner", "b::inner::y names a"]
        );
    }

    #[test]
    fn ancestors_and_descendants_are_not_siblings() {
        // A parent naming its child and the child naming its parent (or grandparent) in every
        // spelling is no circle.
        let files = [
            ("", "pub mod p; pub use p::q::Q;"),
            (
                "p",
                "pub mod q; pub use q::Q; pub use self::q::R; fn f() { q::make(); }",
            ),
            (
                "p::q",
                "use super::P; use crate::p::Other; use super::super::Root; fn g(_: crate::Q) {}",
            ),
        ];
        assert_eq!(circles(&files), Vec::<Vec<String>>::new());
    }

    #[test]
    fn super_self_and_child_paths_resolve() {
        let files = [
            ("", ""),
            ("p", "pub mod x; pub mod y; pub mod z;"),
            ("p::x", "use super::y::Y;"),
            ("p::y", "fn f() { self::inner(); super::z::g(); }"),
            ("p::z", "pub mod deep;"),
            ("p::z::deep", "use super::super::{x::X, y};"),
        ];
        assert_eq!(circles(&files), vec![vec!["p::x", "p::y", "p::z", "p::x"]]);
    }

    #[test]
    fn reexports_are_followed_to_where_the_item_lives() {
        // `b` names `a::X` through the parent's re-export (written with the parent's own
        // `a::` child path), and through the crate root's; `a` names `b`.
        for spelling in [
            "use super::X;",
            "fn f(_: crate::Y) {}",
            "use crate::p::Z as W;",
        ] {
            let files = [
                ("", "pub mod p; pub use p::Y;"),
                (
                    "p",
                    "pub mod a; pub mod b; pub use a::{X, Y}; pub use a::X as Z;",
                ),
                ("p::a", "use crate::p::b::B; pub struct X; pub struct Y;"),
                ("p::b", spelling),
            ];
            assert_eq!(
                circles(&files),
                vec![vec!["p::a", "p::b", "p::a"]],
                "{spelling}"
            );
        }
    }

    #[test]
    fn names_a_module_imports_are_followed() {
        let files = [
            ("", "pub mod a; pub mod b;"),
            ("a", "use crate::b; fn f() { b::g(); }"),
            (
                "b",
                "use crate::a::Thing as Other; fn g() -> Other { Other::new() }",
            ),
        ];
        assert_eq!(circles(&files), vec![vec!["a", "b", "a"]]);
    }

    #[test]
    fn comments_strings_and_test_modules_are_not_imports() {
        let files = [
            ("", ""),
            ("a", "use crate::b::X;"),
            (
                "b",
                "// see crate::a::Y\n/* crate::a::Z */ const S: &str = \"crate::a::W\";\n\
                 const R: &str = r#\"crate::a::V\"#; const C: char = '{';\n\
                 #[cfg(test)]\nmod tests { use crate::a::Y; fn f() { let _ = '}'; } }\n\
                 fn g<'a>(x: &'a str) -> &'a str { x }",
            ),
        ];
        assert!(circles(&files).is_empty());
        // The same reference outside the test module is a circle.
        let files = [
            ("", ""),
            ("a", "use crate::b::X;"),
            ("b", "use crate::a::Y;"),
        ];
        assert_eq!(circles(&files), vec![vec!["a", "b", "a"]]);
    }

    #[test]
    fn other_crates_and_local_items_are_not_modules() {
        let files = [
            ("", "pub mod a; pub mod b;"),
            (
                "a",
                "use std::fmt; use ::b::X; fn f() { let v = Vec::<u8>::new(); \
                 <u8 as b::Tr>::f(); core::mem::drop(v); }",
            ),
            ("b", "use crate::a::A;"),
        ];
        // `::b::X` is the crate `b`; `b::Tr` after `as` is a path (written in `a`, `b` is not
        // its child, and `a` imports no `b`).
        assert!(circles(&files).is_empty());
    }
}
