//! Tests of [`super`] on real trees in a temporary directory, with a sibling the jail must
//! never reach.

use super::{
    glob::{GLOB_CASE_INSENSITIVE, Glob},
    move_copy::{copy_then_delete, is_cross_device},
    stat_list::epoch_seconds,
    *,
};
use std::fs;
use std::io;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use uuid::Uuid;

/// A scratch tree: `base/root` is the jail, `base/outside` holds what must stay untouched.
struct Sandbox {
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        let base = std::env::temp_dir().join(format!("files-test-{}", Uuid::new_v4()));
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "outside").unwrap();
        Self {
            base,
            root,
            outside,
        }
    }

    fn jail(&self) -> Jail {
        Jail::open(&self.root).unwrap()
    }

    fn file(&self, relative: &str, contents: impl AsRef<[u8]>) {
        let path = self.root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }

    fn canonical_root(&self) -> PathBuf {
        fs::canonicalize(&self.root).unwrap()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn limits(max_read: u64, max_write: u64, hard_cap: usize) -> FileLimits {
    FileLimits {
        max_read_bytes: max_read,
        max_write_bytes: max_write,
        max_list_entries_hard_cap: hard_cap,
    }
}

fn read_range(path: &str, encoding: Encoding, offset: u64, length: Option<u64>) -> ReadRequest {
    ReadRequest {
        path: path.to_owned(),
        encoding,
        offset,
        length,
    }
}

fn write_text(path: &str, text: &str, create_parents: bool) -> WriteRequest {
    WriteRequest {
        path: path.to_owned(),
        content: WriteContent::Text(text.to_owned()),
        create_parents,
    }
}

fn code<T: fmt::Debug>(result: Result<T, FileError>) -> &'static str {
    result.unwrap_err().code()
}

fn names(result: &ListResult) -> Vec<&str> {
    result.entries.iter().map(|e| e.name.as_str()).collect()
}

fn delete_request(path: &str, recursive: bool, missing_ok: bool) -> DeleteRequest {
    DeleteRequest {
        path: path.to_owned(),
        recursive,
        missing_ok,
    }
}

fn move_request(from: &str, to: &str, overwrite: bool) -> MoveRequest {
    MoveRequest {
        from: from.to_owned(),
        to: to.to_owned(),
        overwrite,
    }
}

// ---- FILE_READ ----

#[test]
fn read_at_exactly_the_limit_is_whole_and_one_byte_more_is_too_large() {
    let sb = Sandbox::new();
    sb.file("exact.txt", "x".repeat(16));
    sb.file("over.txt", "x".repeat(17));
    let jail = sb.jail();
    let lim = limits(16, 16, 100);
    let whole = read(&jail, &ReadRequest::new("exact.txt"), &lim).unwrap();
    assert_eq!(whole.content, "x".repeat(16));
    assert_eq!(whole.size_bytes, 16);
    assert_eq!(whole.file_size, 16);
    assert!(!whole.truncated);
    assert_eq!(whole.path, sb.canonical_root().join("exact.txt"));
    let err = read(&jail, &ReadRequest::new("over.txt"), &lim).unwrap_err();
    assert_eq!(err.code(), "FILE_TOO_LARGE");
    assert_eq!(
        err,
        FileError::FileTooLarge {
            requested: 17,
            limit: 16
        }
    );
}

#[test]
fn a_bounded_range_of_a_larger_file_reads_and_is_truncated() {
    let sb = Sandbox::new();
    let data: String = (0..64).map(|i| char::from(b'a' + (i % 26))).collect();
    sb.file("big.txt", &data);
    let jail = sb.jail();
    let lim = limits(16, 16, 100);
    let range = read(
        &jail,
        &read_range("big.txt", Encoding::Text, 10, Some(8)),
        &lim,
    )
    .unwrap();
    assert_eq!(range.content, &data[10..18]);
    assert_eq!(range.size_bytes, 8);
    assert_eq!(range.file_size, 64);
    assert!(range.truncated);
    // A range of exactly the limit is fine, one byte more is not, whatever the file size.
    let full = read(
        &jail,
        &read_range("big.txt", Encoding::Text, 0, Some(16)),
        &lim,
    )
    .unwrap();
    assert_eq!(full.content, &data[..16]);
    assert_eq!(
        code(read(
            &jail,
            &read_range("big.txt", Encoding::Text, 0, Some(17)),
            &lim
        )),
        "FILE_TOO_LARGE"
    );
    // Reading to the end from an offset counts only what is left.
    let tail = read(
        &jail,
        &read_range("big.txt", Encoding::Text, 48, None),
        &lim,
    )
    .unwrap();
    assert_eq!(tail.content, &data[48..]);
    assert!(!tail.truncated);
    assert_eq!(
        code(read(
            &jail,
            &read_range("big.txt", Encoding::Text, 47, None),
            &lim
        )),
        "FILE_TOO_LARGE"
    );
    // A range running past the end returns what exists and is not truncated.
    let end = read(
        &jail,
        &read_range("big.txt", Encoding::Text, 60, Some(10)),
        &lim,
    )
    .unwrap();
    assert_eq!(end.content, &data[60..]);
    assert_eq!(end.size_bytes, 4);
    assert!(!end.truncated);
}

#[test]
fn offsets_past_the_end_read_nothing() {
    let sb = Sandbox::new();
    sb.file("short.txt", "0123456789");
    let jail = sb.jail();
    let lim = FileLimits::default();
    for length in [None, Some(5)] {
        let past = read(
            &jail,
            &read_range("short.txt", Encoding::Text, 100, length),
            &lim,
        )
        .unwrap();
        assert_eq!(past.content, "");
        assert_eq!(past.size_bytes, 0);
        assert!(!past.truncated);
    }
    let at_end = read(
        &jail,
        &read_range("short.txt", Encoding::Base64, 10, None),
        &lim,
    )
    .unwrap();
    assert_eq!(at_end.content, "");
    assert_eq!(at_end.encoding, Encoding::Base64);
}

