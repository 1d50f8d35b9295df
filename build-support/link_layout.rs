//! The build script of `autogpt-shim` and `msguide-api`: lays out each release binary on
//! x86_64 Linux so that little of it stays resident. The functions a start, an idle process and
//! the usual requests run are packed at the front of the code, in the order of the package's
//! `link-order.txt` (made by `scripts/link-order`), the read-only data a start and an idle
//! process read likewise at the front of `.rodata` where the package has a `data-order.ld`
//! (the shim), and relative relocations are packed (RELR), so the loader reads kilobytes of
//! them instead of hundreds of kilobytes. An idle shim keeps under 5 MiB resident instead of 12
//! (docs/connector.md, "Resident at rest"; the API: docs/security.md).

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=link-order.txt");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo::rerun-if-env-changed=LINK_LAYOUT_MAP");
    let var = |name: &str| env::var(name).unwrap_or_default();
    // Both options are the linker's (rustc's own lld, this target's default since Rust 1.90);
    // a build that names another linker gets the default layout rather than a failed link.
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("link-self-contained");
    if var("TARGET") != "x86_64-unknown-linux-gnu" || var("PROFILE") != "release" || !own_linker {
        return;
    }
    // Each package has one binary, named as the package.
    let binary = var("CARGO_PKG_NAME");
    let order = format!("{}/link-order.txt", var("CARGO_MANIFEST_DIR"));
    // Names the profile saw that this build does not have (another feature set, a newer
    // dependency) are skipped; the order then covers less, which the benches' RSS shows.
    if std::path::Path::new(&order).is_file() {
        for arg in [
            format!("-Wl,--symbol-ordering-file={order}"),
            "-Wl,--no-warn-symbol-ordering".to_owned(),
        ] {
            println!("cargo::rustc-link-arg-bin={binary}={arg}");
        }
    }
    // The constants a start reads, by input section: most are anonymous (`.rodata..Lanon.*`),
    // with no symbol for the order above to name, so a script moves them to the front of the
    // read-only data (`INSERT` keeps the rest of the default layout).
    // Watched only where it exists: cargo reruns a script that watches a missing file, and
    // relinks, at every build.
    let data_order = format!("{}/data-order.ld", var("CARGO_MANIFEST_DIR"));
    if std::path::Path::new(&data_order).is_file() {
        println!("cargo::rerun-if-changed=data-order.ld");
        println!("cargo::rustc-link-arg-bin={binary}=-Wl,-T,{data_order}");
    }
    // scripts/link-order asks for the link map (in this folder, one a binary), to find which
    // input section each address the profile read belongs to. Link arguments do not change the
    // code, so the names stay.
    let maps = var("LINK_LAYOUT_MAP");
    if !maps.is_empty() {
        println!("cargo::rustc-link-arg-bin={binary}=-Wl,-Map={maps}/{binary}.map");
    }
    // The loader of glibc before 2.36 cannot read packed relocations, and the linker marks the
    // binary as needing it; only where the binary is built for the glibc it is built on.
    if var("HOST") == var("TARGET") && glibc_at_least(2, 36) {
        println!("cargo::rustc-link-arg-bin={binary}=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the C library this build script runs on is glibc of at least `major.minor`, as
/// glibc's `getconf GNU_LIBC_VERSION` says ("glibc 2.36"); anything else is no.
// A build script runs before the crate it builds, so core's exec is not there to use.
#[allow(clippy::disallowed_methods)]
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(output) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(found_major), Some(found_minor)) => (found_major, found_minor) >= (major, minor),
        _ => false,
    }
}
