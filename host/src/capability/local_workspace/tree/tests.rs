//! The local tree walked into a tar stream: what is taken, what is refused
//! or skipped, and the bounds.

use super::*;
use std::os::unix::fs::{PermissionsExt, symlink};

const BOUNDS: Bounds = Bounds {
    max_bytes: 1 << 30,
    max_entries: 100_000,
};

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    std::fs::set_permissions(root.join("a.txt"), std::fs::Permissions::from_mode(0o751)).unwrap();
    let long = "n".repeat(150);
    std::fs::write(root.join("src/deep").join(&long), vec![7u8; 70_000]).unwrap();
    std::fs::write(root.join("src/ünï.txt"), "u").unwrap();
    symlink("../a.txt", root.join("src/link")).unwrap();
    dir
}

#[test]
fn python_reads_what_we_write() {
    let dir = tree();
    let root = dir.path().canonicalize().unwrap();
    let mut out = Vec::new();
    let summary = write_tar(&root, BOUNDS, &mut out).unwrap();
    assert_eq!(
        summary,
        Summary {
            files: 3,
            directories: 3,
            symlinks: 1,
            bytes: 5 + 70_000 + 1
        }
    );
    let listing = std::process::Command::new("python3")
        .args(["-c", "import sys, tarfile\nfor m in tarfile.open(fileobj=sys.stdin.buffer, mode='r|'):\n    print(m.name, m.type.decode(), oct(m.mode), m.size, m.linkname)"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(&out)?;
            child.wait_with_output()
        })
        .unwrap();
    let text = String::from_utf8(listing.stdout).unwrap();
    let long = format!("src/deep/{} 0 0o644 70000 ", "n".repeat(150));
    for line in [
        ".",
        "a.txt 0 0o751 5 ",
        "src/link 2 0o777 0 ../a.txt",
        &long,
        "src/ünï.txt 0 0o644 1 ",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "{line:?} missing from:\n{text}"
        );
    }
}

#[test]
fn escaping_links_special_files_and_bounds_are_refused() {
    let dir = tree();
    let root = dir.path().canonicalize().unwrap();
    symlink("/etc/passwd", root.join("abs")).unwrap();
    let Err(WalkError::Refused(m)) = summarize(&root, BOUNDS) else {
        panic!()
    };
    assert_eq!(
        m,
        "Remote sandbox upload refuses symlink escaping the workspace: abs"
    );
    std::fs::remove_file(root.join("abs")).unwrap();
    symlink("../../outside", root.join("src/up")).unwrap();
    assert!(
        matches!(summarize(&root, BOUNDS), Err(WalkError::Refused(m)) if m.ends_with("src/up"))
    );
    std::fs::remove_file(root.join("src/up")).unwrap();
    // Lexically inside, but through a link that leads out.
    symlink("..", root.join("src/parent")).unwrap();
    symlink("src/parent/..", root.join("sneaky")).unwrap();
    assert!(
        matches!(summarize(&root, BOUNDS), Err(WalkError::Refused(m)) if m.ends_with("sneaky"))
    );
    std::fs::remove_file(root.join("sneaky")).unwrap();
    std::fs::remove_file(root.join("src/parent")).unwrap();
    let fifo = cstr(root.join("pipe").to_str().unwrap());
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fifo.as_c_str(),
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(
        matches!(summarize(&root, BOUNDS), Err(WalkError::Refused(m)) if m.contains("pipe is a socket, device or FIFO"))
    );
    std::fs::remove_file(root.join("pipe")).unwrap();
    assert!(summarize(&root, BOUNDS).is_ok());
    let small = Bounds {
        max_bytes: 100,
        ..BOUNDS
    };
    assert!(
        matches!(summarize(&root, small), Err(WalkError::Refused(m)) if m.contains("more than 100 bytes"))
    );
    let few = Bounds {
        max_entries: 2,
        ..BOUNDS
    };
    assert!(
        matches!(summarize(&root, few), Err(WalkError::Refused(m)) if m.contains("more than 2 entries"))
    );
}

#[test]
fn a_deep_tree_is_walked_without_recursion_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    // Exactly at the bound: walked whole.
    let mut path = root.clone();
    for _ in 0..MAX_DEPTH - 1 {
        path.push("d");
    }
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("leaf"), "x").unwrap();
    let s = summarize(&root, BOUNDS).unwrap();
    assert_eq!((s.directories, s.files), (MAX_DEPTH as u64, 1));
    // One deeper (and then 1,500 deep): refused, naming where, not a stack
    // overflow or EMFILE.
    path.push("d");
    std::fs::create_dir(&path).unwrap();
    let Err(WalkError::Refused(m)) = summarize(&root, BOUNDS) else {
        panic!()
    };
    assert!(
        m.contains(&format!("more than {MAX_DEPTH} directories deep")),
        "{m}"
    );
    assert!(m.starts_with("d/d/"), "{m}");
    for _ in 0..1500 - MAX_DEPTH {
        path.push("d");
    }
    std::fs::create_dir_all(&path).unwrap();
    assert!(
        matches!(summarize(&root, BOUNDS), Err(WalkError::Refused(m)) if m.contains("directories deep"))
    );
    let mut out = Vec::new();
    assert!(matches!(
        write_tar(&root, BOUNDS, &mut out),
        Err(WalkError::Refused(_))
    ));
}

#[test]
fn a_hard_link_to_a_file_outside_is_refused_and_one_inside_is_sent() {
    let outer = tempfile::tempdir().unwrap();
    let base = outer.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("a"), "both names inside").unwrap();
    std::fs::hard_link(root.join("a"), root.join("sub/b")).unwrap();
    let s = summarize(&root, BOUNDS).unwrap();
    assert_eq!(s.files, 2);
    std::fs::write(base.join("secret"), "outside").unwrap();
    std::fs::hard_link(base.join("secret"), root.join("sub/stolen")).unwrap();
    let Err(WalkError::Refused(m)) = summarize(&root, BOUNDS) else {
        panic!()
    };
    assert!(m.starts_with("sub/stolen is a hard link"), "{m}");
    let mut out = Vec::new();
    assert!(matches!(
        write_tar(&root, BOUNDS, &mut out),
        Err(WalkError::Refused(_))
    ));
    // Nothing of the file outside was streamed before the refusal.
    assert!(!out.windows(7).any(|w| w == b"outside"));
    assert!(!out.windows(6).any(|w| w == b"stolen"));
}

#[test]
fn lexical_link_rule() {
    for (rel, target, inside) in [
        ("a", "b", true),
        ("d/a", "../b", true),
        ("a", "../b", false),
        ("d/a", "../../b", false),
        ("a", "/etc", false),
        ("a", "", false),
        ("d/e/a", "./../x/../../y", true),
    ] {
        assert_eq!(
            link_stays_inside(rel.as_bytes(), target.as_bytes()),
            inside,
            "{rel} -> {target}"
        );
    }
}

#[test]
fn pax_records_count_themselves() {
    let r = pax_record("path", b"abc");
    assert_eq!(r, b"12 path=abc\n");
    let r = pax_record("path", &[b'x'; 95]);
    assert_eq!(
        String::from_utf8(r.clone())
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap(),
        r.len()
    );
}
