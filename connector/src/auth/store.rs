//! Where the OAuth tokens and the audit key live: the OS keyring when one is reachable (the
//! reference's service `autogpt-local-executor`, usernames `access_token`, `refresh_token` and
//! `audit_key`), else private files in the state directory.
//!
//! # Tokens
//!
//! Saved to the keyring when it answers (and then removed from the file, so a stale copy can
//! never be dialled with), else to `oauth-tokens.json` in the state directory, written
//! atomically with mode 0600 and read only when it is still 0600. Loading tries the keyring,
//! then the file. Forgetting clears both.
//!
//! # The audit key
//!
//! An existing `audit.key` file keeps being used, so a chain it signed stays verifiable. Without
//! one, the key comes from the keyring (created there, 32 random bytes as hex, when missing or
//! not hex, as the reference does); without a keyring, the file is created as before.
//!
//! On Linux the keyring is looked for only on the session bus named by
//! `DBUS_SESSION_BUS_ADDRESS` in the connector's own environment, so a headless service without
//! a bus goes straight to the files. On macOS and Windows the user's Keychain or Credential
//! Manager is always tried first.

use std::io;
use std::path::{Path, PathBuf};

use local_core::machine::audit_chain::{self, KEY_LEN};
use local_core::machine::own_files::{self, PRIVATE_FILE_MODE, PrivateFileError};
use rand::TryRng;
use rand::rngs::SysRng;
use serde::{Deserialize, Serialize};

use super::keyring::{self, Keyring, KeyringError};
use super::{Secret, Tokens};
use crate::config::{self, Env};

/// The keyring username of the access token.
pub const ACCESS_USER: &str = "access_token";
/// The keyring username of the refresh token.
pub const REFRESH_USER: &str = "refresh_token";
/// The keyring username of the audit key.
pub const AUDIT_KEY_USER: &str = "audit_key";
/// The token file's name in the state directory.
pub const TOKEN_FILE_NAME: &str = "oauth-tokens.json";
/// The largest token file read.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;
/// The variable naming the session bus, where the keyring is looked for.
pub const BUS_ENV: &str = "DBUS_SESSION_BUS_ADDRESS";

/// Why the stored tokens could not be read, written or removed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Neither a keyring nor a state directory is available.
    #[error("no keyring is reachable and there is no state directory (set HOME or XDG_STATE_HOME)")]
    Nowhere,
    /// The keyring failed.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    /// The token file is unusable (too open, not a file, unreadable).
    #[error(transparent)]
    File(#[from] PrivateFileError),
    /// The token file holds no tokens.
    #[error("{} holds no OAuth tokens; run `autogpt-shim auth` again", .0.display())]
    Malformed(PathBuf),
    /// Writing or removing the token file failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// Where tokens were stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The OS keyring.
    Keyring,
    /// A 0600 file.
    File(PathBuf),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keyring => f.write_str("the OS keyring"),
            Self::File(path) => write!(f, "{} (mode 0600)", path.display()),
        }
    }
}

/// The on-disk form of the token file.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

/// Where to look for the keyring and the files, read from the environment once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    /// The session bus address, when there is one (Linux finds the keyring there).
    pub bus_address: Option<String>,
    /// The token file, when there is a state directory.
    pub token_file: Option<PathBuf>,
}

impl Places {
    /// The places of `env`.
    pub fn from_env(env: &impl Env) -> Self {
        Self {
            bus_address: env
                .var(BUS_ENV)
                .filter(|address| !address.trim().is_empty()),
            token_file: config::state_dir(env).map(|dir| dir.join(TOKEN_FILE_NAME)),
        }
    }
}

/// The token store: the keyring if it answered, and the file fallback.
#[derive(Debug)]
pub struct TokenStore {
    keyring: Option<Keyring>,
    file: Option<PathBuf>,
}

impl TokenStore {
    /// Opens the store, connecting to the keyring when the session bus has one.
    pub async fn open(places: &Places) -> Self {
        let keyring = connect(places.bus_address.as_deref()).await;
        Self {
            keyring,
            file: places.token_file.clone(),
        }
    }

