//! FILE_* through the real `autogpt-shim` binary: jail escapes of every kind, a symlink swapped
//! while reads run, and a write interrupted by SIGKILL.

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use e2e::platform::{Platform, error_code};
use serde_json::json;

use super::connector::{home_and_root, spawn};

const SECRET: &str = "SECRET-OUTSIDE-THE-ROOT";

#[tokio::test]
async fn every_escape_is_refused_and_nothing_outside_changes() {
    let (home, root) = home_and_root("shim-escape");
    let outside = home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    // A sibling whose name extends the root's: a string-prefix check would let it through.
    let sibling = home.join("root2");
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("x.txt"), SECRET).unwrap();
    symlink(&outside, root.join("out")).unwrap();
    symlink(outside.join("planted.txt"), root.join("dangling")).unwrap();
    std::fs::write(root.join("inside.txt"), "inside").unwrap();
    symlink(root.join("inside.txt"), root.join("alias")).unwrap();

    let platform = Platform::bind().await;
    let _shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;

    let reads = [
        "../outside/secret.txt".to_owned(),
        format!("{}", outside.join("secret.txt").display()),
        "out/secret.txt".to_owned(),
        format!("{}", sibling.join("x.txt").display()),
        "/etc/passwd".to_owned(),
        "inside.txt/../../outside/secret.txt".to_owned(),
    ];
    for (i, path) in reads.iter().enumerate() {
        let reply = conn
            .call("FILE_READ", &format!("r{i}"), json!({"path": path}))
            .await;
        assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT", "{path}");
        assert!(!reply.to_string().contains(SECRET), "{path}");
    }
    let missing = conn
        .call("FILE_READ", "r-missing", json!({"path": "nope.txt"}))
        .await;
    assert_eq!(error_code(&missing), "PATH_NOT_FOUND");

    // Writes: a parent outside (with create_parents), through a link out, through a
    // dangling link out, and over the sibling.
    let writes = [
        json!({"path": "../escape/new.txt", "content": "x", "create_parents": true}),
        json!({"path": "out/new.txt", "content": "x"}),
        json!({"path": "dangling", "content": "x"}),
        json!({"path": sibling.join("x.txt").to_string_lossy(), "content": "x"}),
    ];
    for (i, payload) in writes.iter().enumerate() {
        let reply = conn
            .call("FILE_WRITE", &format!("w{i}"), payload.clone())
            .await;
        assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT", "{payload}");
    }
    assert!(!home.join("escape").exists());
    assert!(!outside.join("new.txt").exists());
    assert!(!outside.join("planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sibling.join("x.txt")).unwrap(),
        SECRET
    );

    // Stat of a missing file is an answer; stat outside is an error.
    let gone = conn
        .call("FILE_STAT", "s1", json!({"path": "gone.txt"}))
        .await;
    assert_eq!(gone["payload"]["exists"], false, "{gone}");
    let out = conn
        .call("FILE_STAT", "s2", json!({"path": "out/secret.txt"}))
        .await;
    assert_eq!(error_code(&out), "PATH_OUTSIDE_ALLOWED_ROOT");

    // Deleting a link removes the link, never its target; moving out is refused.
    let deleted = conn
        .call("FILE_DELETE", "d1", json!({"path": "alias"}))
        .await;
    assert_eq!(deleted["type"], "ACK", "{deleted}");
    assert!(root.join("inside.txt").exists());
    assert!(std::fs::symlink_metadata(root.join("alias")).is_err());
    let moved = conn
        .call(
            "FILE_MOVE",
            "m1",
            json!({"src": "inside.txt", "dst": "../outside/stolen.txt"}),
        )
        .await;
    assert_eq!(error_code(&moved), "PATH_OUTSIDE_ALLOWED_ROOT");
    assert!(root.join("inside.txt").exists());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
}

#[tokio::test]
async fn a_symlink_swapped_during_reads_never_yields_outside_bytes() {
    let (home, root) = home_and_root("shim-race");
    let outside = home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("inside.txt"), "inside").unwrap();
    symlink("inside.txt", root.join("link")).unwrap();

    let platform = Platform::bind().await;
    let _shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;

    // Flip the link between a target inside and one outside as fast as possible; rename
    // makes each swap atomic, so the link always exists.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let root = root.clone();
        let secret = outside.join("secret.txt");
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let temp = root.join(".link.tmp");
                let _ = std::fs::remove_file(&temp);
                if flips.is_multiple_of(2) {
                    symlink(&secret, &temp).unwrap();
                } else {
                    symlink("inside.txt", &temp).unwrap();
                }
                std::fs::rename(&temp, root.join("link")).unwrap();
                flips += 1;
            }
            flips
        })
    };

    let total = 400;
    let mut sent = 0;
    let (mut inside, mut refused) = (0, 0);
    while sent < 4 {
        conn.request("FILE_READ", &format!("r{sent}"), json!({"path": "link"}))
            .await;
        sent += 1;
    }
    for _ in 0..total {
        let reply = conn.recv().await;
        let text = reply.to_string();
        assert!(!text.contains(SECRET), "outside bytes leaked: {text}");
        if reply["type"] == "FILE_CONTENTS" {
            assert_eq!(reply["payload"]["content"], "inside", "{reply}");
            inside += 1;
        } else {
            assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT", "{reply}");
            refused += 1;
        }
        if sent < total {
            conn.request("FILE_READ", &format!("r{sent}"), json!({"path": "link"}))
                .await;
            sent += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 10, "the link barely moved ({flips} flips)");
    eprintln!("swapped link: {inside} inside reads, {refused} refused, {flips} flips");
    assert_eq!(inside + refused, total);
}