#[test]
fn crlf_is_preserved_and_invalid_utf8_becomes_replacement_chars() {
    let sb = Sandbox::new();
    sb.file("dos.txt", "a\r\nb\r\n");
    sb.file("latin1.txt", b"caf\xe9\r\n");
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        read(&jail, &ReadRequest::new("dos.txt"), &lim)
            .unwrap()
            .content,
        "a\r\nb\r\n"
    );
    let lossy = read(&jail, &ReadRequest::new("latin1.txt"), &lim).unwrap();
    assert_eq!(lossy.content, "caf\u{fffd}\r\n");
    assert_eq!(lossy.size_bytes, 6);
}

#[test]
fn base64_round_trips_binary() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let lim = FileLimits::default();
    let bytes: Vec<u8> = (0..=255).collect();
    let written = write(
        &jail,
        &WriteRequest {
            path: "bin/all.bin".to_owned(),
            content: WriteContent::Base64(STANDARD.encode(&bytes)),
            create_parents: true,
        },
        &lim,
    )
    .unwrap();
    assert_eq!(written.size_bytes_written, 256);
    assert_eq!(fs::read(sb.root.join("bin/all.bin")).unwrap(), bytes);
    let back = read(
        &jail,
        &read_range("bin/all.bin", Encoding::Base64, 0, None),
        &lim,
    )
    .unwrap();
    assert_eq!(back.encoding, Encoding::Base64);
    assert_eq!(back.size_bytes, 256);
    assert_eq!(STANDARD.decode(&back.content).unwrap(), bytes);
    let slice = read(
        &jail,
        &read_range("bin/all.bin", Encoding::Base64, 250, Some(3)),
        &lim,
    )
    .unwrap();
    assert_eq!(
        STANDARD.decode(&slice.content).unwrap(),
        vec![250, 251, 252]
    );
    assert!(slice.truncated);
}

#[test]
fn the_encoding_budget_caps_a_large_max_read() {
    let sb = Sandbox::new();
    let size = usize::try_from(TEXT_READ_BUDGET_BYTES).unwrap() + 1;
    sb.file("wide.txt", vec![b'a'; size]);
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert!(lim.max_read_bytes > TEXT_READ_BUDGET_BYTES);
    assert_eq!(
        read(&jail, &ReadRequest::new("wide.txt"), &lim).unwrap_err(),
        FileError::FileTooLarge {
            requested: size as u64,
            limit: TEXT_READ_BUDGET_BYTES
        }
    );
    let binary = read(
        &jail,
        &read_range("wide.txt", Encoding::Base64, 0, None),
        &lim,
    )
    .unwrap();
    assert_eq!(binary.size_bytes, size as u64);
    assert_eq!(
        lim.effective_read_limit(Encoding::Base64),
        DEFAULT_MAX_FILE_SIZE_BYTES
    );
    assert_eq!(
        limits(u64::MAX, 1, 1).effective_read_limit(Encoding::Base64),
        BASE64_READ_BUDGET_BYTES
    );
    assert_eq!(limits(5, 5, 5).effective_read_limit(Encoding::Text), 5);
}

#[test]
fn read_missing_directory_and_escape_have_their_codes() {
    let sb = Sandbox::new();
    fs::create_dir(sb.root.join("dir")).unwrap();
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        code(read(&jail, &ReadRequest::new("nope.txt"), &lim)),
        "PATH_NOT_FOUND"
    );
    fs::write(sb.root.join("plain"), "x").unwrap();
    assert_eq!(
        code(read(&jail, &ReadRequest::new("plain/x"), &lim)),
        "PATH_NOT_FOUND"
    );
    assert_eq!(
        code(read(&jail, &ReadRequest::new("dir"), &lim)),
        "INTERNAL_ERROR"
    );
    let outside = sb.outside.join("secret.txt");
    for escape in ["../outside/secret.txt", outside.to_str().unwrap()] {
        assert_eq!(
            code(read(&jail, &ReadRequest::new(escape), &lim)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
    }
}

#[cfg(unix)]
#[test]
fn read_refuses_a_symlink_out_of_the_root() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.outside.join("secret.txt"), sb.root.join("link")).unwrap();
    let jail = sb.jail();
    let err = read(&jail, &ReadRequest::new("link"), &FileLimits::default()).unwrap_err();
    assert_eq!(err.code(), "PATH_OUTSIDE_ALLOWED_ROOT");
    let text = err.to_string();
    assert!(
        !text.contains("secret") && !text.contains(sb.outside.to_str().unwrap()),
        "{text}"
    );
}

// ---- FILE_WRITE ----

#[test]
fn write_then_read_and_overwrite_leave_no_temporaries() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let lim = FileLimits::default();
    let first = write(&jail, &write_text("note.txt", "one\r\n", false), &lim).unwrap();
    assert_eq!(first.path, sb.canonical_root().join("note.txt"));
    assert_eq!(first.size_bytes_written, 5);
    assert_eq!(
        read(&jail, &ReadRequest::new("note.txt"), &lim)
            .unwrap()
            .content,
        "one\r\n"
    );
    write(&jail, &write_text("note.txt", "two", false), &lim).unwrap();
    assert_eq!(
        read(&jail, &ReadRequest::new("note.txt"), &lim)
            .unwrap()
            .content,
        "two"
    );
    write(&jail, &write_text("empty.txt", "", false), &lim).unwrap();
    assert_eq!(fs::read(sb.root.join("empty.txt")).unwrap(), b"");
    let mut left: Vec<_> = fs::read_dir(&sb.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["empty.txt", "note.txt"]);
}

