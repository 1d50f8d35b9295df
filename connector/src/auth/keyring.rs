//! The OS keyring, as the reference's `keyring` library uses it: one secret per (service,
//! username) pair, under the service [`KEYRING_SERVICE`].
//!
//! - Linux: the freedesktop Secret Service (GNOME Keyring, KWallet) on the session bus named by
//!   `DBUS_SESSION_BUS_ADDRESS`, through the `secret-service` crate (the client keyring 4's zbus
//!   store is built on; that store always dials the process's own bus and unlocks by prompting,
//!   so it is not used). Items carry the attributes the Python library searches by (`service`,
//!   `username`), so secrets the reference stored are found and ours are found by it. A locked
//!   item or collection is reported as [`KeyringError::Locked`] before anything could prompt.
//! - macOS: generic passwords (service, account) in the login Keychain, through keyring 4's
//!   apple-native store.
//! - Windows: generic credentials in the Credential Manager, through keyring 4's windows-native
//!   store, named as Python's `WinVaultKeyring` names them (see `native`).
//!
//! Elsewhere [`Keyring::connect`] answers [`KeyringError::Unsupported`] and callers use their
//! file fallback.

use std::future::Future;
use std::time::Duration;

#[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
use super::KEYRING_SERVICE;

/// How long one keyring call (including starting the service on demand) may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the session bus itself may take to accept us (its authentication and `Hello`).
/// A bus daemon answers that in milliseconds, so a bus that accepts and then says nothing is
/// given up on well before [`CALL_TIMEOUT`]: a first start (which looks for the audit key
/// there) waits a second, not ten, before using its key file.
#[cfg(target_os = "linux")]
pub const BUS_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether `address` is a session bus at a socket file that is not there (a logged-out
/// session's, say), asked with `missing`: then no connection can succeed, and the keyring is
/// not tried at all instead of failing after a thread, a runtime and a connect attempt, which
/// cost a first start about a millisecond. Any other address (abstract sockets, TCP, lists)
/// is left to try.
#[cfg(target_os = "linux")]
pub fn bus_socket_missing(address: &str, missing: impl Fn(&std::path::Path) -> bool) -> bool {
    use zbus::address::transport::{Transport, UnixSocket};
    address
        .parse::<zbus::Address>()
        .is_ok_and(|address| match address.transport() {
            Transport::Unix(unix) => matches!(unix.path(), UnixSocket::File(path) if missing(path)),
            _ => false,
        })
}

/// Only the Secret Service lives on a bus.
#[cfg(not(target_os = "linux"))]
pub fn bus_socket_missing(_address: &str, _missing: impl Fn(&std::path::Path) -> bool) -> bool {
    false
}

/// Why the keyring could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    /// No keyring client exists for this OS in this build.
    #[error("this build has no keyring client for this operating system")]
    Unsupported,
    /// No session bus, or no Secret Service on it.
    #[error("no keyring is reachable: {0}")]
    Unavailable(String),
    /// The collection or item is locked and unlocking it needs a prompt.
    #[error("the keyring is locked; unlock it (log in to the desktop) and try again")]
    Locked,
    /// The keyring answered something unexpected.
    #[error("the keyring failed: {0}")]
    Failed(String),
}

/// A connected keyring.
pub struct Keyring {
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
    store: store::Store,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").finish_non_exhaustive()
    }
}

impl Keyring {
    /// Connects to the keyring: on Linux the Secret Service on the session bus at
    /// `bus_address`; on macOS and Windows the user's store (`bus_address` is not used).
    ///
    /// # Errors
    /// [`KeyringError::Unavailable`] when nothing answers; [`KeyringError::Unsupported`] on
    /// other systems.
    pub async fn connect(bus_address: &str) -> Result<Self, KeyringError> {
        #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
        {
            let store = tokio::time::timeout(CALL_TIMEOUT, store::Store::connect(bus_address))
                .await
                .map_err(|_| KeyringError::Unavailable("the keyring did not answer".into()))??;
            Ok(Self { store })
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
        {
            let _ = bus_address;
            Err(KeyringError::Unsupported)
        }
    }

    /// The secret stored for `user`, if any.
    ///
    /// # Errors
    /// See [`KeyringError`].
    pub async fn get(&self, user: &str) -> Result<Option<String>, KeyringError> {
        #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
        {
            timed(self.store.get(user)).await
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
        {
            let _ = user;
            Err(KeyringError::Unsupported)
        }
    }

    /// Stores `secret` for `user`, replacing what was there.
    ///
    /// # Errors
    /// See [`KeyringError`].
    pub async fn set(&self, user: &str, secret: &str) -> Result<(), KeyringError> {
        #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
        {
            timed(self.store.set(user, secret)).await
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
        {
            let _ = (user, secret);
            Err(KeyringError::Unsupported)
        }
    }

    /// Deletes what is stored for `user`; `false` when there was nothing.
    ///
    /// # Errors
    /// See [`KeyringError`].
    pub async fn delete(&self, user: &str) -> Result<bool, KeyringError> {
        #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
        {
            timed(self.store.delete(user)).await
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
        {
            let _ = user;
            Err(KeyringError::Unsupported)
        }
    }
}

/// `call` within [`CALL_TIMEOUT`]: a keyring that stops answering fails the call instead of
/// hanging the connector.
#[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
async fn timed<T>(call: impl Future<Output = Result<T, KeyringError>>) -> Result<T, KeyringError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| KeyringError::Failed("the keyring did not answer in time".into()))?
}

/// Runs `future` to completion on a private single-threaded runtime in its own thread, so
/// synchronous callers (the daemon's preflight, the `audit` subcommands) can use the keyring
/// whether or not a runtime is already running on their thread.
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => Ok(runtime.block_on(future)),
                    Err(err) => Err(err),
                }
            })
            .join()
    })
    .map_or_else(
        |panic| std::panic::resume_unwind(panic),
        |result| match result {
            Ok(output) => output,
            Err(err) => std::panic::panic_any(format!("cannot start a runtime: {err}")),
        },
    )
}

