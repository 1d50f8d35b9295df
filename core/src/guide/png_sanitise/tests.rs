//! Tests of [`super`]: accepted screenshots come back as fresh RGBA8 PNGs with only their pixels;
//! malformed, oversized, ancillary-chunk and hostile inputs are refused within the memory bound.

use super::*;

use base64::engine::general_purpose::STANDARD;
use png::Encoder;

// ---- helpers -------------------------------------------------------------------------

/// Deterministic, dependency-free noise so tests are reproducible.
struct XorShift(u64);

impl XorShift {
    fn next_u8(&mut self) -> u8 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u8
    }
}

pub(super) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFF_u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

pub(super) fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 12);
    out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc_input = kind.to_vec();
    crc_input.extend_from_slice(data);
    out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
    out
}

pub(super) struct Chunk {
    pub(super) kind: [u8; 4],
    /// Offset of the length field.
    pub(super) start: usize,
    pub(super) len: usize,
}

impl Chunk {
    pub(super) fn data_start(&self) -> usize {
        self.start + 8
    }
    pub(super) fn crc_start(&self) -> usize {
        self.start + 8 + self.len
    }
    pub(super) fn end(&self) -> usize {
        self.start + 12 + self.len
    }
}

pub(super) fn chunks(png: &[u8]) -> Vec<Chunk> {
    assert!(png.starts_with(&PNG_SIGNATURE));
    let mut out = Vec::new();
    let mut at = 8;
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
        let c = Chunk {
            kind,
            start: at,
            len,
        };
        at = c.end();
        out.push(c);
    }
    out
}

fn chunk_kinds(png: &[u8]) -> Vec<[u8; 4]> {
    chunks(png).iter().map(|c| c.kind).collect()
}

fn find_chunk(png: &[u8], kind: &[u8; 4]) -> Chunk {
    chunks(png).into_iter().find(|c| &c.kind == kind).unwrap()
}

fn insert_before_iend(png: &[u8], extra: &[u8]) -> Vec<u8> {
    let iend = find_chunk(png, b"IEND");
    let mut out = png[..iend.start].to_vec();
    out.extend_from_slice(extra);
    out.extend_from_slice(&png[iend.start..]);
    out
}

fn rewrite_crc(png: &mut [u8], c: &Chunk) {
    let crc = crc32(&png[c.start + 4..c.crc_start()]);
    png[c.crc_start()..c.end()].copy_from_slice(&crc.to_be_bytes());
}

fn encode_png(
    width: u32,
    height: u32,
    color: ColorType,
    depth: BitDepth,
    data: &[u8],
    setup: impl FnOnce(&mut Encoder<'static, &mut Vec<u8>>),
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&mut out, width, height);
    encoder.set_color(color);
    encoder.set_depth(depth);
    setup(&mut encoder);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(data).unwrap();
    writer.finish().unwrap();
    out
}

fn gradient_rgba(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for y in 0..height {
        for x in 0..width {
            out.extend_from_slice(&[
                (x * 7 + y) as u8,
                (y * 3) as u8,
                (x ^ y) as u8,
                (200 + (x + y) % 56) as u8,
            ]);
        }
    }
    out
}

fn rgba_png(width: u32, height: u32) -> Vec<u8> {
    let data = gradient_rgba(width, height);
    encode_png(
        width,
        height,
        ColorType::Rgba,
        BitDepth::Eight,
        &data,
        |_| {},
    )
}