#[test]
fn create_parents_off_needs_the_parent_and_on_makes_it() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        code(write(&jail, &write_text("a/b/c.txt", "x", false), &lim)),
        "PATH_NOT_FOUND"
    );
    assert!(!sb.root.join("a").exists());
    write(&jail, &write_text("a/b/c.txt", "x", true), &lim).unwrap();
    assert_eq!(fs::read_to_string(sb.root.join("a/b/c.txt")).unwrap(), "x");
    // An existing parent needs no flag.
    write(&jail, &write_text("a/b/d.txt", "y", false), &lim).unwrap();
    assert_eq!(
        code(write(&jail, &write_text("a", "over a dir", false), &lim)),
        "INTERNAL_ERROR"
    );
}

#[test]
fn write_size_limit_and_bad_base64() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let lim = limits(100, 4, 100);
    write(&jail, &write_text("four.txt", "1234", false), &lim).unwrap();
    assert_eq!(
        write(&jail, &write_text("five.txt", "12345", false), &lim).unwrap_err(),
        FileError::FileTooLarge {
            requested: 5,
            limit: 4
        }
    );
    assert!(!sb.root.join("five.txt").exists());
    let b64 = |content: &str| WriteRequest {
        path: "b.bin".to_owned(),
        content: WriteContent::Base64(content.to_owned()),
        create_parents: false,
    };
    // Decoded size counts: 8 base64 chars are 5 bytes.
    assert_eq!(code(write(&jail, &b64("MTIzNDU="), &lim)), "FILE_TOO_LARGE");
    for bad in ["MTIz NA==", "MTIzNA", "MTIzNA=", "!!!!", "MTIzNA==\n"] {
        let err = write(&jail, &b64(bad), &lim).unwrap_err();
        assert_eq!(err, FileError::BadBase64, "{bad:?}");
        assert_eq!(err.code(), "INTERNAL_ERROR");
        assert_eq!(err.to_string(), "Bad base64");
    }
    write(&jail, &b64("MTIzNA=="), &lim).unwrap();
    assert_eq!(fs::read(sb.root.join("b.bin")).unwrap(), b"1234");
}

