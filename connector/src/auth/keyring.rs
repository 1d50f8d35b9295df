//! The OS keyring, as the reference's `keyring` library uses it: one secret per (service,
//! username) pair.
//!
//! On Linux this is a small client of the freedesktop Secret Service (GNOME Keyring, KWallet)
//! on the session bus named by `DBUS_SESSION_BUS_ADDRESS`, over zbus. It uses the "plain"
//! session algorithm: the secret travels unencrypted over the private, per-user session bus,
//! which is what the bus's own access control already protects. Items carry the attributes the
//! Python library searches by (`service`, `username`), so secrets the reference stored are
//! found and ours are found by it. A locked collection that would need an interactive prompt
//! is reported as [`KeyringError::Locked`], never waited on.
//!
//! Elsewhere (macOS Keychain, Windows Credential Manager) this build has no keyring client:
//! [`Keyring::connect`] answers [`KeyringError::Unsupported`] and callers use their file
//! fallback.

use std::future::Future;
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::KEYRING_SERVICE;

/// How long one keyring call (including starting the service on demand) may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

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
#[derive(Debug)]
pub struct Keyring {
    #[cfg(target_os = "linux")]
    service: secret_service::SecretService,
}

impl Keyring {
    /// Connects to the keyring on the session bus at `bus_address`.
    ///
    /// # Errors
    /// [`KeyringError::Unavailable`] when nothing answers; [`KeyringError::Unsupported`] off
    /// Linux.
    pub async fn connect(bus_address: &str) -> Result<Self, KeyringError> {
        #[cfg(target_os = "linux")]
        {
            let service = secret_service::SecretService::connect(bus_address).await?;
            Ok(Self { service })
        }
        #[cfg(not(target_os = "linux"))]
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
        #[cfg(target_os = "linux")]
        {
            self.service.get(KEYRING_SERVICE, user).await
        }
        #[cfg(not(target_os = "linux"))]
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
        #[cfg(target_os = "linux")]
        {
            self.service.set(KEYRING_SERVICE, user, secret).await
        }
        #[cfg(not(target_os = "linux"))]
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
        #[cfg(target_os = "linux")]
        {
            self.service.delete(KEYRING_SERVICE, user).await
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = user;
            Err(KeyringError::Unsupported)
        }
    }
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
mod secret_service {
    //! The freedesktop Secret Service API, the calls this client needs.

    use std::collections::HashMap;

    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use zbus::zvariant::{DynamicType, OwnedObjectPath, OwnedValue, Type, Value};

    use super::{CALL_TIMEOUT, KeyringError};

    const DESTINATION: &str = "org.freedesktop.secrets";
    const SERVICE_PATH: &str = "/org/freedesktop/secrets";
    const SERVICE: &str = "org.freedesktop.Secret.Service";
    const COLLECTION: &str = "org.freedesktop.Secret.Collection";
    const ITEM: &str = "org.freedesktop.Secret.Item";
    const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
    /// The object path meaning "none" (no prompt, no collection).
    const NONE: &str = "/";
    /// What the Python library writes as `application`; we name ourselves.
    const APPLICATION: &str = "autogpt-shim";

    /// `(session, parameters, value, content_type)`, the API's Secret struct.
    type SecretStruct = (OwnedObjectPath, Vec<u8>, Vec<u8>, String);

    #[derive(Debug)]
    pub(super) struct SecretService {
        connection: zbus::Connection,
        session: OwnedObjectPath,
    }

    impl SecretService {
        pub(super) async fn connect(address: &str) -> Result<Self, KeyringError> {
            let unavailable = |err: zbus::Error| KeyringError::Unavailable(err.to_string());
            let builder = zbus::connection::Builder::address(address).map_err(unavailable)?;
            let connection = tokio::time::timeout(CALL_TIMEOUT, builder.build())
                .await
                .map_err(|_| KeyringError::Unavailable("the session bus did not answer".into()))?
                .map_err(unavailable)?;
            let mut service = Self {
                connection,
                session: OwnedObjectPath::default(),
            };
            let (_, session): (OwnedValue, OwnedObjectPath) = service
                .call(
                    SERVICE_PATH,
                    SERVICE,
                    "OpenSession",
                    &("plain", Value::from("")),
                )
                .await
                .map_err(|err| match err {
                    KeyringError::Failed(reason) => KeyringError::Unavailable(reason),
                    other => other,
                })?;
            service.session = session;
            Ok(service)
        }