/// Decodes without transformations; sanitised output must already be plain RGBA8.
fn decode_plain_rgba8(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(Cursor::new(png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut buf).unwrap();
    assert_eq!(frame.color_type, ColorType::Rgba);
    assert_eq!(frame.bit_depth, BitDepth::Eight);
    buf.truncate(frame.buffer_size());
    (frame.width, frame.height, buf)
}

/// A minimal PNG claiming any size: only the signature, IHDR and optionally more chunks.
fn bare_ihdr(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    let mut out = PNG_SIGNATURE.to_vec();
    out.extend_from_slice(&chunk(b"IHDR", &ihdr));
    out
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Pads a valid PNG with a private ancillary chunk so that it is exactly `total` bytes.
fn padded_png(total: usize) -> Vec<u8> {
    let base = rgba_png(4, 3);
    let data = vec![0x5A; total - base.len() - 12];
    let padded = insert_before_iend(&base, &chunk(b"prIv", &data));
    assert_eq!(padded.len(), total);
    padded
}

// ---- base64 layer --------------------------------------------------------------------

#[test]
fn empty_input_is_rejected() {
    assert_eq!(sanitise_base64_png("", 1, 1), Err(PngError::Empty));
    assert_eq!(sanitise_png(&[]), Err(PngError::Empty));
}

#[test]
fn bad_alphabet_is_rejected() {
    let good = b64(&rgba_png(2, 2));
    for bad in [
        format!("{}*", &good[..good.len() - 1]),
        good.replace('+', "-").replace('/', "_") + "-_",
        "ab!d".to_owned(),
        "Zg=A".to_owned(),
    ] {
        assert_eq!(
            sanitise_base64_png(&bad, 2, 2),
            Err(PngError::InvalidBase64),
            "{bad:?}"
        );
    }
}

#[test]
fn url_safe_alphabet_is_rejected() {
    // Bytes chosen so the standard encoding contains both '+' and '/'.
    let bytes = [0xFB, 0xEF, 0xFF];
    let std = b64(&bytes);
    assert!(std.contains('+') && std.contains('/'));
    let url_safe = std.replace('+', "-").replace('/', "_");
    assert_eq!(decode_base64_strict(&std), Ok(bytes.to_vec()));
    assert_eq!(
        decode_base64_strict(&url_safe),
        Err(PngError::InvalidBase64)
    );
}

#[test]
fn whitespace_and_newlines_are_rejected() {
    let good = b64(&rgba_png(2, 2));
    assert!(sanitise_base64_png(&good, 2, 2).is_ok());
    let mid = good.len() / 2;
    for bad in [
        format!("{good}\n"),
        format!("{good}\r\n"),
        format!(" {good}"),
        format!("{} {}", &good[..mid], &good[mid..]),
        format!("{}\n{}", &good[..mid], &good[mid..]),
        format!("{}\t{}", &good[..mid], &good[mid..]),
    ] {
        assert_eq!(
            sanitise_base64_png(&bad, 2, 2),
            Err(PngError::InvalidBase64),
            "{bad:?}"
        );
    }
}

#[test]
fn data_url_prefix_is_rejected() {
    let input = format!("data:image/png;base64,{}", b64(&rgba_png(2, 2)));
    assert_eq!(
        sanitise_base64_png(&input, 2, 2),
        Err(PngError::InvalidBase64)
    );
}

#[test]
fn non_canonical_base64_is_rejected() {
    assert_eq!(decode_base64_strict("Zg=="), Ok(b"f".to_vec()));
    assert_eq!(
        decode_base64_strict("Zh=="),
        Err(PngError::NonCanonicalBase64)
    );
    assert_eq!(
        decode_base64_strict("Zm9="),
        Err(PngError::NonCanonicalBase64)
    );
    assert_eq!(
        sanitise_base64_png("Zh==", 1, 1),
        Err(PngError::NonCanonicalBase64)
    );
    // Missing or superfluous padding is not the canonical spelling either.
    assert!(decode_base64_strict("Zg").is_err());
    assert!(decode_base64_strict("Zg===").is_err());
}

#[test]
fn base64_length_cap_is_exact() {
    let too_long = "A".repeat(MAX_BASE64_CHARS + 1);
    assert_eq!(
        sanitise_base64_png(&too_long, 1, 1),
        Err(PngError::Base64TooLong)
    );
    // At the cap the length check passes; these 2,000,001 decoded bytes trip the next rule.
    let at_cap = "A".repeat(MAX_BASE64_CHARS);
    assert_eq!(
        sanitise_base64_png(&at_cap, 1, 1),
        Err(PngError::TooManyBytes)
    );
}

#[test]
fn error_texts_are_short_lower_case_and_fixed() {
    let all = [
        PngError::Empty,
        PngError::Base64TooLong,
        PngError::InvalidBase64,
        PngError::NonCanonicalBase64,
        PngError::TooManyBytes,
        PngError::NotPng,
        PngError::InvalidHeader,
        PngError::DimensionsOutOfRange,
        PngError::TooManyPixels,
        PngError::DimensionMismatch,
        PngError::Animated,
        PngError::Truncated,
        PngError::Corrupt,
        PngError::DecoderLimit,
        PngError::EncodeFailed,
        PngError::OutputTooLarge,
    ];
    let texts: Vec<String> = all.iter().map(ToString::to_string).collect();
    for text in &texts {
        assert!(!text.is_empty() && text.len() < 60, "{text}");
        assert_eq!(text, &text.to_lowercase());
        // Digits could only come from interpolated input (sizes, offsets, bytes).
        let without_name = text.replace("base64", "");
        assert!(!without_name.chars().any(|c| c.is_ascii_digit()), "{text}");
    }
    let mut unique = texts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), texts.len());
}

