//! Sanitises PNG screenshots uploaded by desktop clients (`observation.imageBase64`): strict
//! base64 and size checks, bounded full decode, then a fresh RGBA8 re-encode so only pixels survive.

use std::io::Cursor;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use png::{BitDepth, ColorType, Compression, DecodingError, Transformations};

/// Upper bound for both the decoded upload and the re-encoded output.
pub const MAX_PNG_BYTES: usize = 2_000_000;
/// Upper bound on the base64 string length; exactly the padded encoding of `MAX_PNG_BYTES`.
pub const MAX_BASE64_CHARS: usize = 2_666_668;
/// Each side must be within `1..=MAX_SIDE`.
pub const MAX_SIDE: u32 = 1600;
/// Upper bound on `width * height`.
pub const MAX_PIXELS: u64 = 2_560_000;

// A mismatch would make one of the two caps silently unreachable or too tight.
const _: () = assert!(MAX_BASE64_CHARS == MAX_PNG_BYTES.div_ceil(3) * 4);

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
/// Signature plus a complete IHDR chunk (length, type, 13 data bytes, CRC).
const MIN_HEADER_BYTES: usize = 8 + 4 + 4 + 13 + 4;
/// The png crate only charges its own buffers (row buffers, retained chunks such as PLTE or
/// eXIf) to this budget; since the whole input is at most `MAX_PNG_BYTES`, this never rejects a
/// legitimate image but still caps what a hostile one can make the decoder allocate.
const DECODER_MEMORY_LIMIT: usize = 8 * 1024 * 1024;

/// A PNG rebuilt from decoded pixels only, plus its canonical base64 form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanitisedPng {
    /// The PNG in canonical standard base64.
    pub base64: String,
    /// The PNG's bytes.
    pub bytes: Vec<u8>,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// Why an upload was rejected. Display texts are fixed so that nothing from the (untrusted)
/// input can ever reach logs or responses through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PngError {
    /// The input is empty.
    #[error("image is empty")]
    Empty,
    /// The base64 is longer than the largest image allows.
    #[error("image base64 is too long")]
    Base64TooLong,
    /// The input is not standard base64.
    #[error("image is not valid standard base64")]
    InvalidBase64,
    /// The base64 has another spelling than the canonical one.
    #[error("image base64 is not canonical")]
    NonCanonicalBase64,
    /// The decoded bytes exceed the size limit.
    #[error("image is too large")]
    TooManyBytes,
    /// The bytes do not start with the PNG signature.
    #[error("image is not a png")]
    NotPng,
    /// The IHDR chunk is missing or malformed.
    #[error("png header is invalid")]
    InvalidHeader,
    /// A side is zero or above the limit.
    #[error("png width or height is out of range")]
    DimensionsOutOfRange,
    /// Width times height is above the limit.
    #[error("png has too many pixels")]
    TooManyPixels,
    /// The size is not the one the request declared.
    #[error("png size does not match the expected size")]
    DimensionMismatch,
    /// The PNG is animated (APNG).
    #[error("animated png is not accepted")]
    Animated,
    /// The PNG ends early.
    #[error("png is truncated")]
    Truncated,
    /// The PNG's data is corrupt.
    #[error("png is corrupt")]
    Corrupt,
    /// Decoding would need more memory than allowed.
    #[error("png exceeds decoder memory limits")]
    DecoderLimit,
    /// The pixels could not be re-encoded.
    #[error("png could not be re-encoded")]
    EncodeFailed,
    /// The re-encoded PNG exceeds the size limit.
    #[error("re-encoded png is too large")]
    OutputTooLarge,
}

/// Strict base64 → bytes, then [`sanitise_png`]; checks width/height equal the expected ones.
///
/// # Errors
/// Returns the first rule the input breaks; see [`PngError`].
pub fn sanitise_base64_png(
    input: &str,
    expected_width: u32,
    expected_height: u32,
) -> Result<SanitisedPng, PngError> {
    let bytes = decode_base64_strict(input)?;
    sanitise(&bytes, Some((expected_width, expected_height)))
}