    /// Whether the keyring answered.
    pub const fn has_keyring(&self) -> bool {
        self.keyring.is_some()
    }

    /// The stored tokens: the keyring's, else the file's, else none.
    ///
    /// # Errors
    /// See [`StoreError`].
    pub async fn load(&self) -> Result<Option<Tokens>, StoreError> {
        if let Some(keyring) = &self.keyring
            && let Some(access) = keyring
                .get(ACCESS_USER)
                .await?
                .as_deref()
                .and_then(Secret::new)
        {
            let refresh = keyring.get(REFRESH_USER).await?;
            return Ok(Some(Tokens {
                access,
                refresh: refresh.as_deref().and_then(Secret::new),
            }));
        }
        let Some(path) = &self.file else {
            return Ok(None);
        };
        if missing(path) {
            return Ok(None);
        }
        let bytes = own_files::read_private(path, MAX_TOKEN_FILE_BYTES)?;
        let file: TokenFile =
            serde_json::from_slice(&bytes).map_err(|_| StoreError::Malformed(path.clone()))?;
        let access =
            Secret::new(&file.access_token).ok_or_else(|| StoreError::Malformed(path.clone()))?;
        Ok(Some(Tokens {
            access,
            refresh: file.refresh_token.as_deref().and_then(Secret::new),
        }))
    }

    /// Stores `tokens`: in the keyring when it takes them, else in the file.
    ///
    /// # Errors
    /// See [`StoreError`].
    pub async fn save(&self, tokens: &Tokens) -> Result<Location, StoreError> {
        if let Some(keyring) = &self.keyring {
            match save_to_keyring(keyring, tokens).await {
                Ok(()) => {
                    if let Some(path) = &self.file {
                        remove(path)?;
                    }
                    return Ok(Location::Keyring);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the keyring refused the tokens; using the token file");
                }
            }
        }
        let path = self.file.as_ref().ok_or(StoreError::Nowhere)?;
        let file = TokenFile {
            access_token: tokens.access.expose().to_owned(),
            refresh_token: tokens.refresh.as_ref().map(|r| r.expose().to_owned()),
        };
        let bytes = serde_json::to_vec(&file).map_err(|err| StoreError::Write {
            path: path.clone(),
            source: io::Error::other(err),
        })?;
        own_files::write_atomic(path, &bytes, PRIVATE_FILE_MODE).map_err(|source| {
            StoreError::Write {
                path: path.clone(),
                source,
            }
        })?;
        Ok(Location::File(path.clone()))
    }

    /// Removes the tokens from the keyring and the file.
    ///
    /// # Errors
    /// See [`StoreError`].
    pub async fn forget(&self) -> Result<(), StoreError> {
        if let Some(keyring) = &self.keyring {
            keyring.delete(ACCESS_USER).await?;
            keyring.delete(REFRESH_USER).await?;
        }
        if let Some(path) = &self.file {
            remove(path)?;
        }
        Ok(())
    }
}

async fn save_to_keyring(keyring: &Keyring, tokens: &Tokens) -> Result<(), KeyringError> {
    keyring.set(ACCESS_USER, tokens.access.expose()).await?;
    match &tokens.refresh {
        Some(refresh) => keyring.set(REFRESH_USER, refresh.expose()).await,
        None => keyring.delete(REFRESH_USER).await.map(|_| ()),
    }
}

fn missing(path: &Path) -> bool {
    own_files::file_len(path).is_err_and(|err| err.kind() == io::ErrorKind::NotFound)
}

fn remove(path: &Path) -> Result<(), StoreError> {
    own_files::remove(path)
        .map(|_| ())
        .map_err(|source| StoreError::Write {
            path: path.to_path_buf(),
            source,
        })
}

async fn connect(bus_address: Option<&str>) -> Option<Keyring> {
    let address = keyring_address(bus_address)?;
    match Keyring::connect(address).await {
        Ok(keyring) => Some(keyring),
        Err(err) => {
            tracing::debug!(error = %err, "no keyring; using files in the state directory");
            None
        }
    }
}