#[test]
fn write_escapes_are_refused_before_anything_is_created() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    let lim = FileLimits::default();
    let bad_base64_outside = WriteRequest {
        path: "../outside/x.bin".to_owned(),
        content: WriteContent::Base64("not base64".to_owned()),
        create_parents: false,
    };
    // The jail is checked first, as in the spec.
    assert_eq!(
        code(write(&jail, &bad_base64_outside, &lim)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    for (path, parents) in [("../outside/new/x.txt", true), ("../outside/x.txt", false)] {
        assert_eq!(
            code(write(&jail, &write_text(path, "x", parents), &lim)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
    }
    assert!(!sb.outside.join("new").exists());
    assert!(!sb.outside.join("x.txt").exists());
}

#[cfg(unix)]
#[test]
fn write_through_symlinks_stays_inside() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
    sb.file("real.txt", "old");
    symlink("real.txt", sb.root.join("alias.txt")).unwrap();
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        code(write(
            &jail,
            &write_text("out_dir/new/x.txt", "x", true),
            &lim
        )),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert!(!sb.outside.join("new").exists());
    // A link inside the root is followed: the target's content changes, the link stays.
    let done = write(&jail, &write_text("alias.txt", "new", false), &lim).unwrap();
    assert_eq!(done.path, sb.canonical_root().join("real.txt"));
    assert_eq!(fs::read_to_string(sb.root.join("real.txt")).unwrap(), "new");
    assert!(
        fs::symlink_metadata(sb.root.join("alias.txt"))
            .unwrap()
            .is_symlink()
    );
}

// ---- FILE_STAT ----

#[test]
fn stat_reports_every_field_of_a_file_and_a_dir() {
    let sb = Sandbox::new();
    sb.file("data.csv", "col1,col2\n1,2\n");
    fs::create_dir(sb.root.join("sub")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(sb.root.join("data.csv"), fs::Permissions::from_mode(0o640)).unwrap();
    }
    let jail = sb.jail();
    let result = stat(&jail, &StatRequest::new("data.csv")).unwrap();
    assert!(result.exists());
    assert_eq!(result.path, sb.canonical_root().join("data.csv"));
    let info = result.info.unwrap();
    assert!(info.is_file && !info.is_dir && !info.is_symlink);
    assert_eq!(info.size_bytes, 14);
    assert_eq!(info.mime_type, Some("text/csv"));
    let now = epoch_seconds(SystemTime::now());
    let mtime = info.mtime.unwrap();
    assert!((now - mtime).abs() < 300.0, "{mtime} vs {now}");
    assert!((now - info.ctime.unwrap()).abs() < 300.0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let real = fs::metadata(sb.root.join("data.csv")).unwrap();
        assert_eq!(info.mode, "0640");
        assert_eq!(info.owner_uid, Some(real.uid()));
        assert_eq!(info.owner_gid, Some(real.gid()));
    }
    let dir = stat(&jail, &StatRequest::new("sub")).unwrap().info.unwrap();
    assert!(dir.is_dir && !dir.is_file);
    assert_eq!(dir.mime_type, None);
    assert_eq!(dir.mode.len(), 4);
}

#[test]
fn stat_missing_is_exists_false_with_the_canonical_path() {
    let sb = Sandbox::new();
    sb.file("file.txt", "x");
    let jail = sb.jail();
    let missing = stat(&jail, &StatRequest::new("gone/child.txt")).unwrap();
    assert!(!missing.exists());
    assert_eq!(missing.info, None);
    assert_eq!(missing.path, sb.canonical_root().join("gone/child.txt"));
    // Under a file, as `test -e` would say.
    assert!(
        !stat(&jail, &StatRequest::new("file.txt/x"))
            .unwrap()
            .exists()
    );
    let absolute = sb.root.join("gone.txt");
    assert!(
        !stat(&jail, &StatRequest::new(absolute.to_str().unwrap()))
            .unwrap()
            .exists()
    );
}

#[test]
fn stat_escape_is_an_error_not_a_missing_file() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    for escape in [
        "../outside/secret.txt",
        "../outside/missing.txt",
        "/etc/passwd",
    ] {
        assert_eq!(
            code(stat(&jail, &StatRequest::new(escape))),
            "PATH_OUTSIDE_ALLOWED_ROOT",
            "{escape}"
        );
    }
}

#[cfg(unix)]
#[test]
fn stat_of_a_symlink_follows_or_reports_the_link() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("target.json", "{\"k\": 1}");
    symlink("target.json", sb.root.join("link.txt")).unwrap();
    symlink(sb.outside.join("secret.txt"), sb.root.join("out_link")).unwrap();
    symlink("missing", sb.root.join("dangling")).unwrap();
    let jail = sb.jail();
    let canonical = sb.canonical_root();

    let followed = stat(&jail, &StatRequest::new("link.txt")).unwrap();
    assert_eq!(followed.path, canonical.join("target.json"));
    let info = followed.info.unwrap();
    assert!(info.is_file && info.is_symlink);
    assert_eq!(info.size_bytes, 8);
    assert_eq!(info.mime_type, Some("application/json"));

    let request = StatRequest {
        path: "link.txt".to_owned(),
        follow_symlinks: false,
    };
    let link = stat(&jail, &request).unwrap();
    assert_eq!(link.path, canonical.join("link.txt"));
    let info = link.info.unwrap();
    assert!(info.is_symlink && !info.is_file && !info.is_dir);
    assert_eq!(info.size_bytes, "target.json".len() as u64);

    // The target itself is not a link.
    assert!(
        !stat(&jail, &StatRequest::new("target.json"))
            .unwrap()
            .info
            .unwrap()
            .is_symlink
    );
    // Following out of the root is refused; the link itself may be looked at.
    assert_eq!(
        code(stat(&jail, &StatRequest::new("out_link"))),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    let out = StatRequest {
        path: "out_link".to_owned(),
        follow_symlinks: false,
    };
    assert!(stat(&jail, &out).unwrap().info.unwrap().is_symlink);
    // A dangling link: its target does not exist, the link does.
    let dangling = stat(&jail, &StatRequest::new("dangling")).unwrap();
    assert!(!dangling.exists());
    assert_eq!(dangling.path, canonical.join("missing"));
    let dangling_link = StatRequest {
        path: "dangling".to_owned(),
        follow_symlinks: false,
    };
    assert!(stat(&jail, &dangling_link).unwrap().exists());
}

// ---- FILE_LIST ----

#[test]
fn list_filters_by_basename_glob_and_hides_dot_files() {
    let sb = Sandbox::new();
    for name in ["b.csv", "a.csv", "c.txt", ".hidden.csv", "sub/d.csv"] {
        sb.file(name, "1,2\n");
    }
    let jail = sb.jail();
    let lim = FileLimits::default();
    let mut request = ListRequest::new(".");
    assert_eq!(
        names(&list(&jail, &request, &lim).unwrap()),
        ["a.csv", "b.csv", "c.txt", "sub"]
    );
    request.pattern = Some("*.csv".to_owned());
    let csv = list(&jail, &request, &lim).unwrap();
    assert_eq!(names(&csv), ["a.csv", "b.csv"]);
    assert!(!csv.truncated);
    assert_eq!(csv.path, sb.canonical_root());
    let entry = &csv.entries[0];
    assert_eq!(entry.path, sb.canonical_root().join("a.csv"));
    assert!(entry.is_file && !entry.is_dir && !entry.is_symlink);
    assert_eq!(entry.size_bytes, 4);
    assert!(entry.mtime > 0.0);
    request.include_hidden = true;
    assert_eq!(
        names(&list(&jail, &request, &lim).unwrap()),
        [".hidden.csv", "a.csv", "b.csv"]
    );
    request.pattern = Some("?.[!c]*".to_owned());
    assert_eq!(names(&list(&jail, &request, &lim).unwrap()), ["c.txt"]);
    let sub = list(&jail, &ListRequest::new("sub"), &lim).unwrap();
    assert_eq!(names(&sub), ["d.csv"]);
    assert_eq!(sub.entries[0].path, sb.canonical_root().join("sub/d.csv"));
}

#[test]
fn list_recursive_walks_in_a_deterministic_order() {
    let sb = Sandbox::new();
    for name in [
        "z.txt",
        "a/2.txt",
        "a/1.txt",
        "a/deep/x.txt",
        "b/y.txt",
        ".git/config",
        "a/.cache/c.txt",
    ] {
        sb.file(name, "x");
    }
    let jail = sb.jail();
    let lim = FileLimits::default();
    let mut request = ListRequest::new(".");
    request.recursive = true;
    let walk = list(&jail, &request, &lim).unwrap();
    assert_eq!(
        names(&walk),
        [
            "a", "b", "z.txt", "config", "1.txt", "2.txt", "deep", "c.txt", "x.txt", "y.txt"
        ]
    );
    let root = sb.canonical_root();
    assert_eq!(walk.entries[8].path, root.join("a/deep/x.txt"));
    request.include_hidden = true;
    assert_eq!(
        names(&list(&jail, &request, &lim).unwrap()),
        [
            ".git", "a", "b", "z.txt", "config", ".cache", "1.txt", "2.txt", "deep", "c.txt",
            "x.txt", "y.txt"
        ]
    );
    request.include_hidden = false;
    request.pattern = Some("*.txt".to_owned());
    assert_eq!(
        names(&list(&jail, &request, &lim).unwrap()),
        ["z.txt", "1.txt", "2.txt", "c.txt", "x.txt", "y.txt"]
    );
}

#[test]
fn list_max_entries_and_the_hard_cap_truncate() {
    let sb = Sandbox::new();
    for name in ["1", "2", "3", "4", "5"] {
        sb.file(name, "x");
    }
    let jail = sb.jail();
    let lim = limits(100, 100, 3);
    let mut request = ListRequest::new(".");
    request.max_entries = 2;
    let two = list(&jail, &request, &lim).unwrap();
    assert_eq!(names(&two), ["1", "2"]);
    assert!(two.truncated);
    request.max_entries = 0;
    let none = list(&jail, &request, &lim).unwrap();
    assert!(none.entries.is_empty() && none.truncated);
    // The default of 1000 is far above the hard cap of 3.
    request.max_entries = DEFAULT_MAX_LIST_ENTRIES;
    let capped = list(&jail, &request, &lim).unwrap();
    assert_eq!(names(&capped), ["1", "2", "3"]);
    assert!(capped.truncated);
    // Exactly as many as allowed is not truncated.
    request.max_entries = 5;
    let exact = list(&jail, &request, &limits(100, 100, 5)).unwrap();
    assert_eq!(exact.entries.len(), 5);
    assert!(!exact.truncated);
    // Entries filtered out by the glob do not count.
    request.max_entries = 1;
    request.pattern = Some("[45]".to_owned());
    let filtered = list(&jail, &request, &lim).unwrap();
    assert_eq!(names(&filtered), ["4"]);
    assert!(filtered.truncated);
    request.pattern = Some("5".to_owned());
    assert!(!list(&jail, &request, &lim).unwrap().truncated);
}

#[test]
fn list_missing_file_and_escape_have_their_codes() {
    let sb = Sandbox::new();
    sb.file("file.txt", "x");
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        code(list(&jail, &ListRequest::new("missing"), &lim)),
        "PATH_NOT_FOUND"
    );
    assert_eq!(
        code(list(&jail, &ListRequest::new("file.txt"), &lim)),
        "INTERNAL_ERROR"
    );
    assert_eq!(
        code(list(&jail, &ListRequest::new("file.txt/x"), &lim)),
        "PATH_NOT_FOUND"
    );
    assert_eq!(
        code(list(&jail, &ListRequest::new("../outside"), &lim)),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
}

#[cfg(unix)]
#[test]
fn list_shows_symlinks_without_entering_or_leaving() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("real/inner.txt", "x");
    symlink("real", sb.root.join("linked")).unwrap();
    symlink(sb.outside.join("secret.txt"), sb.root.join("out_file")).unwrap();
    symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
    let jail = sb.jail();
    let mut request = ListRequest::new(".");
    request.recursive = true;
    let walk = list(&jail, &request, &FileLimits::default()).unwrap();
    assert_eq!(
        names(&walk),
        ["linked", "out_dir", "out_file", "real", "inner.txt"]
    );
    let linked = &walk.entries[0];
    assert!(linked.is_symlink && linked.is_dir && !linked.is_file);
    for out in &walk.entries[1..3] {
        assert!(out.is_symlink && !out.is_file && !out.is_dir, "{out:?}");
    }
    assert_eq!(
        code(list(
            &jail,
            &ListRequest::new("out_dir"),
            &FileLimits::default()
        )),
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
}

#[test]
fn glob_matches_like_fnmatch() {
    let cases: &[(&str, &str, bool)] = &[
        ("*.csv", "data.csv", true),
        ("*.csv", "data.csv.bak", false),
        ("*", ".hidden", true),
        ("*", "", true),
        ("", "", true),
        ("", "a", false),
        ("a*b*c", "aXbYbZc", true),
        ("a*b*c", "aXbYbZ", false),
        ("?", "ab", false),
        ("??", "ab", true),
        ("[abc]x", "bx", true),
        ("[abc]x", "dx", false),
        ("[!abc]x", "dx", true),
        ("[!abc]x", "ax", false),
        ("[a-c]", "b", true),
        ("[a-c]", "d", false),
        ("[a-]", "-", true),
        ("[]]", "]", true),
        ("[!]]", "a", true),
        ("[!]]", "]", false),
        ("[unclosed", "[unclosed", true),
        ("[unclosed", "u", false),
        ("***x", "abcx", true),
        ("\\*", "\\abc", true),
        ("é?", "éa", true),
    ];
    for &(pattern, name, expected) in cases {
        assert_eq!(
            Glob::new(pattern).matches(name),
            expected,
            "{pattern:?} vs {name:?}"
        );
    }
    assert_eq!(Glob::new("*.CSV").matches("a.csv"), GLOB_CASE_INSENSITIVE);
}

// ---- FILE_DELETE ----

#[test]
fn delete_files_and_missing_ok() {
    let sb = Sandbox::new();
    sb.file("old.csv", "x");
    let jail = sb.jail();
    let done = delete(&jail, &delete_request("old.csv", false, false)).unwrap();
    assert!(done.existed);
    assert_eq!(done.path, sb.canonical_root().join("old.csv"));
    assert!(!sb.root.join("old.csv").exists());
    assert_eq!(
        code(delete(&jail, &delete_request("old.csv", false, false))),
        "PATH_NOT_FOUND"
    );
    let again = delete(&jail, &delete_request("old.csv", false, true)).unwrap();
    assert!(!again.existed);
    assert_eq!(
        code(delete(&jail, &delete_request("a/b/c", true, false))),
        "PATH_NOT_FOUND"
    );
    assert!(
        !delete(&jail, &delete_request("a/b/c", true, true))
            .unwrap()
            .existed
    );
}

#[test]
fn delete_directories_needs_recursive_unless_empty() {
    let sb = Sandbox::new();
    sb.file("full/inner/x.txt", "x");
    fs::create_dir(sb.root.join("empty")).unwrap();
    let jail = sb.jail();
    assert_eq!(
        code(delete(&jail, &delete_request("full", false, false))),
        "PATH_NOT_EMPTY"
    );
    assert!(sb.root.join("full/inner/x.txt").exists());
    delete(&jail, &delete_request("full", true, false)).unwrap();
    assert!(!sb.root.join("full").exists());
    delete(&jail, &delete_request("empty", false, false)).unwrap();
    assert!(!sb.root.join("empty").exists());
    // The root itself never goes, recursive or not.
    for root in [".", sb.root.to_str().unwrap()] {
        assert_eq!(
            code(delete(&jail, &delete_request(root, true, false))),
            "INTERNAL_ERROR"
        );
    }
    assert!(sb.root.exists());
}

#[test]
fn delete_escape_is_refused() {
    let sb = Sandbox::new();
    let jail = sb.jail();
    for (recursive, missing_ok) in [(false, false), (true, true)] {
        assert_eq!(
            code(delete(
                &jail,
                &delete_request("../outside/secret.txt", recursive, missing_ok)
            )),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert_eq!(
            code(delete(
                &jail,
                &delete_request("../outside", recursive, missing_ok)
            )),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
    }
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "outside"
    );
}

#[cfg(unix)]
#[test]
fn delete_removes_a_symlink_never_its_target() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("kept.txt", "kept");
    sb.file("dir/inner.txt", "inner");
    symlink(sb.outside.join("secret.txt"), sb.root.join("out_link")).unwrap();
    symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
    symlink("kept.txt", sb.root.join("in_link")).unwrap();
    symlink("dir", sb.root.join("dir_link")).unwrap();
    let jail = sb.jail();
    for link in ["out_link", "out_dir", "in_link", "dir_link"] {
        let done = delete(&jail, &delete_request(link, true, false)).unwrap();
        assert!(done.existed);
        assert_eq!(done.path, sb.canonical_root().join(link));
        assert!(
            fs::symlink_metadata(sb.root.join(link)).is_err(),
            "{link} still there"
        );
    }
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "outside"
    );
    assert_eq!(
        fs::read_to_string(sb.root.join("kept.txt")).unwrap(),
        "kept"
    );
    assert_eq!(
        fs::read_to_string(sb.root.join("dir/inner.txt")).unwrap(),
        "inner"
    );
}

