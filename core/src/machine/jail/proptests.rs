//! Generated-input property of the jail: arbitrary relative and absolute wire paths (`..`, `.`,
//! repeated separators, NUL, over-long components and paths, Unicode normalisation variants,
//! Windows-reserved names, `~`) over a generated tree of files, directories and symlinks
//! (into the root, out of it by relative and absolute targets, dangling, looping, chained),
//! driven through the FILE_* functions the connector calls and through [`Jail`]'s own methods.
//! Afterwards everything outside the root is byte-for-byte as before (names, contents, link
//! targets, modes, mtimes, ctimes, inodes: nothing written, created, deleted, moved or
//! chmod-ed), and no operation returned anything from outside: no read holds the marker planted
//! in every outside file, no stat or listing reports an outside entry's fingerprint (its
//! distinctive mtime and size), every path returned lies under the root and no error text names
//! where the root or the outside is.
//!
//! Windows-reserved names are refused by a rule this platform compiles in tests too; a second
//! property checks that rule for any spelling of a reserved name in any component.
//!
//! The case count and seed are fixed (reproducible runs); `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` override both (docs/security.md has the long run).

// The tree's links are made with the Unix call (Windows needs a privilege for them); the
// Windows naming rule checked here is compiled into tests on every platform.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::fs;
use std::hash::{Hash as _, Hasher as _};
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use uuid::Uuid;

use super::{Jail, JailError, JailedPath, check_windows};
use crate::machine::files::{
    self, DeleteRequest, Encoding, FileError, FileLimits, ListRequest, MoveRequest, ReadRequest,
    StatRequest, WriteContent, WriteRequest,
};

/// The default run's seed: the same cases every run, so a failure reproduces as is.
const SEED: u64 = 0x5EED_0016_0004;

fn config(default_cases: u32) -> ProptestConfig {
    crate::proptest_config::config(SEED, default_cases)
}

/// Any spelling of a reserved device name: any case, with or without an extension.
fn reserved_component() -> impl Strategy<Value = String> {
    let stems = select(vec![
        "con", "prn", "aux", "nul", "com1", "com5", "com9", "lpt1", "lpt4", "lpt9",
    ]);
    (
        stems,
        any::<u16>(),
        select(vec!["", ".txt", ".", ".tar.gz"]),
    )
        .prop_map(|(stem, case_bits, extension)| {
            let mixed: String = stem
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if case_bits & (1 << i) == 0 {
                        c
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect();
            format!("{mixed}{extension}")
        })
}

fn plain_component() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 ._-]{1,8}",
        select(vec![
            "..", ".", "con0", "com0", "lpt10", "console", "nul_", "é"
        ])
        .prop_map(String::from),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    /// Section 8, step 3: a reserved name anywhere in the path, behind any mix of separators,
    /// drive or `\\?\` prefix, is refused.
    #[test]
    fn windows_reserved_names_are_refused_in_every_component(
        before in prop::collection::vec(plain_component(), 0..4),
        reserved in reserved_component(),
        after in prop::collection::vec(plain_component(), 0..3),
        separators in prop::collection::vec(select(vec!["/", "\\", "//", "\\\\", "/\\"]), 8),
        prefix in select(vec!["", "C:", "C:\\", "\\\\?\\C:\\", "/", "\\"]),
    ) {
        let mut path = String::from(prefix);
        for (i, part) in before.iter().chain([&reserved]).chain(after.iter()).enumerate() {
            if i > 0 {
                path.push_str(separators[i % separators.len()]);
            }
            path.push_str(part);
        }
        prop_assert_eq!(check_windows(&path), Err(JailError::PathReservedName), "{:?}", path);
    }
}

/// Planted in every file outside the root: no read may ever return it.
const MARKER: &str = "OUTSIDE-SENTINEL-7f3a";
/// Every outside entry's mtime lies in the 1000 s after this (2001-09-09), a time nothing the
/// test creates inside the root has, so a stat or listing that reports one has looked outside.
const OUTSIDE_MTIME_SECS: u64 = 1_000_000_000;
/// Outside files are this size and up; everything written inside is far smaller.
const OUTSIDE_SIZE_BASE: u64 = 20_000;
/// The directories between the sandbox's base and the root (`base/o1/o2/o3/w/root`), each
/// holding a sentinel, so any `..` climb lands on watched ground inside the sandbox.
const LEVELS: [&str; 4] = ["o1", "o2", "o3", "w"];
/// Most `..` components one generated path holds: with the root five levels below the base, no
/// climb can leave the sandbox even if the jail failed.
const MAX_PARENTS: usize = 3;

