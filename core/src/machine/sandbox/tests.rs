//! The sandbox's pure parts: mode names, the launcher's command line, the probe's report and
//! what a mode misses, `mountinfo` parsing and the flags a read-only remount keeps. The
//! confinement itself is tested through the real connector binary (`tests/tests/suite/connector_sandbox.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;

#[test]
fn modes_are_named_as_the_setting_spells_them() {
    for mode in SandboxMode::ALL {
        assert_eq!(SandboxMode::from_name(mode.as_str()), Some(mode));
    }
    assert_eq!(
        SandboxMode::from_name(" strict "),
        Some(SandboxMode::Strict)
    );
    assert_eq!(SandboxMode::from_name("Strict"), None);
    assert_eq!(SandboxMode::from_name("on"), None);
    assert_eq!(SandboxMode::default(), SandboxMode::Off);
    assert!(Sandbox::new(SandboxMode::Off, PathBuf::from("/bin/x")).is_none());
}

#[test]
fn the_launcher_gets_the_policy_then_the_program() {
    let sandbox = Sandbox::new(SandboxMode::Strict, PathBuf::from("/proc/self/exe")).unwrap();
    let confinement = sandbox.confine(Path::new("/home/a/root"));
    assert_eq!(confinement.mode(), SandboxMode::Strict);
    let (launcher, argv) = confinement.launcher_command(
        Path::new("/tmp/t"),
        Path::new("/home/a/root/sub"),
        "ls".as_ref(),
        "/usr/bin/ls".as_ref(),
        "ls".as_ref(),
        &[OsString::from("-l"), OsString::from("a b")],
    );
    assert_eq!(launcher, Path::new("/proc/self/exe"));
    let argv: Vec<&str> = argv.iter().map(|a| a.to_str().unwrap()).collect();
    assert_eq!(
        argv,
        [
            LAUNCH_ARG,
            "run",
            "strict",
            "/home/a/root",
            "/tmp/t",
            "/home/a/root/sub",
            "ls",
            "/usr/bin/ls",
            "ls",
            "-l",
            "a b"
        ]
    );
}

#[test]
fn the_probe_report_says_what_each_mode_misses() {
    let all = Support::from_report(launcher(), "namespaces ok\nseccomp ok\nlandlock 7\n");
    assert_eq!(all.landlock, Ok(7));
    assert_eq!(all.missing(SandboxMode::Off), None);
    if cfg!(target_os = "linux") {
        assert_eq!(all.missing(SandboxMode::Workspace), None);
        assert_eq!(all.missing(SandboxMode::Strict), None);
    }
    assert_eq!(
        all.summary(),
        "Landlock ABI 7, user namespaces available, seccomp available"
    );

    let no_userns = Support::from_report(
        launcher(),
        "namespaces error unshare: ENOSPC: No space left on device; user.max_user_namespaces is 0\nseccomp ok\nlandlock 2\n",
    );
    let missing = no_userns.missing(SandboxMode::Workspace).unwrap();
    if cfg!(target_os = "linux") {
        assert!(missing.contains("Landlock ABI 2 is too old"), "{missing}");
        assert!(
            missing.contains("user and mount namespaces are not available (unshare"),
            "{missing}"
        );
        assert!(missing.contains("max_user_namespaces is 0"), "{missing}");
    } else {
        assert_eq!(missing, "the shell sandbox is Linux-only for now");
    }

    let no_seccomp = Support::from_report(
        launcher(),
        "namespaces ok\nseccomp error EINVAL\nlandlock 6\n",
    );
    if cfg!(target_os = "linux") {
        for mode in [SandboxMode::Workspace, SandboxMode::Strict] {
            let missing = no_seccomp.missing(mode).unwrap();
            assert_eq!(missing, "seccomp filters are not available (EINVAL)");
        }
    }

    // A probe that died before reporting misses everything, never nothing.
    let silent = Support::from_report(launcher(), "");
    assert!(silent.missing(SandboxMode::Workspace).is_some());
    let garbled = Support::from_report(launcher(), "namespaces ok\nseccomp ok\nlandlock seven\n");
    assert!(garbled.missing(SandboxMode::Workspace).is_some());

    // Without its launcher no mode is enforced, and the one clause says so.
    assert_eq!(all.launcher(), Some(launcher()));
    let no_launcher = Support::without_launcher("/opt/x/launcher is missing".to_owned());
    assert_eq!(no_launcher.launcher(), None);
    if cfg!(target_os = "linux") {
        assert_eq!(
            no_launcher.missing(SandboxMode::Workspace).as_deref(),
            Some("the sandbox launcher /opt/x/launcher is missing")
        );
        assert!(no_launcher.missing(SandboxMode::Strict).is_some());
    }
    assert_eq!(no_launcher.missing(SandboxMode::Off), None);
    assert_eq!(
        no_launcher.summary(),
        "no sandbox launcher, so nothing was tried"
    );
}