// ---- FILE_MOVE ----

#[test]
fn move_renames_and_refuses_an_existing_destination() {
    let sb = Sandbox::new();
    sb.file("a.csv", "a");
    sb.file("b.csv", "b");
    let jail = sb.jail();
    let lim = FileLimits::default();
    let done = move_path(&jail, &move_request("a.csv", "c.csv", false), &lim).unwrap();
    assert_eq!(done.from, sb.canonical_root().join("a.csv"));
    assert_eq!(done.to, sb.canonical_root().join("c.csv"));
    assert!(!done.copied);
    assert!(!sb.root.join("a.csv").exists());
    assert_eq!(fs::read_to_string(sb.root.join("c.csv")).unwrap(), "a");
    assert_eq!(
        code(move_path(
            &jail,
            &move_request("c.csv", "b.csv", false),
            &lim
        )),
        "PATH_EXISTS"
    );
    assert_eq!(fs::read_to_string(sb.root.join("b.csv")).unwrap(), "b");
    assert_eq!(fs::read_to_string(sb.root.join("c.csv")).unwrap(), "a");
    assert_eq!(
        code(move_path(
            &jail,
            &move_request("a.csv", "d.csv", false),
            &lim
        )),
        "PATH_NOT_FOUND"
    );
    // Replaying a finished move finds no source, as the idempotency table says.
    assert_eq!(
        code(move_path(
            &jail,
            &move_request("a.csv", "c.csv", true),
            &lim
        )),
        "PATH_NOT_FOUND"
    );
}