// ---- size and format -----------------------------------------------------------------

#[test]
fn exactly_max_decoded_bytes_is_accepted() {
    let png = padded_png(MAX_PNG_BYTES);
    let encoded = b64(&png);
    assert_eq!(encoded.len(), MAX_BASE64_CHARS);
    let out = sanitise_base64_png(&encoded, 4, 3).unwrap();
    assert_eq!((out.width, out.height), (4, 3));
    assert!(!out.bytes.windows(4).any(|w| w == b"prIv"));
    assert_eq!(sanitise_png(&png).unwrap(), out);
}

#[test]
fn one_byte_over_max_is_rejected() {
    let png = padded_png(MAX_PNG_BYTES + 1);
    assert_eq!(sanitise_png(&png), Err(PngError::TooManyBytes));
    let encoded = b64(&png);
    assert_eq!(encoded.len(), MAX_BASE64_CHARS);
    assert_eq!(
        sanitise_base64_png(&encoded, 4, 3),
        Err(PngError::TooManyBytes)
    );
}

#[test]
fn non_png_is_rejected() {
    let jpeg = [
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0x01, 0x01, 0x00, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0xFF, 0xD9,
    ];
    assert_eq!(sanitise_png(&jpeg), Err(PngError::NotPng));
    assert_eq!(
        sanitise_base64_png(&b64(&jpeg), 1, 1),
        Err(PngError::NotPng)
    );
    assert_eq!(sanitise_png(b"GIF89a......"), Err(PngError::NotPng));
    // Damaged signature byte.
    let mut png = rgba_png(2, 2);
    png[1] = b'Q';
    assert_eq!(sanitise_png(&png), Err(PngError::NotPng));
}

#[test]
fn ihdr_must_come_first() {
    let mut png = PNG_SIGNATURE.to_vec();
    png.extend_from_slice(&chunk(b"tEXt", b"a\0b"));
    png.extend_from_slice(&rgba_png(2, 2)[8..]);
    assert_eq!(sanitise_png(&png), Err(PngError::InvalidHeader));
}

// ---- dimensions ----------------------------------------------------------------------

#[test]
fn side_limits_are_exact() {
    for (w, h) in [(MAX_SIDE, 1), (1, MAX_SIDE)] {
        let data = vec![0x80; (w * h * 4) as usize];
        let png = encode_png(w, h, ColorType::Rgba, BitDepth::Eight, &data, |_| {});
        let out = sanitise_base64_png(&b64(&png), w, h).unwrap();
        assert_eq!((out.width, out.height), (w, h));
    }
    for (w, h) in [(MAX_SIDE + 1, 1), (1, MAX_SIDE + 1)] {
        let data = vec![0x80; (w * h * 4) as usize];
        let png = encode_png(w, h, ColorType::Rgba, BitDepth::Eight, &data, |_| {});
        assert_eq!(sanitise_png(&png), Err(PngError::DimensionsOutOfRange));
        assert_eq!(
            sanitise_base64_png(&b64(&png), w, h),
            Err(PngError::DimensionsOutOfRange)
        );
    }
}

#[test]
fn zero_sides_are_rejected() {
    for (w, h) in [(0, 1), (1, 0)] {
        let mut png = bare_ihdr(w, h);
        png.extend_from_slice(&chunk(b"IEND", &[]));
        assert_eq!(sanitise_png(&png), Err(PngError::DimensionsOutOfRange));
    }
}