/// Sanitises raw PNG bytes (no dimension expectation) — for reuse by a screenshot path.
///
/// # Errors
/// Returns the first rule the input breaks; see [`PngError`].
pub fn sanitise_png(bytes: &[u8]) -> Result<SanitisedPng, PngError> {
    sanitise(bytes, None)
}

fn decode_base64_strict(input: &str) -> Result<Vec<u8>, PngError> {
    if input.is_empty() {
        return Err(PngError::Empty);
    }
    // Byte length is at least the char count, so this also caps multi-byte input early.
    if input.len() > MAX_BASE64_CHARS {
        return Err(PngError::Base64TooLong);
    }
    let bytes = STANDARD.decode(input).map_err(|err| match err {
        base64::DecodeError::InvalidLastSymbol(..) => PngError::NonCanonicalBase64,
        _ => PngError::InvalidBase64,
    })?;
    // The engine already requires canonical padding and zero trailing bits; the round trip makes
    // "exactly one accepted spelling per image" hold even if engine defaults ever change.
    if STANDARD.encode(&bytes) != input {
        return Err(PngError::NonCanonicalBase64);
    }
    Ok(bytes)
}

fn sanitise(bytes: &[u8], expected: Option<(u32, u32)>) -> Result<SanitisedPng, PngError> {
    if bytes.is_empty() {
        return Err(PngError::Empty);
    }
    if bytes.len() > MAX_PNG_BYTES {
        return Err(PngError::TooManyBytes);
    }
    let (width, height) = read_ihdr_size(bytes)?;
    if let Some(err) = dimension_error(width, height, MAX_SIDE, MAX_PIXELS) {
        return Err(err);
    }
    if expected.is_some_and(|size| size != (width, height)) {
        return Err(PngError::DimensionMismatch);
    }
    let rgba = decode_rgba8(bytes, width, height)?;
    let png = encode_rgba8(&rgba, width, height, MAX_PNG_BYTES)?;
    Ok(SanitisedPng {
        base64: STANDARD.encode(&png),
        bytes: png,
        width,
        height,
    })
}

/// Reads the claimed size straight from the IHDR bytes so that it is vetted before the png
/// crate sees anything that could make it allocate or inflate.
fn read_ihdr_size(bytes: &[u8]) -> Result<(u32, u32), PngError> {
    if !bytes.starts_with(&PNG_SIGNATURE) {
        return Err(PngError::NotPng);
    }
    if bytes.len() < MIN_HEADER_BYTES {
        return Err(PngError::Truncated);
    }
    let be_u32 = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .ok_or(PngError::Truncated)
    };
    if be_u32(8)? != 13 || bytes.get(12..16) != Some(b"IHDR".as_slice()) {
        return Err(PngError::InvalidHeader);
    }
    Ok((be_u32(16)?, be_u32(20)?))
}

/// Takes the limits as parameters so the pixel cap stays testable even though, with the current
/// constants, `MAX_SIDE²` equals `MAX_PIXELS`.
fn dimension_error(width: u32, height: u32, max_side: u32, max_pixels: u64) -> Option<PngError> {
    if !(1..=max_side).contains(&width) || !(1..=max_side).contains(&height) {
        return Some(PngError::DimensionsOutOfRange);
    }
    if u64::from(width) * u64::from(height) > max_pixels {
        return Some(PngError::TooManyPixels);
    }
    None
}