#[test]
fn move_with_overwrite_replaces_files_and_directories() {
    let sb = Sandbox::new();
    sb.file("new.txt", "new");
    sb.file("old.txt", "old");
    sb.file("src_dir/x.txt", "x");
    sb.file("dst_dir/y.txt", "y");
    sb.file("file_src.txt", "f");
    sb.file("over_dir/z.txt", "z");
    fs::create_dir(sb.root.join("empty_dst")).unwrap();
    sb.file("dir2/w.txt", "w");
    let jail = sb.jail();
    let lim = FileLimits::default();
    move_path(&jail, &move_request("new.txt", "old.txt", true), &lim).unwrap();
    assert_eq!(fs::read_to_string(sb.root.join("old.txt")).unwrap(), "new");
    assert!(!sb.root.join("new.txt").exists());
    // Directory over a non-empty directory.
    move_path(&jail, &move_request("src_dir", "dst_dir", true), &lim).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("dst_dir/x.txt")).unwrap(),
        "x"
    );
    assert!(!sb.root.join("dst_dir/y.txt").exists());
    assert!(!sb.root.join("src_dir").exists());
    // File over a directory.
    move_path(&jail, &move_request("file_src.txt", "over_dir", true), &lim).unwrap();
    assert_eq!(fs::read_to_string(sb.root.join("over_dir")).unwrap(), "f");
    // Directory over an empty directory (a plain rename).
    move_path(&jail, &move_request("dir2", "empty_dst", true), &lim).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("empty_dst/w.txt")).unwrap(),
        "w"
    );
    // Directory over a file.
    move_path(&jail, &move_request("empty_dst", "old.txt", true), &lim).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("old.txt/w.txt")).unwrap(),
        "w"
    );
    // Moving onto itself is a no-op.
    move_path(&jail, &move_request("old.txt", "old.txt", true), &lim).unwrap();
    let mut left: Vec<_> = fs::read_dir(&sb.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["dst_dir", "old.txt", "over_dir"],
        "no temporaries left"
    );
}

#[test]
fn move_into_a_missing_directory_or_into_itself_fails_and_keeps_the_source() {
    let sb = Sandbox::new();
    sb.file("a.txt", "a");
    sb.file("tree/leaf.txt", "l");
    let jail = sb.jail();
    let lim = FileLimits::default();
    let err = move_path(
        &jail,
        &move_request("a.txt", "missing/dir/a.txt", false),
        &lim,
    )
    .unwrap_err();
    assert_eq!(err.code(), "PATH_NOT_FOUND");
    assert_eq!(err, not_found(Path::new("missing/dir")));
    assert!(sb.root.join("a.txt").exists());
    assert_eq!(
        move_path(&jail, &move_request("tree", "tree/sub", false), &lim).unwrap_err(),
        FileError::NestedMove
    );
    assert_eq!(
        code(move_path(
            &jail,
            &move_request("tree/leaf.txt", "tree", true),
            &lim
        )),
        "INTERNAL_ERROR"
    );
    assert_eq!(
        fs::read_to_string(sb.root.join("tree/leaf.txt")).unwrap(),
        "l"
    );
}