#[test]
fn full_size_screenshot_at_pixel_limit_is_accepted() {
    let side = MAX_SIDE;
    assert_eq!(u64::from(side) * u64::from(side), MAX_PIXELS);
    // Screenshot-like: flat areas with some structure, so it compresses like a real one.
    let mut data = Vec::with_capacity((side * side * 4) as usize);
    for y in 0..side {
        for x in 0..side {
            let band = ((y / 40) % 4) as u8 * 50;
            let text = u8::from((x / 3 + y / 5) % 7 == 0) * 120;
            data.extend_from_slice(&[band, band.wrapping_add(text), 240 - text, 255]);
        }
    }
    let png = encode_png(side, side, ColorType::Rgba, BitDepth::Eight, &data, |_| {});
    let out = sanitise_base64_png(&b64(&png), side, side).unwrap();
    assert!(out.bytes.len() <= MAX_PNG_BYTES);
    assert_eq!(decode_plain_rgba8(&out.bytes).2, data);
}

#[test]
fn pixel_cap_is_enforced_independently_of_side_cap() {
    assert_eq!(dimension_error(1600, 1600, MAX_SIDE, MAX_PIXELS), None);
    assert_eq!(dimension_error(10, 10, 100, 100), None);
    assert_eq!(
        dimension_error(10, 11, 100, 100),
        Some(PngError::TooManyPixels)
    );
    assert_eq!(
        dimension_error(101, 1, 100, 100),
        Some(PngError::DimensionsOutOfRange)
    );
    assert_eq!(
        dimension_error(u32::MAX, u32::MAX, u32::MAX, u64::MAX),
        None
    );
}

#[test]
fn dimension_mismatch_is_rejected() {
    let encoded = b64(&rgba_png(3, 2));
    assert!(sanitise_base64_png(&encoded, 3, 2).is_ok());
    for (w, h) in [(2, 3), (3, 3), (4, 2), (0, 0)] {
        assert_eq!(
            sanitise_base64_png(&encoded, w, h),
            Err(PngError::DimensionMismatch)
        );
    }
}