/// Names for tree entries and path components: plain, hidden, glob and shell characters, `~`
/// forms, Windows-reserved names, Unicode normalisation variants (NFC/NFD é, Å as U+00C5 and
/// the Angstrom sign, fullwidth dots and solidus, a division slash), a backslashed `..`, a
/// bidi override, and the names of the outside entries, so paths climbing out find them.
const NAMES: [&str; 32] = [
    "a",
    "b",
    "c.txt",
    "d",
    ".hidden",
    "sp ace",
    "...",
    "~",
    "~root",
    "-rf",
    "*",
    "[x]",
    "CON",
    "nul.txt",
    "com1",
    "\u{e9}",
    "e\u{301}",
    "\u{c5}",
    "\u{212b}",
    "\u{ff0e}\u{ff0e}",
    "a\u{2215}b",
    "\u{ff0f}",
    "..\\..",
    "a:b",
    "\u{202e}gpj.exe",
    "outside",
    "root2",
    "root",
    "secret-6",
    "secret-4",
    "sub",
    "w",
];

fn name() -> impl Strategy<Value = usize> {
    // The first few names are likelier, so generated paths often meet generated entries.
    prop_oneof![3 => 0..4_usize, 1 => 0..NAMES.len()]
}

/// One component of a generated path.
#[derive(Debug, Clone)]
enum Part {
    Name(usize),
    Dot,
    DotDot,
    /// Nothing between two separators: a repeated separator.
    Empty,
    /// Longer than any file system's name limit.
    Long,
    Nul,
    /// Makes the whole path longer than `PATH_MAX`.
    Huge,
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        // Invalid parts end a path's resolution at once, so they stay rarer.
        16 => name().prop_map(Part::Name),
        2 => Just(Part::Dot),
        4 => Just(Part::DotDot),
        2 => Just(Part::Empty),
        1 => Just(Part::Long),
        1 => Just(Part::Nul),
        1 => Just(Part::Huge),
    ]
}

/// Where a generated path starts.
#[derive(Debug, Clone, Copy)]
enum Prefix {
    Relative,
    DotSlash,
    Root,
    RootDoubledSlashes,
    RootViaParent,
    /// The root through `/proc/self/root` (Linux), a legitimate alias.
    ProcRoot,
    /// `w/root2`, a sibling sharing the root's name as a prefix.
    Root2,
    Outside,
    RootParent,
    Base,
    Home,
    HomeSlash,
    TildeUser,
    FsRoot,
}

fn prefix() -> impl Strategy<Value = Prefix> {
    prop_oneof![
        14 => Just(Prefix::Relative),
        1 => Just(Prefix::DotSlash),
        5 => Just(Prefix::Root),
        1 => Just(Prefix::RootDoubledSlashes),
        1 => Just(Prefix::RootViaParent),
        1 => Just(Prefix::ProcRoot),
        1 => Just(Prefix::Root2),
        1 => Just(Prefix::Outside),
        1 => Just(Prefix::RootParent),
        1 => Just(Prefix::Base),
        1 => Just(Prefix::Home),
        1 => Just(Prefix::HomeSlash),
        1 => Just(Prefix::TildeUser),
        1 => Just(Prefix::FsRoot),
    ]
}

/// A generated wire path, rendered once the sandbox's location is known.
#[derive(Debug, Clone)]
struct Wire {
    prefix: Prefix,
    parts: Vec<Part>,
    trailing: &'static str,
}

fn wire() -> impl Strategy<Value = Wire> {
    (
        prefix(),
        prop::collection::vec(part(), 0..5),
        select(vec!["", "", "", "/", "//", "/."]),
    )
        .prop_map(|(prefix, parts, trailing)| Wire {
            prefix,
            parts,
            trailing,
        })
}