fn decode_rgba8(bytes: &[u8], width: u32, height: u32) -> Result<Vec<u8>, PngError> {
    let mut options = png::DecodeOptions::default();
    // Strict by default: corrupted data must fail rather than be decoded "best effort".
    options.set_ignore_adler32(false);
    options.set_ignore_crc(false);
    options.set_skip_ancillary_crc_failures(false);
    // Text and ICC data are dropped anyway; skipping them avoids parsing and buffering them
    // (their CRCs are still verified).
    options.set_ignore_text_chunk(true);
    options.set_ignore_iccp_chunk(true);

    let mut decoder = png::Decoder::new_with_options(Cursor::new(bytes), options);
    decoder.set_limits(png::Limits {
        bytes: DECODER_MEMORY_LIMIT,
    });
    decoder.set_transformations(Transformations::EXPAND | Transformations::STRIP_16);

    let info = decoder.read_header_info().map_err(decoding_error)?;
    if info.size() != (width, height) {
        return Err(PngError::InvalidHeader);
    }
    let mut reader = decoder.read_info().map_err(decoding_error)?;
    if reader.info().animation_control.is_some() {
        return Err(PngError::Animated);
    }
    let len = reader.output_buffer_size().ok_or(PngError::DecoderLimit)?;
    let mut pixels = vec![0; len];
    let frame = reader.next_frame(&mut pixels).map_err(decoding_error)?;
    // Reading on to IEND is what catches a damaged tail (bad CRCs, missing IEND, truncation).
    reader.finish().map_err(decoding_error)?;
    pixels.truncate(frame.buffer_size());
    to_rgba8(pixels, frame.color_type, frame.bit_depth, width, height)
}

fn decoding_error(err: DecodingError) -> PngError {
    match err {
        DecodingError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            PngError::Truncated
        }
        DecodingError::LimitsExceeded => PngError::DecoderLimit,
        _ => PngError::Corrupt,
    }
}

/// Widens the decoder's 8-bit output to RGBA; `EXPAND | STRIP_16` leaves only these four layouts.
fn to_rgba8(
    pixels: Vec<u8>,
    color: ColorType,
    depth: BitDepth,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, PngError> {
    let channels = match (color, depth) {
        (ColorType::Grayscale, BitDepth::Eight) => 1,
        (ColorType::GrayscaleAlpha, BitDepth::Eight) => 2,
        (ColorType::Rgb, BitDepth::Eight) => 3,
        (ColorType::Rgba, BitDepth::Eight) => 4,
        _ => return Err(PngError::Corrupt),
    };
    let pixel_count = usize::try_from(u64::from(width) * u64::from(height))
        .map_err(|_| PngError::DecoderLimit)?;
    if pixels.len() != pixel_count * channels {
        return Err(PngError::Corrupt);
    }
    if channels == 4 {
        return Ok(pixels);
    }
    let mut rgba = vec![0; pixel_count * 4];
    let out = rgba.chunks_exact_mut(4);
    match channels {
        1 => {
            for (dst, &v) in out.zip(pixels.iter()) {
                dst.copy_from_slice(&[v, v, v, u8::MAX]);
            }
        }
        2 => {
            for (dst, src) in out.zip(pixels.chunks_exact(2)) {
                dst.copy_from_slice(&[src[0], src[0], src[0], src[1]]);
            }
        }
        _ => {
            for (dst, src) in out.zip(pixels.chunks_exact(3)) {
                dst.copy_from_slice(&[src[0], src[1], src[2], u8::MAX]);
            }
        }
    }
    Ok(rgba)
}

/// The output depends only on the pixels (no clock, no randomness, no input metadata), which
/// is what makes sanitising idempotent.
fn encode_rgba8(
    rgba: &[u8],
    width: u32,
    height: u32,
    max_bytes: usize,
) -> Result<Vec<u8>, PngError> {
    let fast = encode_with(rgba, width, height, Compression::Fast)?;
    if fast.len() <= max_bytes {
        return Ok(fast);
    }
    // Much slower, so only paid for the rare screenshot that Fast cannot fit.
    let high = encode_with(rgba, width, height, Compression::High)?;
    if high.len() <= max_bytes {
        Ok(high)
    } else {
        Err(PngError::OutputTooLarge)
    }
}

fn encode_with(
    rgba: &[u8],
    width: u32,
    height: u32,
    compression: Compression,
) -> Result<Vec<u8>, PngError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(ColorType::Rgba);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_compression(compression);
    let mut writer = encoder.write_header().map_err(|_| PngError::EncodeFailed)?;
    writer
        .write_image_data(rgba)
        .map_err(|_| PngError::EncodeFailed)?;
    writer.finish().map_err(|_| PngError::EncodeFailed)?;
    Ok(out)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests;
