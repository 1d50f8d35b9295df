//! Tests of [`super`] on real directories in a temporary folder: listing, the scan bound, refused
//! links, virtual roots and fingerprints.

use super::*;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("browse-{tag}-{}", crate::secret::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

#[test]
fn lists_only_real_accessible_directories_sorted_case_insensitively() {
    let root = temp_dir("list");
    for name in ["beta", "Alpha", "gamma"] {
        std::fs::create_dir(root.join(name)).unwrap();
    }
    std::fs::create_dir_all(root.join("Alpha/nested")).unwrap();
    std::fs::write(root.join("file.txt"), b"x").unwrap();
    // Creating a link on Windows needs a privilege a test cannot count on.
    #[cfg(unix)]
    std::os::unix::fs::symlink(root.join("beta"), root.join("link")).unwrap();
    let open = open_strict(&root).unwrap();
    let listing = list(&open).unwrap();
    let names: Vec<&str> = listing.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Alpha", "beta", "gamma"]);
    assert!(!listing.truncated);
    assert_eq!(listing.children[0].path, root.join("Alpha"));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn the_scan_bound_truncates_at_its_boundary() {
    let root = temp_dir("bound");
    for i in 0..MAX_SCANNED_ENTRIES {
        std::fs::create_dir(root.join(format!("d{i:04}"))).unwrap();
    }
    let open = open_strict(&root).unwrap();
    let exact = list(&open).unwrap();
    assert_eq!(exact.children.len(), MAX_SCANNED_ENTRIES);
    assert!(!exact.truncated);
    std::fs::create_dir(root.join("one-more")).unwrap();
    let open = open_strict(&root).unwrap();
    let over = list(&open).unwrap();
    assert!(over.truncated);
    assert_eq!(over.children.len(), MAX_SCANNED_ENTRIES);
    std::fs::remove_dir_all(root).unwrap();
}

#[cfg(unix)]
#[test]
fn links_and_non_canonical_paths_are_refused() {
    let root = temp_dir("links");
    std::fs::create_dir(root.join("real")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
    assert!(matches!(
        open_strict(&root.join("link")),
        Err(BrowseError::Link)
    ));
    assert!(matches!(
        open_canonical(&root.join("link")),
        Err(BrowseError::Link)
    ));
    assert!(matches!(
        open_strict(&root.join("real/../real")),
        Err(BrowseError::Unavailable)
    ));
    assert!(matches!(
        open_strict(&root.join("missing")),
        Err(BrowseError::Unavailable)
    ));
    assert_eq!(
        open_strict(&root.join("real")).unwrap().path,
        root.join("real")
    );
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn the_home_directory_is_a_virtual_root() {
    let home = temp_dir("home");
    let roots = virtual_roots(Some(&home));
    assert_eq!(roots[0].path, home);
    assert_eq!(
        display_name(&home),
        home.file_name().unwrap().to_string_lossy()
    );
    assert_eq!(display_name(Path::new("/")), "/");
    std::fs::remove_dir(home).unwrap();
}

#[test]
fn wsl2_is_told_by_proc_version() {
    let wsl = "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0) #1 SMP";
    assert_eq!(HostOs::from_proc_version(wsl), HostOs::Wsl2);
    assert_eq!(
        HostOs::from_proc_version("Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)"),
        HostOs::Wsl2
    );
    assert_eq!(
        HostOs::from_proc_version(
            "Linux version 6.12.48+deb13-amd64 (debian-kernel@lists.debian.org)"
        ),
        HostOs::Linux
    );
    assert_eq!(HostOs::from_proc_version(""), HostOs::Linux);
}

#[test]
fn mount_parents_follow_the_reference_per_os() {
    let home = Path::new("/home/alice");
    let any = |path: &str| MountParent {
        path: PathBuf::from(path),
        drive_letters_only: false,
    };
    assert_eq!(
        mount_parents(HostOs::Linux, Some(home)),
        [any("/media/alice"), any("/run/media/alice")]
    );
    assert_eq!(
        mount_parents(HostOs::Wsl2, Some(home)),
        [
            any("/media/alice"),
            any("/run/media/alice"),
            MountParent {
                path: PathBuf::from("/mnt"),
                drive_letters_only: true
            }
        ]
    );
    // Without a home there is no user for /media, but WSL2's drives are still there.
    assert!(mount_parents(HostOs::Linux, None).is_empty());
    assert_eq!(mount_parents(HostOs::Wsl2, None).len(), 1);
    assert_eq!(mount_parents(HostOs::MacOs, None), [any("/Volumes")]);
    assert!(mount_parents(HostOs::Windows, Some(home)).is_empty());

    let mnt = &mount_parents(HostOs::Wsl2, None)[0];
    for (name, offered) in [
        ("c", true),
        ("D", true),
        ("wsl", false),
        ("wslg", false),
        ("cd", false),
        ("", false),
        ("1", false),
        ("é", false),
    ] {
        assert_eq!(mnt.offers(name), offered, "{name:?}");
    }
    assert!(any("/media/alice").offers("USB STICK"));
}

#[test]
fn windows_offers_removable_and_fixed_drives_only() {
    // GetDriveTypeW: 2 removable, 3 fixed, 4 remote, 5 CD-ROM, 6 RAM disk, 0/1 unknown.
    let drives = [
        ('D', 2),
        ('c', 3),
        ('Z', 4),
        ('E', 5),
        ('R', 6),
        ('X', 1),
        ('C', 3),
        ('1', 3),
    ];
    assert_eq!(
        windows_drive_roots(drives),
        [PathBuf::from("C:\\"), PathBuf::from("D:\\")]
    );
    assert!(windows_drive_roots([]).is_empty());
    for name in [
        "Windows",
        "Program Files (x86)",
        "$Recycle.Bin",
        "ProgramData",
    ] {
        assert!(skipped_on_windows(name), "{name}");
    }
    assert!(!skipped_on_windows("Projects"));
    assert!(!skipped_on_windows("Windows Stuff"));
}

#[test]
fn special_roots_and_case_folding_differ_per_os() {
    assert!(HostOs::Linux.special_roots().contains(&"/proc"));
    assert!(HostOs::Wsl2.special_roots().contains(&"/run"));
    assert_eq!(HostOs::MacOs.special_roots(), ["/System", "/private"]);
    assert_eq!(
        same_root_key(HostOs::Windows, Path::new("C:\\Users")),
        same_root_key(HostOs::Windows, Path::new("c:\\users"))
    );
    assert_ne!(
        same_root_key(HostOs::Linux, Path::new("/media/a/USB")),
        same_root_key(HostOs::Linux, Path::new("/media/a/usb"))
    );
}

#[test]
fn a_directory_recreated_under_the_same_name_changes_the_fingerprint() {
    let root = temp_dir("fingerprint");
    let path = root.join("project");
    std::fs::create_dir(&path).unwrap();
    let first = open_strict(&path).unwrap();
    let before = fingerprint(&first.path, &first.identity);
    assert_eq!(before.len(), 64);
    assert!(
        before
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // Writing a file into it must not change it (its mtime and ctime move).
    std::fs::write(path.join("notes.txt"), b"x").unwrap();
    let again = open_strict(&path).unwrap();
    assert_eq!(fingerprint(&again.path, &again.identity), before);
    drop((first, again));
    std::fs::remove_file(path.join("notes.txt")).unwrap();
    // rmdir + mkdir: ext4 typically hands the same inode back.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::remove_dir(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let recreated = open_strict(&path).unwrap();
    assert!(
        recreated.identity.birth_ns.is_some(),
        "this filesystem reports no birth time; the fingerprint cannot tell a recreated directory"
    );
    assert_ne!(fingerprint(&recreated.path, &recreated.identity), before);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn the_legacy_fingerprint_matches_the_reference_form() {
    // sha256 of {"device":2049,"inode":1234,"path":"/home/alice/Projekt\u00e9"}
    let identity = Identity {
        device: 2049,
        inode: 1234,
        birth_ns: None,
    };
    let text = r#"{"device":2049,"inode":1234,"path":"/home/alice/Projekt\u00e9"}"#;
    assert_eq!(
        legacy_fingerprint(Path::new("/home/alice/Projekté"), &identity),
        hex(&Sha256::digest(text.as_bytes()))
    );
    // The same, computed by Python's json.dumps(sort_keys=True, separators=(",", ":")).
    assert_eq!(
        legacy_fingerprint(Path::new("/home/alice/Projekté"), &identity),
        "c195058e1950055e971523cc0be7a55229627f6c082fdc5ba60932d885217ec3"
    );
    assert_eq!(json_ascii_string("a\"😀"), r#""a\"\ud83d\ude00""#);
}