/// The launcher the probe reports are from.
fn launcher() -> &'static Path {
    Path::new("/opt/x/launcher")
}

#[test]
fn a_private_tmp_is_owner_only_and_removed_with_what_the_command_left() {
    let tmp = PrivateTmp::create().unwrap();
    let path = tmp.path().to_path_buf();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A folder the command locked itself out of is removed all the same.
        let locked = path.join("locked");
        std::fs::create_dir_all(locked.join("deep")).unwrap();
        std::fs::write(locked.join("deep/file"), "x").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    tmp.remove();
    assert!(!path.exists());
    let dropped = PrivateTmp::create().unwrap();
    let path = dropped.path().to_path_buf();
    drop(dropped);
    assert!(!path.exists());
}

#[cfg(target_os = "linux")]
mod linux {
    use rustix::mount::MountFlags;

    use super::super::mounts::{MountEntry, parse_mountinfo};
    use std::path::PathBuf;

    #[test]
    fn mountinfo_gives_each_point_with_the_flags_a_remount_must_keep() {
        let text = "\
22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
27 1 254:0 / / rw,noatime - ext4 /dev/vda rw
28 27 0:25 / /mnt/with\\040space\\134x ro,nosuid,nodev,nodiratime,relatime shared:1 - tmpfs t ro
29 27 0:26 / /strict rw - tmpfs t rw
";
        let entries = parse_mountinfo(text);
        assert_eq!(
            entries,
            [
                MountEntry {
                    point: PathBuf::from("/proc"),
                    flags: MountFlags::NOSUID
                        | MountFlags::NODEV
                        | MountFlags::NOEXEC
                        | MountFlags::RELATIME,
                },
                MountEntry {
                    point: PathBuf::from("/"),
                    flags: MountFlags::NOATIME,
                },
                MountEntry {
                    point: PathBuf::from("/mnt/with space\\x"),
                    flags: MountFlags::NOSUID
                        | MountFlags::NODEV
                        | MountFlags::NODIRATIME
                        | MountFlags::RELATIME,
                },
                MountEntry {
                    point: PathBuf::from("/strict"),
                    flags: MountFlags::STRICTATIME,
                },
            ]
        );
        assert!(parse_mountinfo("garbage\n\n").is_empty());
    }
}