#[test]
fn huge_ihdr_is_rejected_before_any_pixel_data_is_read() {
    // No IDAT and no IEND at all: if the size were not checked first, this would surface as
    // a truncation (or an allocation attempt) instead.
    for (w, h) in [(100_000, 100_000), (u32::MAX, u32::MAX), (1_000_000, 1)] {
        let png = bare_ihdr(w, h);
        assert_eq!(sanitise_png(&png), Err(PngError::DimensionsOutOfRange));
    }
    // Same with a tiny zlib stream that would inflate to gigabytes of zeros if decoded.
    let mut png = bare_ihdr(1 << 30, 1 << 30);
    png.extend_from_slice(&chunk(
        b"IDAT",
        &[0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    ));
    png.extend_from_slice(&chunk(b"IEND", &[]));
    assert_eq!(sanitise_png(&png), Err(PngError::DimensionsOutOfRange));
    assert_eq!(
        sanitise_base64_png(&b64(&png), 1 << 30, 1 << 30),
        Err(PngError::DimensionsOutOfRange)
    );
}

// ---- structural damage ---------------------------------------------------------------

#[test]
fn truncated_png_is_rejected() {
    let png = rgba_png(16, 16);
    let idat = find_chunk(&png, b"IDAT");
    let iend = find_chunk(&png, b"IEND");
    for cut in [
        9,
        MIN_HEADER_BYTES - 1,
        MIN_HEADER_BYTES,
        idat.data_start() + 2,
        idat.data_start() + idat.len / 2,
        idat.crc_start(),
        idat.end(),
        iend.start + 6,
        png.len() - 1,
    ] {
        assert_eq!(
            sanitise_png(&png[..cut]),
            Err(PngError::Truncated),
            "cut at {cut}"
        );
    }
    // Trailing bytes after IEND are ignored and never make it into the output.
    let mut trailing = png.clone();
    trailing.extend_from_slice(b"garbage");
    assert_eq!(sanitise_png(&trailing), sanitise_png(&png));
}

#[test]
fn every_truncation_is_rejected() {
    let png = rgba_png(5, 4);
    for cut in 1..png.len() {
        assert!(sanitise_png(&png[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn corrupted_crc_is_rejected() {
    let png = insert_before_iend(&rgba_png(8, 8), &chunk(b"tEXt", b"k\0v"));
    assert!(sanitise_png(&png).is_ok());
    for kind in [b"IHDR", b"IDAT", b"tEXt", b"IEND"] {
        let c = find_chunk(&png, kind);
        let mut bad = png.clone();
        bad[c.crc_start()] ^= 0x01;
        assert_eq!(
            sanitise_png(&bad),
            Err(PngError::Corrupt),
            "{}",
            String::from_utf8_lossy(kind)
        );
    }
    // Damaged unknown ancillary chunk, too.
    let mut private = chunk(b"prIv", b"payload");
    let last = private.len() - 1;
    private[last] ^= 0x80;
    let bad = insert_before_iend(&rgba_png(8, 8), &private);
    assert_eq!(sanitise_png(&bad), Err(PngError::Corrupt));
}

#[test]
fn corrupted_idat_is_rejected_even_with_valid_crc() {
    let png = rgba_png(32, 32);
    let idat = find_chunk(&png, b"IDAT");
    assert!(idat.len > 8);
    // Zlib header, deflate body and Adler-32 trailer in turn.
    for offset in [0, 1, idat.len / 2, idat.len - 1] {
        let mut bad = png.clone();
        bad[idat.data_start() + offset] ^= 0xFF;
        rewrite_crc(&mut bad, &idat);
        assert!(
            matches!(
                sanitise_png(&bad),
                Err(PngError::Corrupt | PngError::Truncated)
            ),
            "offset {offset}: {:?}",
            sanitise_png(&bad)
        );
    }
    // A non-zlib stream.
    let mut bad = png[..idat.start].to_vec();
    bad.extend_from_slice(&chunk(b"IDAT", &[0u8; 64]));
    bad.extend_from_slice(&png[idat.end()..]);
    assert_eq!(sanitise_png(&bad), Err(PngError::Corrupt));
}

#[test]
fn apng_is_rejected() {
    let data = gradient_rgba(4, 4);
    // Single-frame APNG, built with png's animated encoder.
    let one = encode_png(4, 4, ColorType::Rgba, BitDepth::Eight, &data, |e| {
        e.set_animated(1, 0).unwrap();
    });
    assert!(chunk_kinds(&one).contains(b"acTL"));
    assert_eq!(sanitise_png(&one), Err(PngError::Animated));
    assert_eq!(
        sanitise_base64_png(&b64(&one), 4, 4),
        Err(PngError::Animated)
    );

    // Two frames.
    let mut two = Vec::new();
    let mut encoder = Encoder::new(&mut two, 4, 4);
    encoder.set_color(ColorType::Rgba);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_animated(2, 0).unwrap();
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&data).unwrap();
    writer.write_image_data(&data).unwrap();
    writer.finish().unwrap();
    assert_eq!(sanitise_png(&two), Err(PngError::Animated));

    // Hand-written acTL in an otherwise still image.
    let still = rgba_png(4, 4);
    let ihdr = find_chunk(&still, b"IHDR");
    let mut actl_data = 1u32.to_be_bytes().to_vec();
    actl_data.extend_from_slice(&0u32.to_be_bytes());
    let mut manual = still[..ihdr.end()].to_vec();
    manual.extend_from_slice(&chunk(b"acTL", &actl_data));
    manual.extend_from_slice(&still[ihdr.end()..]);
    assert_eq!(sanitise_png(&manual), Err(PngError::Animated));
}

// ---- output --------------------------------------------------------------------------

#[test]
fn rgb_rows_widen_to_the_same_pixels_eight_at_a_time_and_one_at_a_time() {
    // Widths around the eight-pixel blocks: none, one, several, and every remainder.
    for width in 0..=41 {
        let row: Vec<u8> = (0..width * 3).map(|i| (i * 37 % 251) as u8).collect();
        let mut fast = vec![0; width * 4];
        let mut plain = vec![0; width * 4];
        rgb_to_rgba(&row, &mut fast);
        widen_row(&row, &mut plain, |[r, g, b]| [r, g, b, u8::MAX]);
        assert_eq!(fast, plain, "width {width}");
    }
}

#[test]
fn metadata_is_stripped() {
    let data = gradient_rgba(6, 5);
    let mut png = encode_png(6, 5, ColorType::Rgba, BitDepth::Eight, &data, |e| {
        e.add_text_chunk("Comment".to_owned(), "private-secret".to_owned())
            .unwrap();
        e.add_ztxt_chunk("Author".to_owned(), "private-secret".to_owned())
            .unwrap();
        e.add_itxt_chunk("Title".to_owned(), "private-secret".to_owned())
            .unwrap();
        e.set_pixel_dims(Some(png::PixelDimensions {
            xppu: 3780,
            yppu: 3780,
            unit: png::Unit::Meter,
        }));
        e.set_source_gamma(png::ScaledFloat::new(0.45455));
    });
    png = insert_before_iend(&png, &chunk(b"eXIf", b"MM\0*private-secret"));
    png = insert_before_iend(&png, &chunk(b"prIv", b"private-secret"));
    let input_kinds = chunk_kinds(&png);
    for kind in [
        b"tEXt", b"zTXt", b"iTXt", b"pHYs", b"gAMA", b"eXIf", b"prIv",
    ] {
        assert!(input_kinds.contains(kind));
    }
    assert!(png.windows(14).any(|w| w == b"private-secret"));

    let out = sanitise_base64_png(&b64(&png), 6, 5).unwrap();
    assert!(!out.bytes.windows(14).any(|w| w == b"private-secret"));
    assert!(!out.bytes.windows(4).any(|w| w == b"tEXt"));
    let kinds = chunk_kinds(&out.bytes);
    assert_eq!(kinds.first(), Some(b"IHDR"));
    assert_eq!(kinds.last(), Some(b"IEND"));
    assert!(kinds[1..kinds.len() - 1].iter().all(|k| k == b"IDAT"));
    assert_eq!(decode_plain_rgba8(&out.bytes).2, data);
}

#[test]
fn iccp_is_stripped() {
    // iCCP: keyword, NUL, compression method 0, zlib stream of "private-secret".
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend_from_slice(&[
        0x78, 0x01, 0x01, 0x0E, 0x00, 0xF1, 0xFF, b'p', b'r', b'i', b'v', b'a', b't', b'e', b'-',
        b's', b'e', b'c', b'r', b'e', b't',
    ]);
    // Adler-32 of "private-secret".
    let adler = {
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in b"private-secret" {
            a = (a + u32::from(byte)) % 65521;
            b = (b + a) % 65521;
        }
        (b << 16) | a
    };
    iccp.extend_from_slice(&adler.to_be_bytes());
    let still = rgba_png(3, 3);
    let ihdr = find_chunk(&still, b"IHDR");
    let mut png = still[..ihdr.end()].to_vec();
    png.extend_from_slice(&chunk(b"iCCP", &iccp));
    png.extend_from_slice(&still[ihdr.end()..]);
    let out = sanitise_png(&png).unwrap();
    assert_eq!(
        chunk_kinds(&out.bytes),
        chunk_kinds(&sanitise_png(&still).unwrap().bytes)
    );
    assert!(!out.bytes.windows(4).any(|w| w == b"iCCP"));
    assert_eq!(out, sanitise_png(&still).unwrap());
}

#[test]
fn pixels_survive_sanitising() {
    let (w, h) = (37, 23);
    let data = gradient_rgba(w, h);
    let png = encode_png(w, h, ColorType::Rgba, BitDepth::Eight, &data, |e| {
        e.set_compression(Compression::High);
    });
    let out = sanitise_base64_png(&b64(&png), w, h).unwrap();
    assert_eq!((out.width, out.height), (w, h));
    assert_eq!(decode_plain_rgba8(&out.bytes), (w, h, data));
    assert_eq!(out.base64(), STANDARD.encode(&out.bytes));
    assert_eq!(decode_base64_strict(&out.base64()), Ok(out.bytes.clone()));
}

#[test]
fn sanitising_is_idempotent() {
    let inputs = [
        rgba_png(40, 30),
        encode_png(
            3,
            2,
            ColorType::Grayscale,
            BitDepth::Eight,
            &[0, 50, 100, 150, 200, 250],
            |e| {
                e.add_text_chunk("k".to_owned(), "v".to_owned()).unwrap();
            },
        ),
    ];
    for png in inputs {
        let first = sanitise_png(&png).unwrap();
        let second = sanitise_png(&first.bytes).unwrap();
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(first, second);
        let third = sanitise_base64_png(&second.base64(), first.width, first.height).unwrap();
        assert_eq!(third, first);
    }
}

#[test]
fn palette_input_is_expanded() {
    let palette = vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30];
    // 4x2 at 2 bits per index: one byte per row.
    let rows = [0b00_01_10_11, 0b11_10_01_00];
    let plain = encode_png(4, 2, ColorType::Indexed, BitDepth::Two, &rows, |e| {
        e.set_palette(palette.clone());
    });
    let expected_plain: Vec<u8> = [0, 1, 2, 3, 3, 2, 1, 0]
        .iter()
        .flat_map(|&i| {
            let c = &palette[i * 3..i * 3 + 3];
            [c[0], c[1], c[2], 255]
        })
        .collect();
    let out = sanitise_png(&plain).unwrap();
    assert_eq!(decode_plain_rgba8(&out.bytes), (4, 2, expected_plain));

    // With tRNS, palette alpha must carry over (entries without alpha are opaque).
    let trns = vec![0, 128];
    let with_alpha = encode_png(4, 2, ColorType::Indexed, BitDepth::Two, &rows, |e| {
        e.set_palette(palette.clone());
        e.set_trns(trns.clone());
    });
    let expected_alpha: Vec<u8> = [0, 1, 2, 3, 3, 2, 1, 0]
        .iter()
        .flat_map(|&i| {
            let c = &palette[i * 3..i * 3 + 3];
            [c[0], c[1], c[2], trns.get(i).copied().unwrap_or(255)]
        })
        .collect();
    let out = sanitise_png(&with_alpha).unwrap();
    assert_eq!(decode_plain_rgba8(&out.bytes), (4, 2, expected_alpha));
}

#[test]
fn grey_inputs_are_converted() {
    let grey8 = encode_png(
        3,
        1,
        ColorType::Grayscale,
        BitDepth::Eight,
        &[0, 77, 255],
        |_| {},
    );
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&grey8).unwrap().bytes).2,
        vec![0, 0, 0, 255, 77, 77, 77, 255, 255, 255, 255, 255]
    );

    // 1-bit grey: 0 → black, 1 → white.
    let grey1 = encode_png(
        3,
        1,
        ColorType::Grayscale,
        BitDepth::One,
        &[0b1010_0000],
        |_| {},
    );
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&grey1).unwrap().bytes).2,
        vec![255, 255, 255, 255, 0, 0, 0, 255, 255, 255, 255, 255]
    );

    let grey_alpha = encode_png(
        2,
        1,
        ColorType::GrayscaleAlpha,
        BitDepth::Eight,
        &[9, 100, 200, 0],
        |_| {},
    );
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&grey_alpha).unwrap().bytes).2,
        vec![9, 9, 9, 100, 200, 200, 200, 0]
    );

    let rgb = encode_png(
        2,
        1,
        ColorType::Rgb,
        BitDepth::Eight,
        &[1, 2, 3, 4, 5, 6],
        |_| {},
    );
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&rgb).unwrap().bytes).2,
        vec![1, 2, 3, 255, 4, 5, 6, 255]
    );
}

