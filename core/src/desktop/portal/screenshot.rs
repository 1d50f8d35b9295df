//! Screenshots through the XDG desktop portal's Screenshot interface, where the compositor
//! offers no capture protocol (GNOME Shell; KDE's backend asks in a dialog for every one, so
//! on KWin they are not offered).
//!
//! The portal is asked for a non-interactive screenshot of the whole desktop: its backend has
//! the compositor write a PNG (GNOME Shell through `org.gnome.Shell.Screenshot`), and answers
//! with the file's URI, which is read, decoded and removed here.
//! The portal checks its permission store first: once the person has allowed screenshots
//! (in the desktop's own dialog at the first one, or beforehand), no dialog is shown.
//! Without the compositor's service (a bare mutter) the portal never answers, so that is
//! checked before the screenshot is advertised.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use image::RgbaImage;
use zbus::zvariant::{OwnedValue, Value};

use super::{Body, CALL_DEADLINE, CONSENT_DEADLINE, Portal, call_bounded, failed, property_u32};
use crate::desktop::DesktopError;

/// What the portal offers, asked without a dialog. Declared with the rest of what a Wayland
/// session offers, so `wayland` needs nothing of this module.
pub use crate::desktop::wayland::PortalShots as Offer;

const SCREENSHOT: &str = "org.freedesktop.portal.Screenshot";
const PERMISSION_STORE: &str = "org.freedesktop.impl.portal.PermissionStore";
const PERMISSION_STORE_PATH: &str = "/org/freedesktop/impl/portal/PermissionStore";
/// The permission store's table and entry for screenshots, and the app id the portal gives
/// programs outside a sandbox.
const TABLE: &str = "screenshot";
const ENTRY: &str = "screenshot";
const UNSANDBOXED: &str = "";
/// The compositor service the portal's GNOME backend calls.
const GNOME_SHELL: &str = "org.gnome.Shell.Screenshot";
/// KWin's, which the KDE backend calls after its dialog.
const KWIN: &str = "org.kde.KWin";
/// What a refusal is named in `PERMISSION_PENDING`, as PERMISSIONS_CHECK names it.
const PERMISSION: &str = "screen_recording";
/// The most a screenshot file may hold: a 16384×16384 desktop's PNG is far less.
const MAX_FILE: u64 = 1 << 30;

/// Asks the portal, without a dialog, whether it can take screenshots here; `None` when no
/// portal with a Screenshot interface answers.
pub async fn offer(bus: &zbus::Connection) -> Option<Offer> {
    property_u32(bus, SCREENSHOT, "version").await?;
    Some(Offer {
        service: has_owner(bus, GNOME_SHELL).await,
        kwin: has_owner(bus, KWIN).await,
        allowed: allowed(bus).await,
    })
}

/// What the portal on this process's session bus offers, asked without a dialog; `None`
/// without a session bus or a portal with a Screenshot interface.
#[must_use]
pub fn offered() -> Option<Offer> {
    super::ask(|bus| async move { offer(&bus).await })
}

pub(super) async fn has_owner(bus: &zbus::Connection, name: &str) -> bool {
    let reply = call_bounded(
        bus,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NameHasOwner",
        &(name,),
    )
    .await;
    reply.is_some_and(|reply| reply.body().deserialize::<bool>().unwrap_or(false))
}

/// Whether `name` is on the bus, or the bus starts it when it is called (D-Bus activation, as
/// for the accessibility bus's launcher).
pub(super) async fn has_owner_or_starter(bus: &zbus::Connection, name: &str) -> bool {
    if has_owner(bus, name).await {
        return true;
    }
    let reply = call_bounded(
        bus,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "ListActivatableNames",
        &(),
    )
    .await;
    reply.is_some_and(|reply| {
        reply
            .body()
            .deserialize::<Vec<String>>()
            .is_ok_and(|names| names.iter().any(|n| n == name))
    })
}

/// What the permission store says of screenshots by programs outside a sandbox: `None` when
/// nobody has been asked yet (or the store cannot be read).
async fn allowed(bus: &zbus::Connection) -> Option<bool> {
    let reply = call_bounded(
        bus,
        PERMISSION_STORE,
        PERMISSION_STORE_PATH,
        PERMISSION_STORE,
        "Lookup",
        &(TABLE, ENTRY),
    )
    .await?;
    let (permissions, _data): (HashMap<String, Vec<String>>, OwnedValue) =
        reply.body().deserialize().ok()?;
    verdict(&permissions)
}