/// Where a generated symlink points.
#[derive(Debug, Clone)]
enum Target {
    /// Tree names, `.` and `..` (at most two), relative to the link.
    Relative(Vec<Part>),
    /// An absolute path of tree names under the root.
    AbsoluteInside(Vec<usize>),
    /// An outside entry, by a relative path climbing out of the root.
    RelativeOutside(Index),
    /// An outside entry by its absolute path.
    AbsoluteOutside(Index),
    /// An outside entry through `/proc/self/root` (Linux).
    ProcOutside(Index),
    /// The root itself, absolute.
    RootItself,
    Parent,
    Dangling,
    DanglingOutside,
    /// The link itself.
    SelfLoop,
    /// An earlier link, so links chain.
    Chain(Index),
}

fn target() -> impl Strategy<Value = Target> {
    let relative_part = prop_oneof![
        4 => name().prop_map(Part::Name),
        1 => Just(Part::Dot),
        2 => Just(Part::DotDot),
    ];
    prop_oneof![
        3 => prop::collection::vec(relative_part, 1..4).prop_map(Target::Relative),
        2 => prop::collection::vec(name(), 1..3).prop_map(Target::AbsoluteInside),
        2 => any::<Index>().prop_map(Target::RelativeOutside),
        2 => any::<Index>().prop_map(Target::AbsoluteOutside),
        1 => any::<Index>().prop_map(Target::ProcOutside),
        1 => Just(Target::RootItself),
        1 => Just(Target::Parent),
        1 => Just(Target::Dangling),
        1 => Just(Target::DanglingOutside),
        1 => Just(Target::SelfLoop),
        2 => any::<Index>().prop_map(Target::Chain),
    ]
}

#[derive(Debug, Clone)]
enum Kind {
    File(String),
    Dir,
    Link(Target),
}

/// One generated entry: a name under one of the directories made so far.
#[derive(Debug, Clone)]
struct Node {
    parent: Index,
    name: usize,
    kind: Kind,
}

fn node() -> impl Strategy<Value = Node> {
    let kind = prop_oneof![
        4 => "[a-z ]{0,24}".prop_map(Kind::File),
        3 => Just(Kind::Dir),
        4 => target().prop_map(Kind::Link),
    ];
    (any::<Index>(), name(), kind).prop_map(|(parent, name, kind)| Node { parent, name, kind })
}

/// A jail method called directly on a resolved path.
#[derive(Debug, Clone)]
enum Action {
    OpenRead,
    Metadata,
    SymlinkMetadata,
    ReadDir,
    Child(usize),
    CreateDirAll,
    RemoveFile,
    RemoveDir,
    RemoveDirAll,
    WriteAtomic(bool),
    Rename(Wire),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::OpenRead),
        Just(Action::Metadata),
        Just(Action::SymlinkMetadata),
        Just(Action::ReadDir),
        name().prop_map(Action::Child),
        Just(Action::CreateDirAll),
        Just(Action::RemoveFile),
        Just(Action::RemoveDir),
        Just(Action::RemoveDirAll),
        any::<bool>().prop_map(Action::WriteAtomic),
        wire().prop_map(Action::Rename),
    ]
}