#[test]
fn sixteen_bit_inputs_are_converted() {
    let rgba16: Vec<u8> = [
        0xABCD_u16, 0x1234, 0xFF00, 0x8001, 0x0000, 0xFFFF, 0x00FF, 0x7F80,
    ]
    .iter()
    .flat_map(|v| v.to_be_bytes())
    .collect();
    let png = encode_png(2, 1, ColorType::Rgba, BitDepth::Sixteen, &rgba16, |_| {});
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&png).unwrap().bytes).2,
        vec![0xAB, 0x12, 0xFF, 0x80, 0x00, 0xFF, 0x00, 0x7F]
    );

    let grey16: Vec<u8> = [0x1F00_u16, 0xE0FF]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let png = encode_png(
        2,
        1,
        ColorType::Grayscale,
        BitDepth::Sixteen,
        &grey16,
        |_| {},
    );
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&png).unwrap().bytes).2,
        vec![0x1F, 0x1F, 0x1F, 255, 0xE0, 0xE0, 0xE0, 255]
    );

    let rgb16: Vec<u8> = [0x0102_u16, 0x0304, 0x0506]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let png = encode_png(1, 1, ColorType::Rgb, BitDepth::Sixteen, &rgb16, |_| {});
    assert_eq!(
        decode_plain_rgba8(&sanitise_png(&png).unwrap().bytes).2,
        vec![0x01, 0x03, 0x05, 255]
    );
}

