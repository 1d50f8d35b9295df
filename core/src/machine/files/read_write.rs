//! FILE_READ and FILE_WRITE: bounded ranged reads (text or base64) and atomic writes.

use std::borrow::Cow;
use std::io::{self, Read, Seek, SeekFrom};

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};

use super::{
    Encoding, FileError, FileLimits, ReadRequest, ReadResult, WriteContent, WriteRequest,
    WriteResult, existing, not_regular,
};
use crate::machine::jail::{Jail, JailError};

/// FILE_READ: reads `length` bytes (or to the end) from `offset`.
///
/// Only the requested range counts against the limit, so a bounded range of a file larger than
/// the limit is fine; a whole-file read of such a file, or a `length` above the limit, is
/// [`FileError::FileTooLarge`]. An offset past the end reads nothing.
///
/// # Errors
/// `PATH_NOT_FOUND` when missing, `INTERNAL_ERROR` for a directory or a special file,
/// `FILE_TOO_LARGE`, or any jail error.
pub fn read(
    jail: &Jail,
    request: &ReadRequest,
    limits: &FileLimits,
) -> Result<ReadResult, FileError> {
    let path = jail.resolve(&request.path)?;
    // Checked before opening because opening a FIFO for reading blocks until a writer comes.
    let meta = existing(jail, &path)?;
    if meta.is_dir() {
        return Err(JailError::IsADirectory {
            path: path.relative().to_path_buf(),
        }
        .into());
    }
    if !meta.is_file() {
        return Err(not_regular(&path));
    }
    let mut file = jail.open_read(&path)?;
    let io_error = |err: io::Error| FileError::from(JailError::from_io(&err, &path));
    // The handle's size, not the name's: the name may have been replaced since the check.
    let file_size = file.metadata().map_err(io_error)?.len();
    let requested = request
        .length
        .unwrap_or_else(|| file_size.saturating_sub(request.offset));
    let limit = limits.effective_read_limit(request.encoding);
    if requested > limit {
        return Err(FileError::FileTooLarge { requested, limit });
    }
    let available = file_size.saturating_sub(request.offset);
    let expected = usize::try_from(requested.min(available)).unwrap_or(0);
    if request.offset > 0 {
        file.seek(SeekFrom::Start(request.offset))
            .map_err(io_error)?;
    }
    let mut reader = file.take(requested);
    let (content, size_bytes) = match request.encoding {
        Encoding::Text => {
            let mut bytes = Vec::with_capacity(expected);
            reader.read_to_end(&mut bytes).map_err(io_error)?;
            let size_bytes = bytes.len() as u64;
            let text = match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
            };
            (text, size_bytes)
        }
        Encoding::Base64 => read_base64(&mut reader, expected).map_err(io_error)?,
    };
    Ok(ReadResult {
        content,
        encoding: request.encoding,
        size_bytes,
        file_size,
        truncated: request.offset.saturating_add(size_bytes) < file_size,
        path: path.absolute().to_path_buf(),
    })
}

/// Bytes read and base64-encoded between reads of this size (a multiple of 3, so the pieces'
/// encodings join into the whole's).
pub(super) const BASE64_READ_CHUNK: usize = 3 * 16 * 1024;

/// Reads `reader` to its end as standard base64, a chunk at a time, into a string sized for
/// `expected` bytes: the file's bytes are never held whole beside their encoding. Returns the
/// encoding and the number of bytes read.
pub(super) fn read_base64(reader: &mut impl Read, expected: usize) -> io::Result<(String, u64)> {
    let mut content = String::with_capacity(expected.div_ceil(3) * 4);
    let mut chunk = vec![0; BASE64_READ_CHUNK];
    let mut total = 0_u64;
    loop {
        let mut filled = 0;
        while filled < chunk.len() {
            match reader.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        STANDARD.encode_string(&chunk[..filled], &mut content);
        total += filled as u64;
        if filled < chunk.len() {
            return Ok((content, total));
        }
    }
}

/// FILE_WRITE: replaces the file atomically (readers see the old or the new content, never a
/// mix). An existing symlink at the path is followed to its target inside the root, whose
/// content is replaced; the link stays. With `create_parents` missing directories are created;
/// without it a missing parent is `PATH_NOT_FOUND`.
///
/// The order of checks is the spec's: jail, then base64, then size.
///
/// # Errors
/// Any jail error, `INTERNAL_ERROR` "Bad base64", `FILE_TOO_LARGE`, `PATH_NOT_FOUND`.
pub fn write(
    jail: &Jail,
    request: &WriteRequest,
    limits: &FileLimits,
) -> Result<WriteResult, FileError> {
    // Resolving follows every existing symlink and keeps a missing tail lexical, so both the
    // nearest existing ancestor and the lexical parent are inside the root once this succeeds;
    // the directories are then created through the jail and cannot leave it either.
    let path = jail.resolve(&request.path)?;
    let bytes: Cow<'_, [u8]> = match &request.content {
        WriteContent::Text(text) => Cow::Borrowed(text.as_bytes()),
        WriteContent::Base64(text) => Cow::Owned(decode_base64(text)?),
    };
    let size = bytes.len() as u64;
    if size > limits.max_write_bytes {
        return Err(FileError::FileTooLarge {
            requested: size,
            limit: limits.max_write_bytes,
        });
    }
    jail.write_atomic(&path, &bytes, request.create_parents)?;
    Ok(WriteResult {
        path: path.absolute().to_path_buf(),
        size_bytes_written: size,
    })
}

/// Strict standard base64: no whitespace, canonical padding. Non-zero trailing bits are
/// accepted because Python's `b64decode(validate=True)` accepts them.
fn decode_base64(text: &str) -> Result<Vec<u8>, FileError> {
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    ENGINE.decode(text).map_err(|_| FileError::BadBase64)
}