/// One operation: a FILE_* function as the connector calls it, or a jail method.
#[derive(Debug, Clone)]
enum Op {
    Read {
        path: Wire,
        base64: bool,
        offset: u8,
        length: Option<u8>,
    },
    Write {
        path: Wire,
        content: String,
        base64: bool,
        create_parents: bool,
    },
    Stat {
        path: Wire,
        follow: bool,
    },
    List {
        path: Wire,
        recursive: bool,
        hidden: bool,
        glob: bool,
    },
    Delete {
        path: Wire,
        recursive: bool,
        missing_ok: bool,
    },
    Move {
        from: Wire,
        to: Wire,
        overwrite: bool,
    },
    Direct {
        path: Wire,
        follow: bool,
        action: Action,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (wire(), any::<bool>(), any::<u8>(), any::<Option<u8>>()).prop_map(
            |(path, base64, offset, length)| Op::Read { path, base64, offset, length }
        ),
        2 => (wire(), "[a-z ]{0,32}", any::<bool>(), any::<bool>()).prop_map(
            |(path, content, base64, create_parents)| Op::Write {
                path,
                content,
                base64,
                create_parents,
            }
        ),
        2 => (wire(), any::<bool>()).prop_map(|(path, follow)| Op::Stat { path, follow }),
        2 => (wire(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(path, recursive, hidden, glob)| Op::List { path, recursive, hidden, glob }
        ),
        2 => (wire(), any::<bool>(), any::<bool>()).prop_map(
            |(path, recursive, missing_ok)| Op::Delete { path, recursive, missing_ok }
        ),
        2 => (wire(), wire(), any::<bool>()).prop_map(
            |(from, to, overwrite)| Op::Move { from, to, overwrite }
        ),
        4 => (wire(), any::<bool>(), action()).prop_map(
            |(path, follow, action)| Op::Direct { path, follow, action }
        ),
    ]
}

/// The sandbox: `base/o1/o2/o3/w/root` is the jail; every other entry under `base` is outside
/// it and watched: a sentinel file in each level, `w/root2` (the root's name as a prefix),
/// `w/outside` (with a subdirectory and a link back into the root) and `o1/home`, the home
/// that `~` means for the direct jail calls.
struct Sandbox {
    base: PathBuf,
    w: PathBuf,
    root: PathBuf,
    home: PathBuf,
    /// Absolute paths of the outside entries links may point at.
    outside: Vec<PathBuf>,
    outside_sizes: Vec<u64>,
    /// Links made so far, absolute, for chains.
    links: Vec<PathBuf>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn outside_time(index: usize) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(OUTSIDE_MTIME_SECS + index as u64)
}

impl Sandbox {
    fn new(nodes: &[Node]) -> Self {
        let temp = fs::canonicalize(std::env::temp_dir()).unwrap();
        let base = temp.join(format!("jail-prop-{}", Uuid::new_v4().simple()));
        let mut w = base.clone();
        for level in LEVELS {
            w.push(level);
        }
        let root = w.join("root");
        let home = base.join("o1/home");
        let mut sandbox = Self {
            root: root.clone(),
            home: home.clone(),
            outside: Vec::new(),
            outside_sizes: Vec::new(),
            links: Vec::new(),
            base: base.clone(),
            w: w.clone(),
        };
        fs::create_dir_all(&root).unwrap();
        for dir in [w.join("root2"), w.join("outside/sub"), home] {
            fs::create_dir_all(dir).unwrap();
        }
        let mut sentinel_dirs = vec![base.clone()];
        let mut level = base.clone();
        for name in LEVELS {
            level.push(name);
            sentinel_dirs.push(level.clone());
        }
        sentinel_dirs.extend([
            w.join("root2"),
            w.join("outside"),
            w.join("outside/sub"),
            base.join("o1/home"),
        ]);
        for (i, dir) in sentinel_dirs.iter().enumerate() {
            let size = OUTSIDE_SIZE_BASE + 17 * i as u64;
            // The marker throughout, so any read of a range longer than two markers meets it.
            let mut content = MARKER.repeat(usize::try_from(size).unwrap() / MARKER.len() + 1);
            content.truncate(usize::try_from(size).unwrap());
            let path = dir.join(format!("secret-{i}"));
            fs::write(&path, content).unwrap();
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(outside_time(i))
                .unwrap();
            sandbox.outside_sizes.push(size);
            sandbox.outside.push(path);
        }
        symlink("../root", w.join("outside/back")).unwrap();
        sandbox.outside.extend(sentinel_dirs.iter().cloned());
        for node in nodes {
            sandbox.add(node);
        }
        // Last, as making entries changes a directory's mtime.
        for (i, dir) in sentinel_dirs.iter().enumerate() {
            fs::File::open(dir)
                .unwrap()
                .set_modified(outside_time(100 + i))
                .unwrap();
        }
        sandbox
    }

    /// Adds one generated entry under one of the real directories made so far; a name taken
    /// already is skipped.
    fn add(&mut self, node: &Node) {
        let mut dirs = vec![self.root.clone()];
        collect_dirs(&self.root, &mut dirs);
        let parent = node.parent.get(&dirs).clone();
        let path = parent.join(NAMES[node.name]);
        if fs::symlink_metadata(&path).is_ok() {
            return;
        }
        match &node.kind {
            Kind::File(content) => fs::write(&path, content).unwrap(),
            Kind::Dir => fs::create_dir(&path).unwrap(),
            Kind::Link(target) => {
                let depth = parent
                    .strip_prefix(&self.base)
                    .unwrap()
                    .components()
                    .count();
                let target = self.link_target(target, &path, depth);
                symlink(target, &path).unwrap();
                self.links.push(path);
            }
        }
    }