#[test]
fn each_slower_compression_is_the_fallback_of_the_one_before() {
    let (w, h) = (64, 64);
    let data = gradient_rgba(w, h);
    let [fastest, fast, high] =
        [Compression::Fastest, Compression::Fast, Compression::High].map(|level| {
            let mut out = Vec::new();
            assert!(encode_with(&mut out, Rows::Buffer(&data), w, h, level, usize::MAX).unwrap());
            out
        });
    assert!(
        high.len() < fast.len() && fast.len() < fastest.len(),
        "{} / {} / {}",
        fastest.len(),
        fast.len(),
        high.len()
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, fastest.len()),
        Ok(fastest.clone())
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, fastest.len() - 1),
        Ok(fast.clone())
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, fast.len()),
        Ok(fast.clone())
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, fast.len() - 1),
        Ok(high.clone())
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, high.len()),
        Ok(high.clone())
    );
    assert_eq!(
        encode_rgba8(Rows::Buffer(&data), w, h, high.len() - 1),
        Err(PngError::OutputTooLarge)
    );
}

#[test]
fn the_fastest_encoding_gives_up_cleanly_wherever_the_cap_falls() {
    // fdeflate unwraps some of its writes; a cap in its header, among the rows, in its last
    // bits or in the IDAT CRC and IEND must give "does not fit", never a panic or a partial
    // PNG, and the buffer must not grow past its mapping.
    let (w, h) = (64, 64);
    let data = gradient_rgba(w, h);
    let mut whole = Vec::new();
    assert!(
        encode_with(
            &mut whole,
            Rows::Buffer(&data),
            w,
            h,
            Compression::Fastest,
            usize::MAX
        )
        .unwrap()
    );
    let png = rgba_png(w, h);
    let caps = (0..whole.len())
        .step_by(7)
        .chain(whole.len() - 24..whole.len());
    for cap in caps {
        for rows in [Rows::Buffer(&data), Rows::Png(&png)] {
            let mut out = Vec::with_capacity(cap);
            let fits = encode_with(&mut out, rows, w, h, Compression::Fastest, cap);
            assert_eq!(fits, Ok(false), "cap {cap}");
            assert!(out.len() <= cap, "cap {cap}: wrote {}", out.len());
        }
    }
    for rows in [Rows::Buffer(&data), Rows::Png(&png)] {
        let mut out = Vec::new();
        let fits = encode_with(&mut out, rows, w, h, Compression::Fastest, whole.len());
        assert_eq!((fits, &out), (Ok(true), &whole));
    }
}

#[test]
fn incompressible_output_is_rejected() {
    // A 4-bit palette of random indices stays under the input cap, but as RGBA the same
    // noise cannot be squeezed under it by either compression level.
    let side = MAX_SIDE;
    let palette: Vec<u8> = (0..16u8)
        .flat_map(|i| [i * 16, 255 - i * 13, i.wrapping_mul(71)])
        .collect();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let data: Vec<u8> = (0..side * side / 2).map(|_| rng.next_u8()).collect();
    let png = encode_png(side, side, ColorType::Indexed, BitDepth::Four, &data, |e| {
        e.set_palette(palette);
        e.set_compression(Compression::High);
    });
    assert!(png.len() <= MAX_PNG_BYTES, "input is {} bytes", png.len());
    assert_eq!(sanitise_png(&png), Err(PngError::OutputTooLarge));
}

#[test]
fn large_exif_is_stripped_without_hitting_decoder_limits() {
    let png = insert_before_iend(&rgba_png(2, 2), &chunk(b"eXIf", &vec![7; 1_900_000]));
    assert!(png.len() <= MAX_PNG_BYTES);
    let out = sanitise_png(&png).unwrap();
    assert_eq!(out, sanitise_png(&rgba_png(2, 2)).unwrap());
}