        pub(super) async fn get(
            &self,
            service: &str,
            user: &str,
        ) -> Result<Option<String>, KeyringError> {
            let Some(item) = self.find(service, user).await? else {
                return Ok(None);
            };
            let (_, _, value, _): SecretStruct = self
                .call(item.as_str(), ITEM, "GetSecret", &(&self.session,))
                .await?;
            String::from_utf8(value)
                .map(Some)
                .map_err(|_| KeyringError::Failed("the stored secret is not UTF-8".into()))
        }

        pub(super) async fn set(
            &self,
            service: &str,
            user: &str,
            secret: &str,
        ) -> Result<(), KeyringError> {
            let collection = self.default_collection().await?;
            self.unlock(&collection, COLLECTION).await?;
            let attributes: HashMap<String, String> = [
                ("application", APPLICATION),
                ("service", service),
                ("username", user),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            let label = format!("Password for '{user}' on '{service}'");
            let properties: HashMap<&str, Value<'_>> = HashMap::from([
                ("org.freedesktop.Secret.Item.Label", Value::from(label)),
                (
                    "org.freedesktop.Secret.Item.Attributes",
                    Value::from(attributes),
                ),
            ]);
            let secret: SecretStruct = (
                self.session.clone(),
                Vec::new(),
                secret.as_bytes().to_vec(),
                "text/plain".to_owned(),
            );
            let (item, prompt): (OwnedObjectPath, OwnedObjectPath) = self
                .call(
                    collection.as_str(),
                    COLLECTION,
                    "CreateItem",
                    &(properties, secret, true),
                )
                .await?;
            if item.as_str() == NONE && prompt.as_str() != NONE {
                return Err(KeyringError::Locked);
            }
            Ok(())
        }

        pub(super) async fn delete(&self, service: &str, user: &str) -> Result<bool, KeyringError> {
            let mut deleted = false;
            while let Some(item) = self.find(service, user).await? {
                let prompt: OwnedObjectPath = self.call(item.as_str(), ITEM, "Delete", &()).await?;
                if prompt.as_str() != NONE {
                    return Err(KeyringError::Locked);
                }
                deleted = true;
            }
            Ok(deleted)
        }

        /// The first item for (service, user), unlocked.
        async fn find(
            &self,
            service: &str,
            user: &str,
        ) -> Result<Option<OwnedObjectPath>, KeyringError> {
            let attributes = HashMap::from([("service", service), ("username", user)]);
            let (unlocked, locked): (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) = self
                .call(SERVICE_PATH, SERVICE, "SearchItems", &(attributes,))
                .await?;
            if let Some(item) = unlocked.into_iter().next() {
                return Ok(Some(item));
            }
            let Some(item) = locked.into_iter().next() else {
                return Ok(None);
            };
            self.unlock(&item, ITEM).await?;
            Ok(Some(item))
        }

        async fn default_collection(&self) -> Result<OwnedObjectPath, KeyringError> {
            let collection: OwnedObjectPath = self
                .call(SERVICE_PATH, SERVICE, "ReadAlias", &("default",))
                .await?;
            if collection.as_str() == NONE {
                // Creating a collection always prompts for its password.
                return Err(KeyringError::Failed(
                    "the keyring has no default collection; create one in the desktop's keyring manager"
                        .into(),
                ));
            }
            Ok(collection)
        }

        /// Unlocks `object` (a collection or an item, named by `interface`) without a prompt
        /// when the service allows it, else [`KeyringError::Locked`].
        async fn unlock(
            &self,
            object: &OwnedObjectPath,
            interface: &str,
        ) -> Result<(), KeyringError> {
            let value: OwnedValue = self
                .call(object.as_str(), PROPERTIES, "Get", &(interface, "Locked"))
                .await?;
            if !bool::try_from(value).unwrap_or(true) {
                return Ok(());
            }
            let objects = [object.clone()];
            let (_, prompt): (Vec<OwnedObjectPath>, OwnedObjectPath) = self
                .call(SERVICE_PATH, SERVICE, "Unlock", &(objects,))
                .await?;
            if prompt.as_str() != NONE {
                return Err(KeyringError::Locked);
            }
            Ok(())
        }

        async fn call<B, R>(
            &self,
            path: &str,
            interface: &str,
            method: &str,
            body: &B,
        ) -> Result<R, KeyringError>
        where
            B: Serialize + DynamicType,
            R: Type + DeserializeOwned,
        {
            let failed = |err: zbus::Error| KeyringError::Failed(err.to_string());
            let call =
                self.connection
                    .call_method(Some(DESTINATION), path, Some(interface), method, body);
            let message = tokio::time::timeout(CALL_TIMEOUT, call)
                .await
                .map_err(|_| KeyringError::Failed(format!("{method} timed out")))?
                .map_err(failed)?;
            message.body().deserialize::<R>().map_err(failed)
        }
    }
}
