//! The audit key file: 64 hex characters, owner-only, created with fresh random bytes.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read, Write},
    path::Path,
};

use super::{KEY_LEN, create_private_dir, private_mode};

/// Loads the 32-byte audit key from a 0600 file of 64 hex characters, creating it (and its
/// parents) with fresh random bytes when missing and replacing it when it holds no valid key.
///
/// # Errors
/// The file cannot be read or written, or (on Unix) it is readable or writable by group or
/// others: a key others can read lets them forge a verifying chain.
pub fn load_or_create_key_file(path: &Path) -> io::Result<[u8; KEY_LEN]> {
    match File::open(path) {
        Ok(file) => {
            check_key_mode(path, &file)?;
            let mut raw = Vec::new();
            file.take(4096).read_to_end(&mut raw)?;
            if let Some(key) = std::str::from_utf8(&raw)
                .ok()
                .and_then(|s| decode_hex_key(s.trim()))
            {
                return Ok(key);
            }
            // The reference regenerates a key that is not hex; the old chain stops verifying,
            // which `audit verify` then reports, rather than the daemon refusing to start.
            let key = random_key();
            replace_key_file(path, &key)?;
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                create_private_dir(parent)?;
            }
            let key = random_key();
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            private_mode(&mut options);
            match options.open(path) {
                Ok(mut file) => {
                    file.write_all(encode_hex(&key).as_bytes())?;
                    file.sync_all()?;
                    Ok(key)
                }
                // Another process created it between our open and create: use theirs.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let file = File::open(path)?;
                    check_key_mode(path, &file)?;
                    let mut raw = String::new();
                    file.take(4096).read_to_string(&mut raw)?;
                    decode_hex_key(raw.trim()).ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            "audit key file is being created concurrently",
                        )
                    })
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Loads the audit key for reading a chain back. Unlike [`load_or_create_key_file`] it never
/// creates or replaces the file: a fresh key would make every record fail to verify, and
/// replacing an unreadable one would destroy the only way to check the old chain.
///
/// # Errors
/// `NotFound` when there is no key file, `InvalidData` when it holds no key, `PermissionDenied`
/// when (on Unix) group or others may read or write it, or the read error.
pub fn load_key_file(path: &Path) -> io::Result<[u8; KEY_LEN]> {
    let file = File::open(path)?;
    check_key_mode(path, &file)?;
    let mut raw = Vec::new();
    file.take(4096).read_to_end(&mut raw)?;
    std::str::from_utf8(&raw)
        .ok()
        .and_then(|text| decode_hex_key(text.trim()))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} holds no audit key (64 hex characters)", path.display()),
            )
        })
}

#[cfg(unix)]
fn check_key_mode(path: &Path, file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file.metadata()?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "audit key file {} has mode {mode:o}; it must be readable by its owner only (chmod 600)",
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_mode(_path: &Path, _file: &File) -> io::Result<()> {
    Ok(())
}

fn random_key() -> [u8; KEY_LEN] {
    let mut key = [0_u8; KEY_LEN];
    rand::fill(&mut key);
    key
}

/// Writes a new key next to the old file and renames it over, so a crash never leaves half a key.
fn replace_key_file(path: &Path, key: &[u8; KEY_LEN]) -> io::Result<()> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    private_mode(&mut options);
    let written = options.open(&temp).and_then(|mut file| {
        file.write_all(encode_hex(key).as_bytes())?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&temp, path));
    if renamed.is_err() {
        let _ = fs::remove_file(&temp);
    }
    renamed
}

pub(super) fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn decode_hex_key(text: &str) -> Option<[u8; KEY_LEN]> {
    let bytes = text.as_bytes();
    if bytes.len() != KEY_LEN * 2 {
        return None;
    }
    let mut key = [0_u8; KEY_LEN];
    for (slot, pair) in key.iter_mut().zip(bytes.chunks_exact(2)) {
        *slot = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
    }
    Some(key)
}

const fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}