/// What [`Keyring::connect`] is given, or `None` when no keyring is to be tried: only the
/// Secret Service (Linux) lives on a bus; the Keychain and Credential Manager need none.
fn keyring_address(bus_address: Option<&str>) -> Option<&str> {
    if cfg!(target_os = "linux") {
        bus_address.filter(|address| !keyring::bus_socket_missing(address, missing))
    } else {
        Some(bus_address.unwrap_or_default())
    }
}

/// Where the audit key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The `audit.key` file.
    File,
    /// The OS keyring.
    Keyring,
}

/// The audit key for the daemon: an existing key file, else the keyring (creating the key
/// there when missing), else a new key file.
///
/// # Errors
/// The key file cannot be read or created, or it is open to group or others.
pub fn load_or_create_audit_key(
    key_file: &Path,
    places: &Places,
) -> io::Result<([u8; KEY_LEN], KeySource)> {
    if missing(key_file)
        && let Some(key) = keyring_audit_key(places, true)
    {
        return Ok((key, KeySource::Keyring));
    }
    audit_chain::load_or_create_key_file(key_file).map(|key| (key, KeySource::File))
}

/// The audit key for reading a chain back: the key file when it exists, else the keyring's.
/// Nothing is created.
///
/// # Errors
/// `NotFound` when neither holds a key, or the key file's error.
pub fn load_audit_key(key_file: &Path, places: &Places) -> io::Result<[u8; KEY_LEN]> {
    match audit_chain::load_key_file(key_file) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            keyring_audit_key(places, false).ok_or(err)
        }
        other => other,
    }
}

/// The keyring's audit key; with `create`, a new one is stored when it has none (or no hex).
fn keyring_audit_key(places: &Places, create: bool) -> Option<[u8; KEY_LEN]> {
    let address = keyring_address(places.bus_address.as_deref())?.to_owned();
    keyring::block_on(async move {
        let keyring = connect(Some(&address)).await?;
        let stored = match keyring.get(AUDIT_KEY_USER).await {
            Ok(stored) => stored,
            Err(err) => {
                tracing::warn!(error = %err, "could not read the audit key from the keyring");
                return None;
            }
        };
        if let Some(key) = stored.as_deref().and_then(decode_hex_key) {
            return Some(key);
        }
        if !create {
            return None;
        }
        let mut key = [0u8; KEY_LEN];
        SysRng.try_fill_bytes(&mut key).ok()?;
        match keyring.set(AUDIT_KEY_USER, &encode_hex(&key)).await {
            Ok(()) => Some(key),
            Err(err) => {
                tracing::warn!(error = %err, "could not store the audit key in the keyring");
                None
            }
        }
    })
}

fn encode_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn decode_hex_key(text: &str) -> Option<[u8; KEY_LEN]> {
    let text = text.trim();
    if text.len() != KEY_LEN * 2 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; KEY_LEN];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