#[test]
fn move_escapes_are_refused_on_either_side() {
    let sb = Sandbox::new();
    sb.file("a.txt", "a");
    let jail = sb.jail();
    let lim = FileLimits::default();
    for (from, to) in [
        ("../outside/secret.txt", "stolen.txt"),
        ("a.txt", "../outside/a.txt"),
        ("a.txt", "../outside/secret.txt"),
    ] {
        for overwrite in [false, true] {
            assert_eq!(
                code(move_path(&jail, &move_request(from, to, overwrite), &lim)),
                "PATH_OUTSIDE_ALLOWED_ROOT"
            );
        }
    }
    assert!(sb.root.join("a.txt").exists());
    assert!(!sb.root.join("stolen.txt").exists());
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "outside"
    );
}

#[cfg(unix)]
#[test]
fn move_carries_a_symlink_as_a_link() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("target.txt", "t");
    symlink("target.txt", sb.root.join("link")).unwrap();
    let jail = sb.jail();
    move_path(
        &jail,
        &move_request("link", "moved", false),
        &FileLimits::default(),
    )
    .unwrap();
    assert!(
        fs::symlink_metadata(sb.root.join("moved"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(sb.root.join("target.txt")).unwrap(), "t");
}

/// The destination rule: a `to` that is a link leading out of the root (to a directory
/// or a file, dangling or not, absolute or relative) is refused with or without
/// `overwrite`, and nothing changes on disk.
#[cfg(unix)]
#[test]
fn move_onto_a_link_out_of_the_root_is_refused_and_changes_nothing() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("src.txt", "source");
    fs::create_dir(sb.root.join("srcdir")).unwrap();
    let links = [
        ("to_dir", sb.outside.clone()),
        ("to_file", sb.outside.join("secret.txt")),
        ("dangling_abs", sb.outside.join("missing")),
        ("dangling_rel", PathBuf::from("../outside/missing")),
        ("to_file_rel", PathBuf::from("../outside/secret.txt")),
    ];
    for (name, target) in &links {
        symlink(target, sb.root.join(name)).unwrap();
    }
    let outside_before: Vec<_> = fs::read_dir(&sb.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let jail = sb.jail();
    for (name, target) in &links {
        for from in ["src.txt", "srcdir"] {
            for overwrite in [false, true] {
                assert_eq!(
                    code(move_path(
                        &jail,
                        &move_request(from, name, overwrite),
                        &FileLimits::default()
                    )),
                    "PATH_OUTSIDE_ALLOWED_ROOT",
                    "{from} -> {name} overwrite={overwrite}"
                );
            }
        }
        assert_eq!(&fs::read_link(sb.root.join(name)).unwrap(), target);
    }
    assert_eq!(
        fs::read_to_string(sb.root.join("src.txt")).unwrap(),
        "source"
    );
    assert!(sb.root.join("srcdir").is_dir());
    let outside_after: Vec<_> = fs::read_dir(&sb.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside_before, outside_after);
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "outside"
    );
}

/// A destination link that resolves inside the root is replaced as a link (its target
/// keeps its content), as `rename(2)` does; without `overwrite` it is `PATH_EXISTS`.
#[cfg(unix)]
#[test]
fn move_onto_a_link_inside_the_root_replaces_the_link() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    sb.file("src.txt", "source");
    sb.file("target.txt", "target");
    symlink("target.txt", sb.root.join("alias")).unwrap();
    symlink("missing-inside", sb.root.join("dangling")).unwrap();
    let jail = sb.jail();
    let lim = FileLimits::default();
    assert_eq!(
        code(move_path(
            &jail,
            &move_request("src.txt", "alias", false),
            &lim
        )),
        "PATH_EXISTS"
    );
    move_path(&jail, &move_request("src.txt", "alias", true), &lim).unwrap();
    let alias = sb.root.join("alias");
    assert!(!fs::symlink_metadata(&alias).unwrap().is_symlink());
    assert_eq!(fs::read_to_string(&alias).unwrap(), "source");
    assert_eq!(
        fs::read_to_string(sb.root.join("target.txt")).unwrap(),
        "target"
    );
    move_path(&jail, &move_request("alias", "dangling", true), &lim).unwrap();
    assert_eq!(
        fs::read_to_string(sb.root.join("dangling")).unwrap(),
        "source"
    );
    assert!(!sb.root.join("missing-inside").exists());
}

/// FILE_WRITE follows the same rule for the file it creates or replaces: a link out of
/// the root (dangling or not) is refused and nothing outside appears.
#[cfg(unix)]
#[test]
fn write_onto_a_link_out_of_the_root_is_refused() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new();
    symlink(sb.outside.join("secret.txt"), sb.root.join("to_file")).unwrap();
    symlink(sb.outside.join("new.txt"), sb.root.join("dangling_abs")).unwrap();
    symlink("../outside/new2.txt", sb.root.join("dangling_rel")).unwrap();
    let jail = sb.jail();
    for name in ["to_file", "dangling_abs", "dangling_rel"] {
        for create_parents in [false, true] {
            assert_eq!(
                code(write(
                    &jail,
                    &write_text(name, "x", create_parents),
                    &FileLimits::default()
                )),
                "PATH_OUTSIDE_ALLOWED_ROOT",
                "{name}"
            );
        }
        assert!(
            fs::symlink_metadata(sb.root.join(name))
                .unwrap()
                .is_symlink()
        );
    }
    assert_eq!(
        fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "outside"
    );
    assert!(!sb.outside.join("new.txt").exists());
    assert!(!sb.outside.join("new2.txt").exists());
}