    /// `depth`: how many levels the link's directory is below the base.
    fn link_target(&self, target: &Target, link: &Path, depth: usize) -> PathBuf {
        match target {
            Target::Relative(parts) => {
                let mut path = PathBuf::new();
                for part in parts {
                    path.push(match part {
                        Part::Name(name) => NAMES[*name],
                        Part::DotDot => "..",
                        _ => ".",
                    });
                }
                path
            }
            Target::AbsoluteInside(names) => names
                .iter()
                .fold(self.root.clone(), |path, name| path.join(NAMES[*name])),
            Target::RelativeOutside(which) => {
                let up: PathBuf = std::iter::repeat_n("..", depth).collect();
                up.join(which.get(&self.outside).strip_prefix(&self.base).unwrap())
            }
            Target::AbsoluteOutside(which) => which.get(&self.outside).clone(),
            Target::ProcOutside(which) => proc_root(which.get::<PathBuf>(&self.outside)),
            Target::RootItself => self.root.clone(),
            Target::Parent => PathBuf::from(".."),
            Target::Dangling => PathBuf::from("nowhere"),
            Target::DanglingOutside => self.w.join("outside/nowhere"),
            Target::SelfLoop => PathBuf::from(link.file_name().unwrap()),
            Target::Chain(which) if !self.links.is_empty() => which.get(&self.links).clone(),
            Target::Chain(_) => PathBuf::from("nowhere"),
        }
    }

    /// Renders a wire path. `mutating` keeps a changing operation on sandbox ground: `~` is
    /// spelt as the sandbox's home, `/` as the base, and nothing climbs above the base.
    fn render(&self, wire: &Wire, mutating: bool) -> String {
        let show = |path: &Path| path.display().to_string();
        let root = show(&self.root);
        let mut prefix = match wire.prefix {
            Prefix::Relative => String::new(),
            Prefix::DotSlash => ".".to_owned(),
            Prefix::Root => show(&self.root),
            Prefix::RootDoubledSlashes => root.replace('/', "//"),
            Prefix::RootViaParent => format!("{root}/../root"),
            Prefix::ProcRoot => show(&proc_root(&self.root)),
            Prefix::Root2 => show(&self.w.join("root2")),
            Prefix::Outside => show(&self.w.join("outside")),
            Prefix::RootParent => show(&self.w),
            Prefix::Base => show(&self.base),
            Prefix::Home | Prefix::HomeSlash if mutating => show(&self.home),
            Prefix::Home => "~".to_owned(),
            Prefix::HomeSlash => "~/".to_owned(),
            Prefix::TildeUser => "~root".to_owned(),
            Prefix::FsRoot if mutating => show(&self.base),
            Prefix::FsRoot => "/".to_owned(),
        };
        let climbing_allowed = !(mutating && matches!(wire.prefix, Prefix::Base | Prefix::FsRoot));
        let mut parents = 0;
        let parts: Vec<String> = wire
            .parts
            .iter()
            .map(|part| match part {
                Part::Name(name) => NAMES[*name].to_owned(),
                Part::Dot => ".".to_owned(),
                Part::DotDot if climbing_allowed && parents < MAX_PARENTS => {
                    parents += 1;
                    "..".to_owned()
                }
                Part::DotDot => ".".to_owned(),
                Part::Empty => String::new(),
                Part::Long => "L".repeat(300),
                Part::Nul => "a\0b".to_owned(),
                Part::Huge => "h/".repeat(2100),
            })
            .collect();
        if !prefix.is_empty() && !prefix.ends_with('/') && !parts.is_empty() {
            prefix.push('/');
        }
        prefix + &parts.join("/") + wire.trailing
    }

    fn jail(&self) -> Jail {
        Jail::open(&self.root).unwrap()
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.push(entry.path());
            collect_dirs(&entry.path(), out);
        }
    }
}

#[cfg(target_os = "linux")]
fn proc_root(path: &Path) -> PathBuf {
    Path::new("/proc/self/root").join(path.strip_prefix("/").unwrap())
}

#[cfg(not(target_os = "linux"))]
fn proc_root(path: &Path) -> PathBuf {
    path.to_path_buf()
}