#[cfg(target_os = "linux")]
mod store {
    //! The Secret Service, through the `secret-service` crate on the connector's runtime.

    use std::collections::HashMap;

    use secret_service::{EncryptionType, Error, Item, SecretService};

    use super::{BUS_CONNECT_TIMEOUT, KEYRING_SERVICE, KeyringError};

    /// What the Python library writes as `application`; we name ourselves.
    const APPLICATION: &str = "autogpt-shim";

    pub(super) struct Store {
        service: SecretService<'static>,
    }

    impl Store {
        pub(super) async fn connect(address: &str) -> Result<Self, KeyringError> {
            let unavailable = |err: zbus::Error| KeyringError::Unavailable(err.to_string());
            let build = zbus::connection::Builder::address(address)
                .map_err(unavailable)?
                .build();
            let connection = tokio::time::timeout(BUS_CONNECT_TIMEOUT, build)
                .await
                .map_err(|_| KeyringError::Unavailable("the session bus did not answer".into()))?
                .map_err(unavailable)?;
            // The Diffie-Hellman session keeps the secret encrypted on the bus, as keyring 4's
            // store does.
            let service = SecretService::connect_with_existing(EncryptionType::Dh, connection)
                .await
                .map_err(|err| KeyringError::Unavailable(err.to_string()))?;
            Ok(Self { service })
        }

        pub(super) async fn get(&self, user: &str) -> Result<Option<String>, KeyringError> {
            let Some(item) = self.find(user).await? else {
                return Ok(None);
            };
            let secret = item.get_secret().await.map_err(failed)?;
            String::from_utf8(secret)
                .map(Some)
                .map_err(|_| KeyringError::Failed("the stored secret is not UTF-8".into()))
        }

        pub(super) async fn set(&self, user: &str, secret: &str) -> Result<(), KeyringError> {
            // An existing item (ours or the reference's) is updated in place, as keyring 4 does.
            if let Some(item) = self.find(user).await? {
                return item
                    .set_secret(secret.as_bytes(), "text/plain")
                    .await
                    .map_err(failed);
            }
            let collection = self
                .service
                .get_default_collection()
                .await
                .map_err(|err| match err {
                    // Creating a collection always prompts for its password.
                    Error::NoResult => KeyringError::Failed(
                        "the keyring has no default collection; create one in the desktop's keyring manager"
                            .into(),
                    ),
                    other => failed(other),
                })?;
            // Creating an item in a locked collection would prompt to unlock it.
            if collection.is_locked().await.map_err(failed)? {
                return Err(KeyringError::Locked);
            }
            let mut attributes = search_attributes(user);
            attributes.insert("application", APPLICATION);
            let label = format!("Password for '{user}' on '{KEYRING_SERVICE}'");
            collection
                .create_item(&label, attributes, secret.as_bytes(), true, "text/plain")
                .await
                .map_err(failed)?;
            Ok(())
        }

        pub(super) async fn delete(&self, user: &str) -> Result<bool, KeyringError> {
            let mut deleted = false;
            while let Some(item) = self.find(user).await? {
                item.delete().await.map_err(failed)?;
                deleted = true;
            }
            Ok(deleted)
        }

        /// The first unlocked item for `user`; [`KeyringError::Locked`] when only locked ones
        /// match, since reading them would need a prompt.
        async fn find(&self, user: &str) -> Result<Option<Item<'_>>, KeyringError> {
            let found = self
                .service
                .search_items(search_attributes(user))
                .await
                .map_err(failed)?;
            if let Some(item) = found.unlocked.into_iter().next() {
                return Ok(Some(item));
            }
            if found.locked.is_empty() {
                Ok(None)
            } else {
                Err(KeyringError::Locked)
            }
        }
    }

    /// The attributes the Python library (and keyring 4) search by.
    fn search_attributes(user: &str) -> HashMap<&str, &str> {
        HashMap::from([("service", KEYRING_SERVICE), ("username", user)])
    }

    fn failed(err: Error) -> KeyringError {
        match err {
            Error::Locked | Error::Prompt | Error::PromptDisconnected => KeyringError::Locked,
            other => KeyringError::Failed(other.to_string()),
        }
    }
}

