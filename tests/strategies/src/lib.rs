//! What the parsers' property tests generate, defined once: text a hostile
//! peer would send, any JSON value made of it, and the walk over a sound
//! document that lets a test change one key at a time. Each parser's tests
//! add the texts that matter to it (targets almost right, IDs, roots) and keep
//! their own properties.
//!
//! Also the protocol tables of `docs/` ([`docs`]), read as the tests of both
//! sides of a protocol check themselves against them.
//!
//! A dev-dependency only: no component or host build links it.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::string::string_regex;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

/// The number of cases `PROPTEST_CASES` sets (256 by default), with no
/// failure files written into the source tree.
pub fn default_cases() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

/// Exactly `n` cases, with no failure files written into the source tree.
pub fn cases(n: u32) -> Config {
    Config {
        failure_persistence: None,
        ..Config::with_cases(n)
    }
}

/// Text a hostile document or peer would hold: any Unicode; up to 40
/// characters of `class` (a regex character class body: separators, controls,
/// shell and systemd metacharacters); one of `samples` (the values almost
/// right for the parser at hand); or `unit` repeated into runs of up to
/// 10 KB.
pub fn hostile_text(
    class: &'static str,
    samples: &[&'static str],
    unit: &'static str,
) -> BoxedStrategy<String> {
    let regex = |pattern: String| {
        string_regex(&pattern).unwrap_or_else(|e| panic!("{pattern:?} is not a regex: {e}"))
    };
    prop_oneof![
        any::<String>(),
        regex(format!("[{class}]{{0,40}}")),
        prop::sample::select(samples.to_vec()).prop_map(str::to_string),
        (regex(format!("[{unit}]{{1,4}}")), 1usize..3000).prop_map(|(unit, n)| unit.repeat(n)),
    ]
    .boxed()
}

/// Any JSON value up to three levels deep, its strings and keys drawn from
/// `text`.
pub fn json_value(text: BoxedStrategy<String>) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text.clone(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// What a property puts in place of a key ([`change_key`]): any of `value`
/// two times in three, else a string of `text`; or nothing (the key deleted).
pub fn replacement(
    value: BoxedStrategy<Value>,
    text: impl Strategy<Value = String> + 'static,
) -> BoxedStrategy<Option<Value>> {
    prop::option::of(prop_oneof![2 => value, 1 => text.prop_map(Value::String)]).boxed()
}

/// Every key path of `v`'s objects, outermost first.
pub fn key_paths(v: &Value) -> Vec<Vec<String>> {
    fn walk(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if let Value::Object(map) = v {
            for (k, child) in map {
                prefix.push(k.clone());
                out.push(prefix.clone());
                walk(child, prefix, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The object at `path` of `v`; panics when there is none (a test's own
/// document is at fault).
pub fn object_at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Map<String, Value> {
    let mut at = v;
    for k in path {
        at = at
            .get_mut(k)
            .unwrap_or_else(|| panic!("no key {k:?} on the way to {path:?}"));
    }
    at.as_object_mut()
        .unwrap_or_else(|| panic!("{path:?} is not an object"))
}

/// The key at `path` of `v` set to `replacement`, or removed where there is
/// none: the one change a property makes to a sound document.
pub fn set_or_remove(v: &mut Value, path: &[String], replacement: Option<Value>) {
    let (last, parent) = path
        .split_last()
        .unwrap_or_else(|| panic!("an empty key path"));
    let object = object_at(v, parent);
    match replacement {
        Some(value) => object.insert(last.clone(), value),
        None => object.remove(last),
    };
}

/// One key of `v`, at any depth, chosen by `pick`, set to `replacement` or
/// removed ([`set_or_remove`]): its path.
pub fn change_key(
    v: &mut Value,
    pick: &prop::sample::Index,
    replacement: Option<Value>,
) -> Vec<String> {
    let path = pick.get(&key_paths(v)).clone();
    set_or_remove(v, &path, replacement);
    path
}

/// The paths of `v`'s objects, `v` itself (the empty path) first, then the
/// others outermost first: where a test may add a key.
pub fn object_paths(v: &Value) -> Vec<Vec<String>> {
    let mut objects = vec![Vec::new()];
    objects.extend(key_paths(v).into_iter().filter(|p| {
        p.iter()
            .try_fold(v, |at, k| at.get(k))
            .is_some_and(Value::is_object)
    }));
    objects
}

/// What [`add_key`] made: the changed document, the object the key went
/// into, the key's path, and whether the key is new there.
pub struct Added {
    pub doc: Value,
    pub parent: Vec<String>,
    pub path: Vec<String>,
    pub fresh: bool,
}

/// `v` with `key` set to `value` in one of its objects ([`object_paths`]),
/// chosen by `pick`.
pub fn add_key(v: &Value, pick: &prop::sample::Index, key: &str, value: Value) -> Added {
    let parent = pick.get(&object_paths(v)).clone();
    let mut doc = v.clone();
    let object = object_at(&mut doc, &parent);
    let fresh = !object.contains_key(key);
    object.insert(key.to_string(), value);
    let mut path = parent.clone();
    path.push(key.to_string());
    Added {
        doc,
        parent,
        path,
        fresh,
    }
}

/// A workspace root as the layout joins it: absolute, normalized, without
/// control characters.
pub fn is_normalized_root(root: &str) -> bool {
    let normalized = root == "/"
        || root.strip_prefix('/').is_some_and(|rest| {
            rest.split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
        });
    normalized && !root.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn key_paths_walk_every_object_outermost_first() {
        let doc = json!({"a": {"b": 1, "c": {"d": []}}, "e": [{"f": 1}]});
        let paths = key_paths(&doc);
        let as_text: Vec<String> = paths.iter().map(|p| p.join(".")).collect();
        assert_eq!(as_text, ["a", "a.b", "a.c", "a.c.d", "e"]);
        let mut doc = doc;
        object_at(&mut doc, &paths[2]).insert("g".into(), json!(true));
        assert_eq!(doc["a"]["c"]["g"], json!(true));
    }

    #[test]
    fn a_key_is_set_removed_or_added_where_objects_are() {
        let mut doc = json!({"a": {"b": 1, "c": {"d": []}}, "e": [{"f": 1}]});
        let path = |p: &str| p.split('.').map(String::from).collect::<Vec<_>>();
        set_or_remove(&mut doc, &path("a.b"), Some(json!(2)));
        set_or_remove(&mut doc, &path("a.c.d"), None);
        assert_eq!(doc, json!({"a": {"b": 2, "c": {}}, "e": [{"f": 1}]}));
        let objects: Vec<String> = object_paths(&doc).iter().map(|p| p.join(".")).collect();
        assert_eq!(objects, ["", "a", "a.c"]);
        let mut runner = TestRunner::deterministic();
        let (mut parents, mut changed_paths) = (Vec::new(), Vec::new());
        for _ in 0..200 {
            let pick = any::<prop::sample::Index>()
                .new_tree(&mut runner)
                .unwrap()
                .current();
            let a = add_key(&doc, &pick, "b", json!(3));
            let at = a.parent.iter().fold(&doc, |at, k| &at[k]);
            assert_eq!(a.fresh, at.get("b").is_none(), "{:?}", a.parent);
            assert_eq!(a.path, [a.parent.clone(), path("b")].concat());
            assert_eq!(a.path.iter().fold(&a.doc, |at, k| &at[k]), &json!(3));
            parents.push(a.parent.join("."));
            let mut changed = doc.clone();
            let at = change_key(&mut changed, &pick, None);
            assert!(key_paths(&changed).len() < key_paths(&doc).len(), "{at:?}");
            changed_paths.push(at.join("."));
        }
        for seen in [parents, changed_paths] {
            let mut seen = seen;
            seen.sort();
            seen.dedup();
            assert!(seen.len() > 1, "every pick chose {seen:?}");
        }
        assert!(is_normalized_root("/") && is_normalized_root("/srv/a"));
        assert!(!is_normalized_root("/srv/../a") && !is_normalized_root("srv"));
    }

    #[test]
    fn hostile_text_reaches_every_arm() {
        let text = hostile_text("a/", &["sample"], "xy");
        let mut runner = TestRunner::deterministic();
        let mut seen = (false, false);
        for _ in 0..2000 {
            let t = text.new_tree(&mut runner).unwrap().current();
            seen.0 |= t == "sample";
            seen.1 |= t.len() > 1000 && t.chars().all(|c| c == 'x' || c == 'y');
        }
        assert_eq!(seen, (true, true));
    }
}

/// The protocol tables of `docs/`, read as the tests of both sides of a
/// protocol check themselves against them.
pub mod docs {
    use std::collections::BTreeSet;
    use std::path::Path;

    /// A row of the table of the worker's frames (`docs/architecture.md`,
    /// "The worker's frames").
    #[derive(Debug, Clone)]
    pub struct FrameRow {
        /// The frame's name (`request`, `answer`, ...).
        pub name: String,
        /// Who sends it: `host` or `worker`.
        pub from: String,
        /// Its header's keys, and whether each may be left out (`?`).
        pub keys: Vec<(String, bool)>,
        /// The keys whose numbers are the lengths of the data, in order.
        pub data: Vec<String>,
    }

    impl FrameRow {
        /// Its header's keys.
        pub fn key_set(&self) -> BTreeSet<&str> {
            self.keys.iter().map(|(k, _)| k.as_str()).collect()
        }
    }

    /// The table of the worker's frames, from the tree at `root`.
    pub fn worker_frames(root: &Path) -> Vec<FrameRow> {
        let path = root.join("docs/architecture.md");
        let page =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let section = page
            .split("## The worker's frames")
            .nth(1)
            .expect("docs/architecture.md has a section \"The worker's frames\"");
        let quoted = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let rows: Vec<FrameRow> = section
            .lines()
            .skip_while(|l| !l.starts_with("| frame |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                FrameRow {
                    name: cells[1].to_owned(),
                    from: cells[2].to_owned(),
                    keys: quoted(cells[3])
                        .into_iter()
                        .map(|k| match k.strip_suffix('?') {
                            Some(k) => (k.to_owned(), true),
                            None => (k, false),
                        })
                        .collect(),
                    data: quoted(cells[4]),
                }
            })
            .collect();
        assert!(
            rows.len() >= 10,
            "{}: only {} rows read",
            path.display(),
            rows.len()
        );
        rows
    }
}