/// Everything about an entry that any write, create, delete, rename, chmod or link through it
/// would change (all but the access time, which a read may legitimately not even touch).
#[derive(Debug, PartialEq, Eq)]
enum Snap {
    File {
        content_digest: u64,
        len: u64,
        mode: u32,
        ino: u64,
        nlink: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
    },
    Dir {
        mode: u32,
        ino: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
    },
    Link {
        target: PathBuf,
        ino: u64,
        ctime: (i64, i64),
    },
}

/// Every entry under the base except the root's subtree.
fn snapshot(sandbox: &Sandbox) -> BTreeMap<PathBuf, Snap> {
    fn walk(dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, Snap>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path == skip {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            let mtime = (meta.mtime(), meta.mtime_nsec());
            let ctime = (meta.ctime(), meta.ctime_nsec());
            let snap = if meta.is_symlink() {
                Snap::Link {
                    target: fs::read_link(&path).unwrap(),
                    ino: meta.ino(),
                    ctime,
                }
            } else if meta.is_dir() {
                walk(&path, skip, out);
                Snap::Dir {
                    mode: meta.mode(),
                    ino: meta.ino(),
                    mtime,
                    ctime,
                }
            } else {
                // A digest, so a failure's message never carries the content.
                let mut hasher = std::hash::DefaultHasher::new();
                fs::read(&path).unwrap().hash(&mut hasher);
                Snap::File {
                    content_digest: hasher.finish(),
                    len: meta.len(),
                    mode: meta.mode(),
                    ino: meta.ino(),
                    nlink: meta.nlink(),
                    mtime,
                    ctime,
                }
            };
            out.insert(path, snap);
        }
    }
    let mut out = BTreeMap::new();
    walk(&sandbox.base, &sandbox.root, &mut out);
    out
}

/// Temporary files of [`Jail::write_atomic`] left anywhere under the root (links not entered).
fn leftover_temporaries(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".jail-") && name.ends_with(".tmp") {
            out.push(entry.path());
        }
        if entry.file_type().unwrap().is_dir() {
            leftover_temporaries(&entry.path(), out);
        }
    }
}

/// What an operation's results are checked against.
struct Watch<'a> {
    sandbox: &'a Sandbox,
    canonical_root: &'a Path,
    base_text: String,
}