#[tokio::test]
async fn a_write_killed_with_sigkill_leaves_the_old_or_the_new_content() {
    let (home, root) = home_and_root("shim-atomic");
    let old = vec![b'a'; 4 * 1024 * 1024];
    let new = vec![b'b'; 7 * 1024 * 1024];
    let encoded = STANDARD.encode(&new);
    let target = root.join("data.bin");
    // How long a whole write takes here, so the kills can land before, during and after it.
    let full = {
        std::fs::write(&target, &old).unwrap();
        let platform = Platform::bind().await;
        let _shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        let started = std::time::Instant::now();
        let ack = conn
            .call(
                "FILE_WRITE",
                "timed",
                json!({"path": "data.bin", "content": encoded, "encoding": "base64"}),
            )
            .await;
        assert_eq!(ack["type"], "ACK", "{ack}");
        assert_eq!(std::fs::read(&target).unwrap(), new);
        started.elapsed()
    };
    let (mut saw_old, mut saw_new, mut mid_write) = (0, 0, 0);
    // `None`: kill the moment the temporary file appears, i.e. while the bytes are being
    // written; `Some(f)`: kill at that fraction of a whole write's duration.
    let kills = [
        None,
        None,
        None,
        Some(0.3),
        Some(0.6),
        Some(0.9),
        Some(1.0),
        Some(1.5),
    ];
    for kill in kills {
        std::fs::write(&target, &old).unwrap();
        let platform = Platform::bind().await;
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        conn.request(
            "FILE_WRITE",
            "big",
            json!({"path": "data.bin", "content": encoded, "encoding": "base64"}),
        )
        .await;
        match kill {
            Some(fraction) => tokio::time::sleep(full.mul_f64(fraction)).await,
            None => {
                let deadline = std::time::Instant::now() + full * 4;
                while !temporary_exists(&root) && std::time::Instant::now() < deadline {
                    std::thread::yield_now();
                }
                mid_write += usize::from(temporary_exists(&root));
            }
        }
        shim.signal("KILL");
        let (status, _) = shim.exit().await;
        assert_eq!(status.code(), None, "killed by a signal");
        let content = std::fs::read(&target).unwrap();
        if content == old {
            saw_old += 1;
        } else if content == new {
            saw_new += 1;
        } else {
            panic!("a torn write ({kill:?}): {} bytes", content.len());
        }
        for entry in std::fs::read_dir(&root).unwrap() {
            let name = entry.unwrap().file_name();
            if name.to_string_lossy().ends_with(".tmp") {
                // SIGKILL leaves no chance to clean up; the next write never reuses the name.
                std::fs::remove_file(root.join(name)).unwrap();
            }
        }
    }
    assert!(
        mid_write > 0,
        "no kill landed while the temporary file existed"
    );
    eprintln!("after SIGKILL: {saw_old} old, {saw_new} new, {mid_write} mid-write");
    // Both outcomes are legal; the point is that nothing in between ever shows.
    assert_eq!(saw_old + saw_new, kills.len());
}

fn temporary_exists(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        name.starts_with('.') && name.ends_with(".tmp")
    })
}

/// FILE_MOVE's destination is jail-checked like its source: a `dst` that is a link leading out
/// of the root (to a directory, to a file, dangling) is refused with or without `overwrite`,
/// and nothing changes on disk; a link that stays inside is replaced as a link.
#[tokio::test]
async fn a_move_onto_a_link_out_of_the_root_is_refused_and_changes_nothing() {
    let (home, root) = home_and_root("shim-move-dst");
    let outside = home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("src.txt"), "source").unwrap();
    std::fs::write(root.join("target.txt"), "target").unwrap();
    symlink(&outside, root.join("to_dir")).unwrap();
    symlink(outside.join("secret.txt"), root.join("to_file")).unwrap();
    symlink(outside.join("planted.txt"), root.join("dangling")).unwrap();
    symlink("target.txt", root.join("alias")).unwrap();

    let platform = Platform::bind().await;
    let shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    for dst in ["to_dir", "to_file", "dangling"] {
        for overwrite in [false, true] {
            let reply = conn
                .call(
                    "FILE_MOVE",
                    &format!("m-{dst}-{overwrite}"),
                    json!({"src": "src.txt", "dst": dst, "overwrite": overwrite}),
                )
                .await;
            assert_eq!(
                error_code(&reply),
                "PATH_OUTSIDE_ALLOWED_ROOT",
                "{dst} {overwrite}"
            );
        }
        assert!(
            std::fs::symlink_metadata(root.join(dst))
                .unwrap()
                .is_symlink()
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.join("src.txt")).unwrap(),
        "source"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        SECRET
    );

    // Inside the root, the link itself is replaced and its target keeps its content.
    let moved = conn
        .call(
            "FILE_MOVE",
            "m-alias",
            json!({"src": "src.txt", "dst": "alias", "overwrite": true}),
        )
        .await;
    assert_eq!(moved["type"], "ACK", "{moved}");
    assert!(
        !std::fs::symlink_metadata(root.join("alias"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("alias")).unwrap(),
        "source"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("target.txt")).unwrap(),
        "target"
    );
    drop(shim);
    std::fs::remove_dir_all(&home).unwrap();
}