// The tests inspect their own temporary files directly.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    // For the Linux-only tests below.
    #[cfg(target_os = "linux")]
    fn places(tag: &str) -> (Places, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "auth-store-{tag}-{}",
            local_core::secret::new_id().simple()
        ));
        (
            Places {
                bus_address: None,
                token_file: Some(dir.join("state").join(TOKEN_FILE_NAME)),
            },
            dir,
        )
    }

    // For the Linux-only tests below.
    #[cfg(target_os = "linux")]
    fn tokens(access: &str, refresh: Option<&str>) -> Tokens {
        Tokens {
            access: Secret::new(access).unwrap(),
            refresh: refresh.and_then(Secret::new),
        }
    }

    // Only Linux finds its keyring on a bus: elsewhere the user's real keyring would answer.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn without_a_keyring_tokens_live_in_a_private_file() {
        let (places, dir) = places("file");
        let store = TokenStore::open(&places).await;
        assert!(!store.has_keyring());
        assert_eq!(store.load().await.unwrap(), None);
        let saved = tokens("acc-1", Some("ref-1"));
        let location = store.save(&saved).await.unwrap();
        let path = places.token_file.clone().unwrap();
        assert_eq!(location, Location::File(path.clone()));
        assert_eq!(store.load().await.unwrap(), Some(saved));
        // Windows files have no mode bits to check or loosen.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            // A file others can read is refused rather than used.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = store.load().await.unwrap_err();
            assert!(
                matches!(err, StoreError::File(PrivateFileError::TooOpen { .. })),
                "{err}"
            );
            assert!(!err.to_string().contains("acc-1"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        // No refresh token is a valid state.
        store.save(&tokens("acc-2", None)).await.unwrap();
        assert_eq!(store.load().await.unwrap(), Some(tokens("acc-2", None)));
        store.forget().await.unwrap();
        assert!(!path.exists());
        assert_eq!(store.load().await.unwrap(), None);

        std::fs::write(&path, "{}").unwrap();
        #[cfg(unix)]
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        assert!(matches!(store.load().await, Err(StoreError::Malformed(_))));
        std::fs::remove_dir_all(dir).unwrap();
    }

    // Only Linux finds its keyring on a bus: elsewhere the user's real keyring would answer.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_unreachable_bus_means_files() {
        let (mut places, dir) = places("nobus");
        places.bus_address = Some(format!("unix:path={}", dir.join("no-bus").display()));
        let store = TokenStore::open(&places).await;
        assert!(!store.has_keyring());
        assert!(matches!(
            store.save(&tokens("a", None)).await.unwrap(),
            Location::File(_)
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_bus_socket_that_is_not_there_is_not_tried() {
        let (_, dir) = places("missing");
        let socket = dir.join("bus");
        // The path as zbus reads it, which is the path it would connect to.
        let address = |path: &Path| format!("unix:path={}", path.display());
        // Neither the folder nor the socket exists yet.
        assert_eq!(keyring_address(Some(&address(&socket))), None);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // There: tried.
        let there = address(&socket);
        assert_eq!(keyring_address(Some(&there)), Some(there.as_str()));
        // Transports without a file to look at are always tried.
        for other in [
            "unix:abstract=/tmp/dbus-x",
            "tcp:host=127.0.0.1,port=1",
            "nonsense",
        ] {
            assert_eq!(keyring_address(Some(other)), Some(other));
        }
        assert_eq!(keyring_address(None), None);
        drop(listener);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_bus_that_never_answers_costs_a_first_start_one_second_not_ten() {
        let (mut places, dir) = places("silent");
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("silent-bus");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // Accepts every connection and never writes a byte: a hung bus daemon.
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                held.push(stream);
            }
        });
        places.bus_address = Some(format!("unix:path={}", socket.display()));
        let started = std::time::Instant::now();
        let (_, source) = load_or_create_audit_key(&dir.join("audit.key"), &places).unwrap();
        let waited = started.elapsed();
        assert_eq!(source, KeySource::File);
        // The bus's own deadline plus slack for a loaded machine; the call deadline is 10 s.
        assert!(
            waited >= keyring::BUS_CONNECT_TIMEOUT && waited < keyring::CALL_TIMEOUT / 2,
            "waited {waited:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    // Only Linux finds its keyring on a bus: elsewhere the user's real keyring would answer.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_existing_audit_key_file_keeps_being_used() {
        let (places, dir) = places("audit");
        let key_file = dir.join("audit.key");
        let (key, source) = load_or_create_audit_key(&key_file, &places).unwrap();
        assert_eq!(source, KeySource::File);
        assert_eq!(load_audit_key(&key_file, &places).unwrap(), key);
        let (again, _) = load_or_create_audit_key(&key_file, &places).unwrap();
        assert_eq!(again, key);
        std::fs::remove_file(&key_file).unwrap();
        assert_eq!(
            load_audit_key(&key_file, &places).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn hex_keys_round_trip_and_junk_is_refused() {
        let key = [0xa5u8; KEY_LEN];
        assert_eq!(decode_hex_key(&encode_hex(&key)), Some(key));
        assert_eq!(decode_hex_key("zz"), None);
        assert_eq!(decode_hex_key(&"é".repeat(32)), None);
    }
}