#[cfg(any(target_os = "macos", target_os = "windows"))]
mod store {
    //! The native store through keyring-core's entry API. Its calls block, so each runs on the
    //! runtime's blocking pool.

    use std::sync::Arc;

    use keyring_core::api::CredentialStoreApi;
    use keyring_core::{Entry, Error};

    #[cfg(target_os = "macos")]
    use apple_native_keyring_store::keychain::Store as NativeStore;
    #[cfg(target_os = "windows")]
    use windows_native_keyring_store::Store as NativeStore;

    use super::{KEYRING_SERVICE, KeyringError};

    pub(super) struct Store {
        native: Arc<NativeStore>,
    }

    impl Store {
        pub(super) async fn connect(_bus_address: &str) -> Result<Self, KeyringError> {
            let native =
                NativeStore::new().map_err(|err| KeyringError::Unavailable(err.to_string()))?;
            Ok(Self { native })
        }

        pub(super) async fn get(&self, user: &str) -> Result<Option<String>, KeyringError> {
            self.blocking(user, |native, user| match existing(native, user)? {
                Some(entry) => entry.get_password().map(Some),
                None => Ok(None),
            })
            .await
        }

        pub(super) async fn set(&self, user: &str, secret: &str) -> Result<(), KeyringError> {
            let secret = secret.to_owned();
            self.blocking(user, move |native, user| {
                if let Some(entry) = existing(native, user)? {
                    return entry.set_password(&secret);
                }
                let entry = candidates(native, user)?
                    .into_iter()
                    .next()
                    .ok_or(Error::NoEntry)?;
                entry.set_password(&secret)?;
                // A credential named by an explicit target is created without a user name;
                // the reference shows and checks it.
                #[cfg(target_os = "windows")]
                entry.update_attributes(&std::collections::HashMap::from([("username", user)]))?;
                Ok(())
            })
            .await
        }

        pub(super) async fn delete(&self, user: &str) -> Result<bool, KeyringError> {
            self.blocking(user, |native, user| {
                let mut deleted = false;
                while let Some(entry) = existing(native, user)? {
                    entry.delete_credential()?;
                    deleted = true;
                }
                Ok(deleted)
            })
            .await
        }

        async fn blocking<T: Send + 'static>(
            &self,
            user: &str,
            call: impl FnOnce(&NativeStore, &str) -> Result<T, Error> + Send + 'static,
        ) -> Result<T, KeyringError> {
            let native = Arc::clone(&self.native);
            let user = user.to_owned();
            tokio::task::spawn_blocking(move || call(&native, &user))
                .await
                .map_err(|err| KeyringError::Failed(err.to_string()))?
                .map_err(failed)
        }
    }

    /// The entries where the secret of `user` may be, the one to create first.
    ///
    /// Windows: Python's `WinVaultKeyring` stores a service's first user under the bare
    /// service name and the others as `user@service`, and reads the compound name when the
    /// bare one holds another user; we write the compound name and read both.
    fn candidates(native: &NativeStore, user: &str) -> Result<Vec<Entry>, Error> {
        #[cfg(target_os = "windows")]
        {
            let compound = format!("{user}@{KEYRING_SERVICE}");
            let target = |name: &str| {
                native.build(
                    KEYRING_SERVICE,
                    user,
                    Some(&std::collections::HashMap::from([("target", name)])),
                )
            };
            Ok(vec![target(&compound)?, target(KEYRING_SERVICE)?])
        }
        #[cfg(target_os = "macos")]
        {
            Ok(vec![native.build(KEYRING_SERVICE, user, None)?])
        }
    }

    /// The first candidate that holds `user`'s secret. Past the first, a candidate counts only
    /// when it names `user`: the bare service name may hold another user's secret (Windows).
    fn existing(native: &NativeStore, user: &str) -> Result<Option<Entry>, Error> {
        for (index, entry) in candidates(native, user)?.into_iter().enumerate() {
            match entry.get_attributes() {
                Ok(attributes)
                    if index == 0
                        || attributes
                            .get("username")
                            .is_some_and(|owner| owner == user) =>
                {
                    return Ok(Some(entry));
                }
                Ok(_) | Err(Error::NoEntry) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }

    fn failed(err: Error) -> KeyringError {
        match err {
            Error::NoStorageAccess(_) => KeyringError::Locked,
            other => KeyringError::Failed(other.to_string()),
        }
    }
}
