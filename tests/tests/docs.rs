//! The README and `docs/`: every relative link names a file that exists and,
//! when it names a section, a heading that exists there (as GitHub spells
//! its anchors), and the README links every page of `docs/`. No test host
//! needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use occ_e2e::repo_root;

/// The pages a newcomer reads: the README, every page of `docs/` and the
/// helper's protocol and the sandbox scripts' page.
fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages = vec![
        root.join("README.md"),
        root.join("helper/README.md"),
        root.join("guest-ssh-sandbox/scripts/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ holds no page");
    pages.extend(docs);
    pages
}

/// The text outside fenced code blocks: a link in an example is not a link.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = &after[..end];
        if !target.is_empty() && !target.contains(char::is_whitespace) {
            targets.push(target.to_string());
        }
        rest = &after[end..];
    }
    targets
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens,
/// punctuation other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a page, a repeated heading's as `-1`, `-2`, ...
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut seen = BTreeSet::new();
    for line in prose(&text).lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading.replace('`', "").as_str());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for target in link_targets(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !file.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && !anchors(&file).contains(anchor)
            {
                broken.push(format!(
                    "{}: {target}: {} has no heading #{anchor}",
                    page.display(),
                    file.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 20, "only {checked} relative links found");
}

#[test]
fn the_readme_links_every_docs_page() {
    let root = repo_root();
    let readme = prose(&std::fs::read_to_string(root.join("README.md")).unwrap());
    let linked: BTreeSet<String> = link_targets(&readme)
        .into_iter()
        .map(|t| t.split('#').next().unwrap().to_string())
        .collect();
    for page in pages() {
        let Ok(rel) = page.strip_prefix(&root) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if rel.starts_with("docs/") {
            assert!(linked.contains(&rel), "README.md does not link {rel}");
        }
    }
}

#[test]
fn anchors_are_spelled_as_github_spells_them() {
    assert_eq!(
        slug("The sandbox scripts: what they act on"),
        "the-sandbox-scripts-what-they-act-on"
    );
    assert_eq!(
        slug("What OpenClaw's users report against its own SSH backend, and here"),
        "what-openclaws-users-report-against-its-own-ssh-backend-and-here"
    );
    assert_eq!(
        slug("Faults, concurrency and scale"),
        "faults-concurrency-and-scale"
    );
    let links = link_targets("see [a](docs/x.md#y) and [b\n c](z.md), not [d] (e)");
    assert_eq!(links, vec!["docs/x.md#y", "z.md"]);
}