impl Watch<'_> {
    fn inside(&self, path: &Path, what: &str) -> Result<(), TestCaseError> {
        prop_assert!(
            path.starts_with(self.canonical_root),
            "{what} returned a path outside the root: {}",
            path.display()
        );
        Ok(())
    }

    fn clean_bytes(bytes: &[u8], what: &str) -> Result<(), TestCaseError> {
        let leaked = bytes
            .windows(MARKER.len())
            .any(|window| window == MARKER.as_bytes());
        prop_assert!(
            !leaked,
            "{what} returned the content of a file outside the root"
        );
        Ok(())
    }

    /// An entry reported with an outside entry's size or mtime was looked at outside.
    fn clean_meta(
        &self,
        is_file: bool,
        size: u64,
        mtime_secs: Option<f64>,
        what: &str,
    ) -> Result<(), TestCaseError> {
        #[allow(clippy::cast_precision_loss, reason = "small whole seconds")]
        let window = OUTSIDE_MTIME_SECS as f64..(OUTSIDE_MTIME_SECS + 1000) as f64;
        prop_assert!(
            !mtime_secs.is_some_and(|secs| window.contains(&secs)),
            "{what} reported the mtime of an entry outside the root"
        );
        prop_assert!(
            !(is_file && self.sandbox.outside_sizes.contains(&size)),
            "{what} reported the size of a file outside the root"
        );
        Ok(())
    }

    fn clean_cap_meta(&self, meta: &super::Metadata, what: &str) -> Result<(), TestCaseError> {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|time| time.into_std().duration_since(UNIX_EPOCH).ok())
            .map(|since| since.as_secs_f64());
        self.clean_meta(meta.is_file(), meta.len(), mtime, what)
    }

    /// Error texts name at most root-relative paths: never where the sandbox is, never content.
    fn clean_error(&self, err: &impl std::fmt::Display, what: &str) -> Result<(), TestCaseError> {
        let text = err.to_string();
        prop_assert!(
            !text.contains(MARKER),
            "{what}: error text holds file content"
        );
        prop_assert!(
            !text.contains(&self.base_text),
            "{what}: error text names an absolute path: {text}"
        );
        Ok(())
    }

    fn file_result<T>(
        &self,
        result: Result<T, FileError>,
        what: &str,
        check: impl FnOnce(T) -> Result<(), TestCaseError>,
    ) -> Result<(), TestCaseError> {
        match result {
            Ok(value) => check(value),
            Err(err) => self.clean_error(&err, what),
        }
    }

    fn run(&self, jail: &Jail, op: &Op) -> Result<(), TestCaseError> {
        let limits = FileLimits::default();
        let render = |wire: &Wire, mutating: bool| self.sandbox.render(wire, mutating);
        match op {
            Op::Read {
                path,
                base64,
                offset,
                length,
            } => {
                let request = ReadRequest {
                    path: render(path, false),
                    encoding: if *base64 {
                        Encoding::Base64
                    } else {
                        Encoding::Text
                    },
                    offset: u64::from(*offset % 4),
                    length: length.map(u64::from),
                };
                self.file_result(files::read(jail, &request, &limits), "read", |read| {
                    self.inside(&read.path, "read")?;
                    self.clean_meta(true, read.file_size, None, "read")?;
                    let bytes = if *base64 {
                        STANDARD.decode(&read.content).unwrap()
                    } else {
                        read.content.into_bytes()
                    };
                    Self::clean_bytes(&bytes, "read")
                })
            }
            Op::Write {
                path,
                content,
                base64,
                create_parents,
            } => {
                let request = WriteRequest {
                    path: render(path, true),
                    content: if *base64 {
                        WriteContent::Base64(STANDARD.encode(content))
                    } else {
                        WriteContent::Text(content.clone())
                    },
                    create_parents: *create_parents,
                };
                self.file_result(files::write(jail, &request, &limits), "write", |written| {
                    self.inside(&written.path, "write")
                })
            }
            Op::Stat { path, follow } => {
                let request = StatRequest {
                    path: render(path, false),
                    follow_symlinks: *follow,
                };
                self.file_result(files::stat(jail, &request), "stat", |stat| {
                    self.inside(&stat.path, "stat")?;
                    match stat.info {
                        Some(info) => {
                            self.clean_meta(info.is_file, info.size_bytes, info.mtime, "stat")
                        }
                        None => Ok(()),
                    }
                })
            }
            Op::List {
                path,
                recursive,
                hidden,
                glob,
            } => {
                let request = ListRequest {
                    path: render(path, false),
                    pattern: glob.then(|| "*".to_owned()),
                    recursive: *recursive,
                    include_hidden: *hidden,
                    max_entries: 200,
                };
                self.file_result(files::list(jail, &request, &limits), "list", |list| {
                    self.inside(&list.path, "list")?;
                    for entry in &list.entries {
                        self.inside(&entry.path, "list entry")?;
                        let is_file = entry.is_file && !entry.is_symlink;
                        self.clean_meta(is_file, entry.size_bytes, Some(entry.mtime), "list")?;
                    }
                    Ok(())
                })
            }
            Op::Delete {
                path,
                recursive,
                missing_ok,
            } => {
                let request = DeleteRequest {
                    path: render(path, true),
                    recursive: *recursive,
                    missing_ok: *missing_ok,
                };
                self.file_result(files::delete(jail, &request), "delete", |deleted| {
                    self.inside(&deleted.path, "delete")
                })
            }
            Op::Move {
                from,
                to,
                overwrite,
            } => {
                let request = MoveRequest {
                    from: render(from, true),
                    to: render(to, true),
                    overwrite: *overwrite,
                };
                self.file_result(files::move_path(jail, &request, &limits), "move", |moved| {
                    self.inside(&moved.from, "move")?;
                    self.inside(&moved.to, "move")
                })
            }
            Op::Direct {
                path,
                follow,
                action,
            } => {
                let mutating = !matches!(
                    action,
                    Action::OpenRead
                        | Action::Metadata
                        | Action::SymlinkMetadata
                        | Action::ReadDir
                        | Action::Child(_)
                );
                let home = Some(self.sandbox.home.as_path());
                match jail.resolve_with(&render(path, mutating), home, *follow) {
                    Ok(resolved) => self.direct(jail, &resolved, action),
                    Err(err) => self.clean_error(&err, "resolve"),
                }
            }
        }
    }

    fn direct(&self, jail: &Jail, path: &JailedPath, action: &Action) -> Result<(), TestCaseError> {
        self.inside(path.absolute(), "resolve")?;
        prop_assert!(
            path.relative()
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_))),
            "resolve returned a relative path that is not plain names: {}",
            path.relative().display()
        );
        // The jail's own failure, or `Ok`; a leak found on the way returns at once.
        let outcome: Result<(), JailError> = match action {
            Action::OpenRead => match jail.open_read(path) {
                Ok(file) => {
                    let mut bytes = Vec::new();
                    let read = file.take(1 << 20).read_to_end(&mut bytes);
                    Self::clean_bytes(&bytes, "open_read")?;
                    read.map(drop).map_err(|err| JailError::from_io(&err, path))
                }
                Err(err) => Err(err),
            },
            Action::Metadata => match jail.metadata(path) {
                Ok(meta) => self.clean_cap_meta(&meta, "metadata").map(Ok)?,
                Err(err) => Err(err),
            },
            Action::SymlinkMetadata => match jail.symlink_metadata(path) {
                Ok(meta) => self.clean_cap_meta(&meta, "symlink_metadata").map(Ok)?,
                Err(err) => Err(err),
            },
            Action::ReadDir => match jail.read_dir(path) {
                Ok(entries) => {
                    for entry in entries {
                        if let Ok(meta) = entry.and_then(|entry| entry.metadata()) {
                            self.clean_cap_meta(&meta, "read_dir")?;
                        }
                    }
                    Ok(())
                }
                Err(err) => Err(err),
            },
            Action::Child(name) => match jail.child(path, std::ffi::OsStr::new(NAMES[*name])) {
                Ok(child) => {
                    self.inside(child.absolute(), "child")?;
                    match jail.symlink_metadata(&child) {
                        Ok(meta) => self.clean_cap_meta(&meta, "child").map(Ok)?,
                        Err(err) => Err(err),
                    }
                }
                Err(err) => Err(err),
            },
            Action::CreateDirAll => jail.create_dir_all(path),
            Action::RemoveFile => jail.remove_file(path),
            Action::RemoveDir => jail.remove_dir(path),
            Action::RemoveDirAll => jail.remove_dir_all(path),
            Action::WriteAtomic(create_parents) => {
                jail.write_atomic(path, b"written through the jail", *create_parents)
            }
            Action::Rename(to) => {
                let home = Some(self.sandbox.home.as_path());
                match jail.resolve_with(&self.sandbox.render(to, true), home, false) {
                    Ok(to) => {
                        self.inside(to.absolute(), "resolve")?;
                        jail.rename(path, &to)
                    }
                    Err(err) => Err(err),
                }
            }
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(err) => self.clean_error(&err, "jail"),
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// The property: whatever the paths and the tree, nothing outside the root is read,
    /// written, listed, statted or deleted, checked against the real file system afterwards.
    #[test]
    fn nothing_outside_the_root_is_touched_or_returned(
        nodes in prop::collection::vec(node(), 0..14),
        ops in prop::collection::vec(op(), 1..32),
    ) {
        let sandbox = Sandbox::new(&nodes);
        let before = snapshot(&sandbox);
        let jail = sandbox.jail();
        let watch = Watch {
            sandbox: &sandbox,
            canonical_root: jail.root(),
            base_text: sandbox.base.display().to_string(),
        };
        for op in &ops {
            watch.run(&jail, op)?;
        }
        let after = snapshot(&sandbox);
        let changed: std::collections::BTreeSet<String> = before
            .keys()
            .chain(after.keys())
            .filter(|path| before.get(*path) != after.get(*path))
            .map(|path| path.strip_prefix(&sandbox.base).unwrap_or(path).display().to_string())
            .collect();
        prop_assert!(changed.is_empty(), "changed outside the root: {:?}", changed);
        prop_assert!(fs::symlink_metadata(&sandbox.root).unwrap().is_dir(), "the root is gone");
        let mut temporaries = Vec::new();
        leftover_temporaries(&sandbox.root, &mut temporaries);
        prop_assert!(temporaries.is_empty(), "temporary files left: {:?}", temporaries);
    }
}
