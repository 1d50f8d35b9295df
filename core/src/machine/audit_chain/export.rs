//! The manifest `audit export` writes beside the exported files, and its signature.

use std::{io, time::SystemTime};

use sha2::Sha256;
use time::OffsetDateTime;

use super::{
    KEY_LEN,
    canonical::{Json, ascii_only, hmac_hex, write_python},
    key::encode_hex,
};

/// The name `audit export` stores with the key's signature, as the reference's keyring user.
pub const EXPORT_KEY_USERNAME: &str = "audit_key";

/// One file of an export as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    /// The file name inside the archive.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

impl ManifestFile {
    /// Describes `bytes` stored as `name`.
    #[must_use]
    pub fn describe(name: &str, bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self {
            name: name.to_owned(),
            size: bytes.len() as u64,
            sha256: encode_hex(&Sha256::digest(bytes)),
        }
    }
}

/// The export manifest as the reference writes it: `json.dumps(manifest, sort_keys=True)`, so
/// `", "` and `": "` separators and everything outside ASCII escaped.
#[must_use]
pub fn export_manifest(exported_at: SystemTime, files: &[ManifestFile]) -> String {
    let files = files
        .iter()
        .map(|file| {
            Json::Object(vec![
                ("name".to_owned(), Json::Str(file.name.clone())),
                ("sha256".to_owned(), Json::Str(file.sha256.clone())),
                ("size".to_owned(), Json::Int(file.size.to_string())),
            ])
        })
        .collect();
    let manifest = Json::Object(vec![
        (
            "exported_at".to_owned(),
            Json::Str(crate::clock::iso_utc(OffsetDateTime::from(exported_at))),
        ),
        ("files".to_owned(), Json::Array(files)),
        (
            "key_username".to_owned(),
            Json::Str(EXPORT_KEY_USERNAME.to_owned()),
        ),
    ]);
    let mut out = String::new();
    // Only strings and integers here, which always serialise.
    let _ = write_python(&manifest, &mut out);
    ascii_only(&out)
}

/// `manifest.sig`: the hex HMAC-SHA256 of the manifest's bytes under the audit key. The
/// signature is symmetric: whoever checks it needs the key.
///
/// # Errors
/// Never in practice (HMAC takes keys of any length); the MAC API just cannot say so.
pub fn sign_manifest(key: &[u8; KEY_LEN], manifest: &[u8]) -> io::Result<String> {
    hmac_hex(key, manifest).map_err(io::Error::other)
}