#[test]
fn the_cross_device_fallback_copies_then_deletes() {
    // A real cross-device rename needs a second mount inside the root; the fallback itself
    // is exercised directly on one device.
    let sb = Sandbox::new();
    sb.file("tree/a.txt", "a");
    sb.file("tree/sub/b.bin", [0_u8, 255, 1]);
    fs::create_dir(sb.root.join("tree/empty")).unwrap();
    sb.file("big.txt", "12345");
    let jail = sb.jail();
    let lim = limits(100, 4, 100);
    let from = jail.resolve("tree").unwrap();
    let to = jail.resolve("copy").unwrap();
    copy_then_delete(&jail, &from, &to, &lim).unwrap();
    assert!(!sb.root.join("tree").exists());
    assert_eq!(fs::read_to_string(sb.root.join("copy/a.txt")).unwrap(), "a");
    assert_eq!(
        fs::read(sb.root.join("copy/sub/b.bin")).unwrap(),
        [0, 255, 1]
    );
    assert!(sb.root.join("copy/empty").is_dir());
    // Too large for the in-memory copy: refused, source kept, nothing left behind.
    let big = jail.resolve("big.txt").unwrap();
    let big_to = jail.resolve("copy/big.txt").unwrap();
    assert_eq!(
        code(copy_then_delete(&jail, &big, &big_to, &lim)),
        "FILE_TOO_LARGE"
    );
    assert!(sb.root.join("big.txt").exists());
    assert!(!sb.root.join("copy/big.txt").exists());
    // Missing destination parent: nothing is created.
    let nowhere = jail.resolve("nowhere/x").unwrap();
    let small = jail.resolve("copy/a.txt").unwrap();
    assert_eq!(
        code(copy_then_delete(&jail, &small, &nowhere, &lim)),
        "PATH_NOT_FOUND"
    );
    assert!(!sb.root.join("nowhere").exists());
    assert!(is_cross_device(&JailError::Io {
        path: PathBuf::new(),
        kind: io::ErrorKind::CrossesDevices
    }));
}

#[cfg(unix)]
#[test]
fn the_cross_device_fallback_refuses_symlinks_and_cleans_up() {
    let sb = Sandbox::new();
    sb.file("tree/a.txt", "a");
    std::os::unix::fs::symlink("a.txt", sb.root.join("tree/z_link")).unwrap();
    let jail = sb.jail();
    let from = jail.resolve("tree").unwrap();
    let to = jail.resolve("copy").unwrap();
    assert_eq!(
        copy_then_delete(&jail, &from, &to, &FileLimits::default()).unwrap_err(),
        FileError::CrossDeviceSymlink {
            path: PathBuf::from("tree/z_link")
        }
    );
    assert!(!sb.root.join("copy").exists());
    assert!(sb.root.join("tree/a.txt").exists());
}

// ---- errors ----

#[test]
fn error_codes_are_the_wire_codes() {
    let path = PathBuf::from("p");
    let cases = [
        (
            FileError::from(JailError::PathOutsideAllowedRoot),
            "PATH_OUTSIDE_ALLOWED_ROOT",
        ),
        (
            FileError::from(JailError::PathNotFound { path: path.clone() }),
            "PATH_NOT_FOUND",
        ),
        (
            FileError::from(JailError::PathNotEmpty { path: path.clone() }),
            "PATH_NOT_EMPTY",
        ),
        (
            FileError::from(JailError::PathExists { path: path.clone() }),
            "PATH_EXISTS",
        ),
        (
            FileError::from(JailError::PathInvalidChars),
            "PATH_INVALID_CHARS",
        ),
        (
            FileError::FileTooLarge {
                requested: 2,
                limit: 1,
            },
            "FILE_TOO_LARGE",
        ),
        (FileError::BadBase64, "INTERNAL_ERROR"),
        (
            FileError::NotARegularFile { path: path.clone() },
            "INTERNAL_ERROR",
        ),
        (FileError::NestedMove, "INTERNAL_ERROR"),
        (FileError::CrossDeviceSymlink { path }, "INTERNAL_ERROR"),
    ];
    for (err, expected) in cases {
        assert_eq!(err.code(), expected, "{err}");
    }
}

#[test]
fn debug_output_never_shows_content() {
    let secret = "SECRET-CONTENT";
    let request = write_text("x", secret, false);
    assert!(!format!("{request:?}").contains(secret));
    let result = ReadResult {
        content: secret.to_owned(),
        encoding: Encoding::Text,
        size_bytes: 14,
        file_size: 14,
        truncated: false,
        path: PathBuf::from("/x"),
    };
    assert!(!format!("{result:?}").contains(secret));
}

#[cfg(unix)]
#[test]
fn reading_a_fifo_is_refused_instead_of_blocking() {
    let sb = Sandbox::new();
    let status = std::process::Command::new("mkfifo")
        .arg(sb.root.join("pipe"))
        .status();
    // Without mkfifo there is nothing to test.
    if !status.is_ok_and(|s| s.success()) {
        return;
    }
    let jail = sb.jail();
    assert_eq!(
        read(&jail, &ReadRequest::new("pipe"), &FileLimits::default()).unwrap_err(),
        FileError::NotARegularFile {
            path: PathBuf::from("pipe")
        }
    );
}

/// A reader that hands out at most `step` bytes a call, as a pipe or a slow disk may.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn base64_read_in_chunks_equals_the_whole_files_encoding() {
    use super::read_write::{BASE64_READ_CHUNK, read_base64};
    let chunk = BASE64_READ_CHUNK;
    for len in [0, 1, 2, 3, chunk - 1, chunk, chunk + 1, 2 * chunk + 2] {
        #[allow(clippy::cast_possible_truncation)]
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        for step in [7, 1000, usize::MAX] {
            let mut reader = Trickle { data: &data, step };
            let (content, read) = read_base64(&mut reader, len).unwrap();
            assert_eq!(content, STANDARD.encode(&data), "len {len} step {step}");
            assert_eq!(read, len as u64);
        }
    }
}