/// A spare made for another root, or for a folder since replaced at the same path, is never
/// handed out: it is killed, reaped and its `TMPDIR` removed, and the caller starts the
/// launcher itself; one for the same root is handed out once; a closed slot takes no spare and
/// leaves nothing running.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_spare_for_another_root_is_discarded_and_a_closed_slot_keeps_none() {
    let waiting = |root: &Path| {
        let tmp = PrivateTmp::create().unwrap();
        let child = tokio::process::Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        spare::Spare {
            root: root.to_path_buf(),
            identity: spare::identity(root),
            child,
            tmp,
            mounts: std::fs::File::open("/proc/self/mountinfo").unwrap(),
        }
    };
    let gone = |pid: u32, tmp: &Path| !Path::new(&format!("/proc/{pid}")).exists() && !tmp.exists();
    let discarded = |slot: &spare::Slot, spare: spare::Spare, root: &Path| {
        let (pid, tmp) = (spare.child.id().unwrap(), spare.tmp.path().to_path_buf());
        slot.put(spare);
        assert!(
            slot.take(root).is_none(),
            "{} was handed out",
            tmp.display()
        );
        assert!(
            gone(pid, &tmp),
            "the spare {pid} or {} stayed",
            tmp.display()
        );
        assert!(slot.take(root).is_none(), "the slot kept it");
    };
    // Real folders: the slot compares what is at the path.
    let (root, other) = (PrivateTmp::create().unwrap(), PrivateTmp::create().unwrap());
    let slot = spare::Slot::default();
    discarded(&slot, waiting(other.path()), root.path());

    slot.put(waiting(root.path()));
    let same = slot.take(root.path()).expect("the matching spare");
    assert!(slot.take(root.path()).is_none(), "handed out twice");
    spare::discard(same);

    let replaced = waiting(root.path());
    std::fs::remove_dir(root.path()).unwrap();
    // Past the clock's tick: the new folder may get the same inode number.
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::fs::create_dir(root.path()).unwrap();
    discarded(&slot, replaced, root.path());

    let last = waiting(root.path());
    let (pid, tmp) = (last.child.id().unwrap(), last.tmp.path().to_path_buf());
    slot.put(last);
    slot.close();
    assert!(
        gone(pid, &tmp),
        "a closed slot left {pid} or {}",
        tmp.display()
    );
    let late = waiting(root.path());
    let (pid, tmp) = (late.child.id().unwrap(), late.tmp.path().to_path_buf());
    slot.put(late);
    assert!(gone(pid, &tmp), "a closed slot took a late spare {pid}");
}

/// The spare's request: the fields in their order, each ended by NUL; a NUL inside a field
/// (a request's argument or variable can hold one) gives no request, since the spare could not
/// tell it from a field's end.
#[test]
fn the_spare_request_carries_the_fields_in_order_and_refuses_a_nul() {
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin"))];
    let request = spare::request(
        Path::new("/r/w"),
        "sh".as_ref(),
        "/bin/sh".as_ref(),
        "sh".as_ref(),
        &["-c".into(), "true".into()],
        &env,
    );
    assert_eq!(
        request.as_deref(),
        Some(&b"/r/w\0sh\0/bin/sh\0sh\0\x32\0-c\0true\0PATH\0/usr/bin\0"[..])
    );
    assert!(
        spare::request(
            Path::new("/r"),
            "a".as_ref(),
            "/a".as_ref(),
            "a".as_ref(),
            &["x\0y".into()],
            &[]
        )
        .is_none()
    );
    let nul_value = [(OsString::from("A"), OsString::from("1\0x"))];
    assert!(
        spare::request(
            Path::new("/r"),
            "a".as_ref(),
            "/a".as_ref(),
            "a".as_ref(),
            &[],
            &nul_value
        )
        .is_none()
    );
}

/// A folder of a connector that died without removing it goes at the next sweep; one a live
/// value holds, a file and a symbolic link of the same name stay.
#[cfg(unix)]
#[test]
fn a_sweep_removes_only_folders_nobody_holds() {
    let temp = std::env::temp_dir();
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let orphan = temp.join(format!("{TMP_PREFIX}orphan-{unique}"));
    std::fs::create_dir(&orphan).unwrap();
    std::fs::write(orphan.join("left.txt"), "left behind").unwrap();
    let file = temp.join(format!("{TMP_PREFIX}file-{unique}"));
    std::fs::write(&file, "not a folder").unwrap();
    let live = PrivateTmp::create().unwrap();
    let link = temp.join(format!("{TMP_PREFIX}link-{unique}"));
    std::os::unix::fs::symlink(live.path(), &link).unwrap();
    std::fs::write(live.path().join("kept.txt"), "in use").unwrap();

    sweep_orphans();

    assert!(!orphan.exists(), "the orphan stayed");
    assert!(live.path().join("kept.txt").is_file(), "a held folder went");
    assert!(file.is_file(), "a file went");
    assert!(link.is_symlink(), "a symbolic link went");
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&link).unwrap();
    live.remove();
}
