//! Tests of [`super`] on real trees in a temporary directory: escape attempts through links,
//! `..` and swapped names are refused with their exact codes, atomic writes, and the handle operations.

use super::*;
use std::fs;
use std::io::Read;

/// A scratch tree: `base/root` is the jail, `base/root2` a sibling sharing its prefix, and
/// `base/outside` holds a secret nothing may read through the jail.
struct Sandbox {
    base: PathBuf,
    root: PathBuf,
    // Only the link tests, which are Unix-only, point into it.
    #[cfg_attr(not(unix), allow(dead_code))]
    outside: PathBuf,
}

const SECRET: &str = "SECRET-MARKER-outside-the-root";

impl Sandbox {
    fn new() -> Self {
        let base = std::env::temp_dir().join(format!("jail-test-{}", uuid::Uuid::new_v4()));
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(base.join("root2")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("a/b/c.txt"), "nested").unwrap();
        fs::write(root.join("top.txt"), "top").unwrap();
        fs::write(base.join("root2/file.txt"), "sibling").unwrap();
        fs::write(outside.join("secret.txt"), SECRET).unwrap();
        Self {
            base,
            root,
            outside,
        }
    }

    fn jail(&self) -> Jail {
        Jail::open(&self.root).unwrap()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn read(jail: &Jail, path: &JailedPath) -> Result<String, JailError> {
    let mut text = String::new();
    jail.open_read(path)?.read_to_string(&mut text).unwrap();
    Ok(text)
}

fn code_of<T: std::fmt::Debug>(result: Result<T, JailError>) -> &'static str {
    result.unwrap_err().code()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn escape_attempts_are_refused_with_exact_codes() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    symlink(sb.outside.join("secret.txt"), sb.root.join("abs_out")).unwrap();
    symlink(&sb.outside, sb.root.join("abs_out_dir")).unwrap();
    symlink("../outside/secret.txt", sb.root.join("rel_out")).unwrap();
    symlink("../../../outside", sb.root.join("a/b/rel_out_dir")).unwrap();
    symlink("loop_b", sb.root.join("loop_a")).unwrap();
    symlink("loop_a", sb.root.join("loop_b")).unwrap();
    symlink(sb.outside.join("not-there"), sb.root.join("dangling_out")).unwrap();
    symlink("../outside/not-there", sb.root.join("dangling_rel_out")).unwrap();
    let jail = sb.jail();
    let outside_abs = sb.outside.join("secret.txt").display().to_string();
    let sibling = sb.base.join("root2/file.txt").display().to_string();
    let sibling_dir = sb.base.join("root2").display().to_string();
    let climbing_abs = format!("{}/../outside/secret.txt", sb.root.display());
    let long = "x/".repeat(PATH_MAX_CHARS);
    let cases: Vec<(&str, &str)> = vec![
        ("..", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("../..", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("a/../../x", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (
            "a/b/../../../outside/secret.txt",
            "PATH_OUTSIDE_ALLOWED_ROOT",
        ),
        ("missing/../../x", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (&outside_abs, "PATH_OUTSIDE_ALLOWED_ROOT"),
        (&climbing_abs, "PATH_OUTSIDE_ALLOWED_ROOT"),
        (&sibling, "PATH_OUTSIDE_ALLOWED_ROOT"),
        (&sibling_dir, "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("/", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("/etc/passwd", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("abs_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("abs_out_dir/secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("abs_out_dir/new/file.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("rel_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("a/b/rel_out_dir/secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("dangling_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("dangling_rel_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("loop_a", "INTERNAL_ERROR"),
        ("a/\0b", "PATH_INVALID_CHARS"),
        ("", "PATH_INVALID_CHARS"),
        (&long, "PATH_INVALID_CHARS"),
    ];
    for (wire, expected) in &cases {
        let shown = wire.chars().take(80).collect::<String>();
        assert_eq!(code_of(jail.resolve(wire)), *expected, "resolve({shown:?})");
    }
    assert!(matches!(
        jail.resolve("loop_a"),
        Err(JailError::SymlinkLoop { .. })
    ));
    // A write through a dangling link out must not create the file outside.
    for wire in ["dangling_out", "dangling_rel_out"] {
        let err = jail
            .resolve(wire)
            .and_then(|p| jail.write_atomic(&p, b"x", true))
            .unwrap_err();
        assert_eq!(err.code(), "PATH_OUTSIDE_ALLOWED_ROOT");
    }
    assert!(!sb.outside.join("not-there").exists());
    assert_eq!(entries(&sb.outside), ["secret.txt"]);
}

#[cfg(unix)]
#[test]
fn the_handle_refuses_escapes_even_for_names_resolve_never_checked() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    let jail = sb.jail();
    // Made before the links exist, as if a swap happened right after resolution.
    let link = jail.resolve("later_link").unwrap();
    let through_dir = jail.resolve("later_dir/secret.txt").unwrap();
    symlink(sb.outside.join("secret.txt"), sb.root.join("later_link")).unwrap();
    symlink(&sb.outside, sb.root.join("later_dir")).unwrap();
    assert_eq!(code_of(jail.open_read(&link)), "PATH_OUTSIDE_ALLOWED_ROOT");
    assert_eq!(code_of(jail.metadata(&link)), "PATH_OUTSIDE_ALLOWED_ROOT");
    assert_eq!(
        code_of(jail.open_read(&through_dir)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert_eq!(
        code_of(jail.remove_file(&through_dir)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert!(jail.symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        SECRET
    );
    // cap-std's own escape error is the one recognised as an escape.
    let raw = jail.dir.open("../outside/secret.txt").unwrap_err();
    assert_eq!(
        map_io(&raw, Path::new("x")),
        JailError::PathOutsideAllowedRoot
    );
}

#[cfg(unix)]
#[test]
fn inside_paths_resolve_to_canonical_names() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    symlink("a/b/c.txt", sb.root.join("inside_link")).unwrap();
    symlink(sb.root.join("a/b"), sb.root.join("abs_inside_dir")).unwrap();
    symlink("../top.txt", sb.root.join("a/up_link")).unwrap();
    let jail = sb.jail();
    let root_abs = jail.root().to_path_buf();
    let nested_abs = root_abs.join("a/b/c.txt").display().to_string();
    let given_abs = sb.root.join("a/b/c.txt").display().to_string();
    let cases: Vec<(&str, &str)> = vec![
        ("a/b/c.txt", "a/b/c.txt"),
        ("./a/./b/../b/c.txt", "a/b/c.txt"),
        (&nested_abs, "a/b/c.txt"),
        (&given_abs, "a/b/c.txt"),
        ("inside_link", "a/b/c.txt"),
        ("abs_inside_dir/c.txt", "a/b/c.txt"),
        ("a/up_link", "top.txt"),
        ("top.txt", "top.txt"),
        ("missing/new.txt", "missing/new.txt"),
        ("missing/../top.txt", "top.txt"),
        (".", ""),
    ];
    for (wire, expected) in &cases {
        let path = jail.resolve(wire).unwrap();
        assert_eq!(path.relative(), Path::new(expected), "resolve({wire:?})");
        let expected_abs = if expected.is_empty() {
            root_abs.clone()
        } else {
            root_abs.join(expected)
        };
        assert_eq!(path.absolute(), expected_abs, "resolve({wire:?})");
    }
    assert!(jail.resolve(".").unwrap().is_root());
    assert_eq!(
        read(&jail, &jail.resolve("inside_link").unwrap()).unwrap(),
        "nested"
    );
    let root_path = jail.resolve(&root_abs.display().to_string()).unwrap();
    assert!(root_path.is_root());
    // Not following the last component names the link itself.
    let link = jail.resolve_no_follow("inside_link").unwrap();
    assert_eq!(link.relative(), Path::new("inside_link"));
    assert!(jail.symlink_metadata(&link).unwrap().is_symlink());
    assert!(jail.metadata(&link).unwrap().is_file());
    let home = jail
        .resolve_with("~/root/top.txt", Some(&sb.base), true)
        .unwrap();
    assert_eq!(home.relative(), Path::new("top.txt"));
    assert_eq!(
        code_of(jail.resolve_with("~/outside/secret.txt", Some(&sb.base), true)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    let literal = jail.resolve_with("~alice/x", Some(&sb.base), true).unwrap();
    assert_eq!(literal.relative(), Path::new("~alice/x"));
}

#[test]
fn atomic_write_replaces_content_and_leaves_no_temporary() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let target = jail.resolve("a/b/c.txt").unwrap();
    jail.write_atomic(&target, b"replaced", false).unwrap();
    assert_eq!(read(&jail, &target).unwrap(), "replaced");
    jail.write_atomic(&target, b"", false).unwrap();
    assert_eq!(read(&jail, &target).unwrap(), "");
    let fresh = jail.resolve("fresh.txt").unwrap();
    jail.write_atomic(&fresh, b"new", false).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("fresh.txt")).unwrap(),
        "new"
    );
    assert_eq!(entries(&sb.root.join("a/b")), ["c.txt"]);
    assert_eq!(entries(&sb.root), ["a", "fresh.txt", "top.txt"]);
    let dir = jail.resolve("a").unwrap();
    assert_eq!(
        code_of(jail.write_atomic(&dir, b"x", false)),
        "INTERNAL_ERROR"
    );
    assert_eq!(
        code_of(jail.write_atomic(&jail.resolve(".").unwrap(), b"x", false)),
        "INTERNAL_ERROR"
    );
    assert_eq!(entries(&sb.root.join("a")), ["b"]);
}

#[cfg(unix)]
#[test]
fn atomic_write_keeps_mode_refuses_read_only_and_updates_through_inside_links() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let sb = Sandbox::new();
    symlink("a/b/c.txt", sb.root.join("inside_link")).unwrap();
    fs::set_permissions(sb.root.join("top.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    let jail = sb.jail();
    let top = jail.resolve("top.txt").unwrap();
    jail.write_atomic(&top, b"t2", false).unwrap();
    let mode = fs::metadata(sb.root.join("top.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    let via_link = jail.resolve("inside_link").unwrap();
    jail.write_atomic(&via_link, b"via link", false).unwrap();
    assert!(
        fs::symlink_metadata(sb.root.join("inside_link"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(sb.root.join("a/b/c.txt")).unwrap(),
        "via link"
    );
    fs::set_permissions(sb.root.join("top.txt"), fs::Permissions::from_mode(0o444)).unwrap();
    assert!(matches!(
        jail.write_atomic(&top, b"nope", false),
        Err(JailError::PermissionDenied { .. })
    ));
    assert_eq!(fs::read_to_string(sb.root.join("top.txt")).unwrap(), "t2");
}

#[cfg(unix)]
#[test]
fn create_parents_creates_inside_and_refuses_a_parent_link_out() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
    let jail = sb.jail();
    let deep = jail.resolve("x/y/z/file.txt").unwrap();
    assert_eq!(
        code_of(jail.write_atomic(&deep, b"d", false)),
        "PATH_NOT_FOUND"
    );
    assert!(!sb.root.join("x").exists());
    jail.write_atomic(&deep, b"deep", true).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("x/y/z/file.txt")).unwrap(),
        "deep"
    );
    assert_eq!(entries(&sb.root.join("x/y/z")), ["file.txt"]);
    // Refused at resolution...
    assert_eq!(
        code_of(jail.resolve("out_dir/new/file.txt")),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    // ...and, when the parent turns into a link out after resolution, by the handle.
    let late = jail.resolve("late/new/file.txt").unwrap();
    symlink(&sb.outside, sb.root.join("late")).unwrap();
    assert_eq!(
        code_of(jail.write_atomic(&late, b"x", true)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    let flat = jail.resolve("late2/file.txt").unwrap();
    symlink(&sb.outside, sb.root.join("late2")).unwrap();
    assert_eq!(
        code_of(jail.write_atomic(&flat, b"x", false)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert_eq!(entries(&sb.outside), ["secret.txt"]);
    // A dangling link out planted at the target after resolution is replaced, not followed.
    let target = jail.resolve("planted").unwrap();
    symlink(sb.outside.join("planted-out"), sb.root.join("planted")).unwrap();
    jail.write_atomic(&target, b"inside", false).unwrap();
    assert!(!sb.outside.join("planted-out").exists());
    assert_eq!(
        fs::read_to_string(sb.root.join("planted")).unwrap(),
        "inside"
    );
    assert!(
        fs::symlink_metadata(sb.root.join("planted"))
            .unwrap()
            .is_file()
    );
}

#[test]
fn operations_map_errors_precisely() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let missing = jail.resolve("nope.txt").unwrap();
    assert_eq!(code_of(jail.open_read(&missing)), "PATH_NOT_FOUND");
    assert_eq!(code_of(jail.metadata(&missing)), "PATH_NOT_FOUND");
    assert_eq!(code_of(jail.remove_file(&missing)), "PATH_NOT_FOUND");
    let dir = jail.resolve("a").unwrap();
    assert!(matches!(
        jail.open_read(&dir),
        Err(JailError::IsADirectory { .. })
    ));
    assert_eq!(code_of(jail.remove_dir(&dir)), "PATH_NOT_EMPTY");
    let file = jail.resolve("top.txt").unwrap();
    assert!(matches!(
        jail.read_dir(&file),
        Err(JailError::NotADirectory { .. })
    ));
    let names: Vec<OsString> = jail
        .read_dir(&jail.resolve("a/b").unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [OsString::from("c.txt")]);
    let child = jail.child(&dir, OsStr::new("b")).unwrap();
    assert_eq!(child.relative(), Path::new("a/b"));
    assert!(jail.metadata(&child).unwrap().is_dir());
    for bad in ["..", ".", "b/c.txt", "", "/etc"] {
        assert_eq!(
            code_of(jail.child(&dir, OsStr::new(bad))),
            "PATH_INVALID_CHARS"
        );
    }
    let root = jail.resolve(".").unwrap();
    assert_eq!(jail.remove_dir_all(&root), Err(JailError::RootOperation));
    assert_eq!(jail.remove_dir(&root), Err(JailError::RootOperation));
    assert_eq!(jail.rename(&root, &file), Err(JailError::RootOperation));
    assert!(jail.metadata(&root).unwrap().is_dir());
    // Rename within the jail and remove what is left.
    let moved = jail.resolve("moved/top.txt").unwrap();
    assert_eq!(code_of(jail.rename(&file, &moved)), "PATH_NOT_FOUND");
    jail.create_dir_all(&jail.resolve("moved").unwrap())
        .unwrap();
    jail.rename(&file, &moved).unwrap();
    assert_eq!(read(&jail, &moved).unwrap(), "top");
    let target_dir = jail.resolve("moved").unwrap();
    assert_eq!(code_of(jail.rename(&dir, &target_dir)), "PATH_NOT_EMPTY");
    jail.remove_file(&moved).unwrap();
    jail.remove_dir(&target_dir).unwrap();
    jail.remove_dir_all(&dir).unwrap();
    assert_eq!(entries(&sb.root), Vec::<String>::new());
    // Genuine OS errors versus cap-std's escape report.
    let p = Path::new("p");
    let escape = io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a path led outside of the filesystem",
    );
    assert_eq!(map_io(&escape, p), JailError::PathOutsideAllowedRoot);
    let denied = io::Error::from(io::ErrorKind::PermissionDenied);
    assert_eq!(map_io(&denied, p), JailError::PathOutsideAllowedRoot);
    #[cfg(unix)]
    assert_eq!(
        map_io(&io::Error::from_raw_os_error(13), p).code(),
        "INTERNAL_ERROR"
    );
    #[cfg(unix)]
    assert!(matches!(
        map_io(&io::Error::from_raw_os_error(13), p),
        JailError::PermissionDenied { .. }
    ));
    let exists = io::Error::from(io::ErrorKind::AlreadyExists);
    assert_eq!(map_io(&exists, p).code(), "PATH_EXISTS");
    let other = io::Error::from(io::ErrorKind::StorageFull);
    assert_eq!(
        map_io(&other, p),
        JailError::Io {
            path: p.to_path_buf(),
            kind: io::ErrorKind::StorageFull
        }
    );
}

#[test]
fn missing_or_file_root_is_unavailable() {
    let sb = Sandbox::new();
    assert_eq!(
        code_of(Jail::open(&sb.base.join("absent"))),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert!(matches!(
        Jail::open(&sb.root.join("top.txt")),
        Err(JailError::RootUnavailable { .. })
    ));
}

#[test]
fn every_variant_has_its_wire_code_and_a_content_free_message() {
    let p = || PathBuf::from("dir/file.txt");
    let table = [
        (JailError::PathInvalidChars, "PATH_INVALID_CHARS"),
        (JailError::PathTooLong, "PATH_INVALID_CHARS"),
        (JailError::PathReservedName, "PATH_RESERVED_NAME"),
        (
            JailError::PathOutsideAllowedRoot,
            "PATH_OUTSIDE_ALLOWED_ROOT",
        ),
        (
            JailError::RootUnavailable {
                kind: io::ErrorKind::NotFound,
            },
            "PATH_OUTSIDE_ALLOWED_ROOT",
        ),
        (JailError::PathNotFound { path: p() }, "PATH_NOT_FOUND"),
        (JailError::PathExists { path: p() }, "PATH_EXISTS"),
        (JailError::PathNotEmpty { path: p() }, "PATH_NOT_EMPTY"),
        (JailError::NotADirectory { path: p() }, "INTERNAL_ERROR"),
        (JailError::IsADirectory { path: p() }, "INTERNAL_ERROR"),
        (JailError::PermissionDenied { path: p() }, "INTERNAL_ERROR"),
        (JailError::SymlinkLoop { path: p() }, "INTERNAL_ERROR"),
        (JailError::RootOperation, "INTERNAL_ERROR"),
        (
            JailError::Io {
                path: p(),
                kind: io::ErrorKind::StorageFull,
            },
            "INTERNAL_ERROR",
        ),
    ];
    for (err, code) in &table {
        assert_eq!(err.code(), *code, "{err:?}");
        let text = err.to_string();
        assert!(
            !text.contains('/') || text.contains("dir/file.txt"),
            "{text}"
        );
    }
    let root = JailError::PathNotFound {
        path: PathBuf::new(),
    };
    assert_eq!(root.to_string(), "path not found: .");
    assert_eq!(
        JailError::IsADirectory { path: p() }.to_string(),
        "is a directory: dir/file.txt"
    );
}

#[test]
fn windows_naming_rules() {
    let cases = [
        (r"C:\work\con", Err(JailError::PathReservedName)),
        (r"C:\work\CON.txt", Err(JailError::PathReservedName)),
        ("dir/Lpt9.log", Err(JailError::PathReservedName)),
        ("com1", Err(JailError::PathReservedName)),
        (r"\\?\C:\work\aux", Err(JailError::PathReservedName)),
        (r"C:\work\file.txt:stream", Err(JailError::PathInvalidChars)),
        (r"\\?\C:\work\a:b", Err(JailError::PathInvalidChars)),
        ("a<b", Err(JailError::PathInvalidChars)),
        ("a\u{1f}b", Err(JailError::PathInvalidChars)),
        ("what?", Err(JailError::PathInvalidChars)),
        (r"C:\work\com0.txt", Ok(())),
        (r"C:\work\console.txt", Ok(())),
        (r"C:\work\com10", Ok(())),
        (r"C:\work\file.txt", Ok(())),
    ];
    for (wire, expected) in cases {
        assert_eq!(check_windows(wire), expected, "{wire:?}");
    }
}

/// One thread keeps swapping `target` between a file inside the root and a symlink to the
/// secret outside; another reads it through the jail. A naive `std::fs` read of the same
/// name runs alongside as a control, proving the race really is exercised.
#[cfg(unix)]
#[test]
fn swapping_symlinks_never_leak_outside_content() {
    use std::os::unix::fs::symlink;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    let sb = Sandbox::new();
    let jail = sb.jail();
    fs::write(sb.root.join("target"), "inside").unwrap();
    let pre_resolved = jail.resolve("target").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let root = sb.root.clone();
        let secret = sb.outside.join("secret.txt");
        std::thread::spawn(move || {
            let mut swaps = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                fs::write(root.join("staging_file"), "inside").unwrap();
                fs::rename(root.join("staging_file"), root.join("target")).unwrap();
                symlink(&secret, root.join("staging_link")).unwrap();
                fs::rename(root.join("staging_link"), root.join("target")).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut leaks, mut inside_reads, mut refusals, mut naive_leaks) = (0, 0, 0, 0);
    let mut unexpected = Vec::new();
    let started = Instant::now();
    let mut iterations = 0_u32;
    while iterations < 3000
        || ((naive_leaks == 0 || refusals == 0) && started.elapsed() < Duration::from_secs(20))
    {
        iterations += 1;
        let fresh = jail.resolve("target").and_then(|p| read(&jail, &p));
        for outcome in [fresh, read(&jail, &pre_resolved)] {
            match outcome {
                Ok(text) if text.contains(SECRET) => leaks += 1,
                Ok(_) => inside_reads += 1,
                Err(JailError::PathOutsideAllowedRoot) => refusals += 1,
                Err(err) => unexpected.push(err),
            }
        }
        if fs::read_to_string(sb.root.join("target")).is_ok_and(|t| t.contains(SECRET)) {
            naive_leaks += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert_eq!(leaks, 0, "read the outside secret through the jail");
    assert!(unexpected.is_empty(), "unexpected errors: {unexpected:?}");
    assert!(
        swaps > 0 && inside_reads > 0 && refusals > 0,
        "race not exercised"
    );
    assert!(
        naive_leaks > 0,
        "control never saw the secret: race not exercised"
    );
}