/// `yes` or `no` for programs outside a sandbox, from the store's entry.
fn verdict(permissions: &HashMap<String, Vec<String>>) -> Option<bool> {
    match permissions.get(UNSANDBOXED)?.first()?.as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// Takes one screenshot of the whole desktop: every monitor, laid out as the compositor has
/// them, in its physical pixels.
///
/// # Errors
/// [`DesktopError::PermissionPending`] (`screen_recording`) when the person declines or does not
/// answer the portal's dialog, or refused screenshots before; [`DesktopError::Failed`] when the portal fails or its file
/// cannot be read.
pub fn take() -> Result<RgbaImage, DesktopError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| failed("start its thread", &err))?;
    let path = runtime.block_on(async {
        let bus = tokio::time::timeout(CALL_DEADLINE, async {
            zbus::connection::Builder::session()?.build().await
        })
        .await
        .map_err(|_| DesktopError::Failed("the session bus did not answer".to_owned()))?
        .map_err(|err| failed("reach the session bus", &err))?;
        let offered = offer(&bus).await.ok_or_else(|| {
            DesktopError::unsupported(
                "screenshot",
                "no desktop portal with a Screenshot interface answers on the session bus",
            )
        })?;
        // Allowed already, the compositor answers at once; otherwise the person is asked.
        let deadline: Duration = if offered.allowed == Some(true) {
            CALL_DEADLINE
        } else {
            CONSENT_DEADLINE
        };
        let portal = Portal {
            bus: &bus,
            permission: PERMISSION,
        };
        let answered = portal
            .request(SCREENSHOT, "Screenshot", deadline, |mut options| {
                options.insert("interactive", Value::from(false));
                options.insert("modal", Value::from(false));
                Body::Parent(options)
            })
            .await;
        let answer = match answered {
            // The portal ends a refused screenshot "in some other way" (response 2), not as
            // cancelled, whether the person refused in its dialog now or before; the
            // permission store then says no.
            Err(DesktopError::Failed(_)) if allowed(&bus).await == Some(false) => {
                return Err(super::declined(PERMISSION));
            }
            other => other?,
        };
        let uri = answer
            .get("uri")
            .and_then(|value| String::try_from(value.try_clone().ok()?).ok())
            .unwrap_or_default();
        file_path(&uri).ok_or_else(|| {
            DesktopError::Failed("the desktop portal's screenshot named no local file".to_owned())
        })
    })?;
    read_and_remove(&path)
}

/// The local path of a `file://` URI without a host, percent-decoded; `None` for any other
/// URI or a path with a NUL byte.
fn file_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" || url.host().is_some() {
        return None;
    }
    let path = url.to_file_path().ok()?;
    (!path.as_os_str().as_encoded_bytes().contains(&0)).then_some(path)
}

/// Reads the PNG the portal had written, decodes it and removes it: the file was made for
/// this screenshot alone, and a capture of the screen must not stay behind in the person's
/// folders.
#[expect(
    clippy::disallowed_methods,
    reason = "the file is the one the desktop portal of this user's session wrote for this screenshot, never a path from the platform"
)]
fn read_and_remove(path: &std::path::Path) -> Result<RgbaImage, DesktopError> {
    use std::io::Read as _;
    let unreadable = |err: &dyn std::fmt::Display| {
        DesktopError::Failed(format!(
            "the desktop portal's screenshot file could not be read: {err}"
        ))
    };
    let file = std::fs::File::open(path).map_err(|err| unreadable(&err))?;
    let mut bytes = Vec::new();
    let read = file.take(MAX_FILE + 1).read_to_end(&mut bytes);
    let _ = std::fs::remove_file(path);
    read.map_err(|err| unreadable(&err))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(unreadable(&"it is larger than any screen's picture"));
    }
    let image = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .map_err(|err| unreadable(&err))?;
    Ok(image.to_rgba8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_local_file_uris_are_read() {
        assert_eq!(
            file_path("file:///home/a%20b/Screenshot.png"),
            Some(PathBuf::from("/home/a b/Screenshot.png"))
        );
        assert_eq!(
            file_path("file:///tmp/Bildschirmfoto%20vom%202026-12-06.png"),
            Some(PathBuf::from("/tmp/Bildschirmfoto vom 2026-12-06.png"))
        );
        assert_eq!(
            file_path("file:///tmp/%C3%A9.png"),
            Some(PathBuf::from("/tmp/é.png"))
        );
        assert_eq!(file_path("https://example.com/x.png"), None);
        assert_eq!(file_path("file://host/x.png"), None);
        assert_eq!(file_path("file:///tmp/%00x"), None);
        assert_eq!(file_path(""), None);
    }

    #[test]
    fn the_permission_store_says_yes_no_or_nothing_for_unsandboxed_programs() {
        let entry =
            |app: &str, answer: &str| HashMap::from([(app.to_owned(), vec![answer.to_owned()])]);
        assert_eq!(verdict(&entry("", "yes")), Some(true));
        assert_eq!(verdict(&entry("", "no")), Some(false));
        assert_eq!(verdict(&entry("", "ask")), None);
        // Another app's answer says nothing about this one.
        assert_eq!(verdict(&entry("org.example.App", "yes")), None);
        assert_eq!(verdict(&HashMap::new()), None);
    }
}
