//! Generated-input properties of the PNG sanitiser: small valid PNGs of every colour type and
//! depth (palette with tRNS, 16-bit, Adam7-interlaced) come out as exactly their pixels in a
//! plain RGBA8 PNG with no ancillary chunk; arbitrary bytes and mutated PNGs (extra chunks,
//! broken CRCs, other IHDR sizes, APNG chunks, truncation, byte flips, inflation bombs) never
//! panic, finish fast, and are either refused or come out well-formed; and base64 near a
//! canonical spelling decodes only when it is that spelling.
//!
//! Case counts are fixed per property and the seed is fixed (reproducible runs, no flakes);
//! `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override both (docs/security.md has the long run).
//! Failures are not persisted to files: each one found becomes an example test instead.

use std::io::Cursor;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use png::{BitDepth, ColorType, Encoder};
use proptest::prelude::*;
use proptest::sample::Index;

use super::tests::{chunk, chunks, crc32};
use super::{PNG_SIGNATURE, PngError, SanitisedPng, decode_base64_strict, sanitise_png};

/// The default run's seed: the same cases every run, so a failure reproduces as is.
const SEED: u64 = 0x5EED_0016_0002;
/// Far above what a case takes (milliseconds); only a runaway decode would reach it.
const CASE_TIME_BOUND: Duration = Duration::from_secs(5);

fn config(default_cases: u32) -> ProptestConfig {
    crate::proptest_config::config(SEED, default_cases)
}

/// A small image as its samples, before any encoding.
#[derive(Debug, Clone)]
struct Source {
    color: ColorType,
    depth: u8,
    width: u32,
    height: u32,
    interlaced: bool,
    /// Row-major, `channels` samples per pixel, each below `1 << depth` (palette indexes
    /// below the palette's length).
    samples: Vec<u16>,
    /// RGB triples (paletted only).
    palette: Vec<u8>,
    /// The tRNS chunk's data, if any.
    trns: Option<Vec<u8>>,
}

const fn channels(color: ColorType) -> usize {
    match color {
        ColorType::Grayscale | ColorType::Indexed => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
    }
}

const fn color_code(color: ColorType) -> u8 {
    match color {
        ColorType::Grayscale => 0,
        ColorType::Rgb => 2,
        ColorType::Indexed => 3,
        ColorType::GrayscaleAlpha => 4,
        ColorType::Rgba => 6,
    }
}

fn bit_depth(depth: u8) -> BitDepth {
    BitDepth::from_u8(depth).unwrap()
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn source() -> impl Strategy<Value = Source> {
    let kinds = proptest::sample::select(vec![
        (ColorType::Grayscale, 1u8),
        (ColorType::Grayscale, 2),
        (ColorType::Grayscale, 4),
        (ColorType::Grayscale, 8),
        (ColorType::Grayscale, 16),
        (ColorType::Rgb, 8),
        (ColorType::Rgb, 16),
        (ColorType::Indexed, 1),
        (ColorType::Indexed, 2),
        (ColorType::Indexed, 4),
        (ColorType::Indexed, 8),
        (ColorType::GrayscaleAlpha, 8),
        (ColorType::GrayscaleAlpha, 16),
        (ColorType::Rgba, 8),
        (ColorType::Rgba, 16),
    ]);
    (
        kinds,
        1u32..=11,
        1u32..=11,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |((color, depth), width, height, interlaced, with_trns, seed)| {
                let mut rng = XorShift(seed | 1);
                let limit = 1u64 << depth;
                let palette_len = if color == ColorType::Indexed {
                    1 + rng.next() % limit.min(256)
                } else {
                    0
                };
                let sample_limit = if color == ColorType::Indexed {
                    palette_len
                } else {
                    limit
                };
                let count = (width * height) as usize * channels(color);
                let samples: Vec<u16> = (0..count)
                    .map(|_| (rng.next() % sample_limit) as u16)
                    .collect();
                let palette = (0..palette_len * 3).map(|_| rng.next() as u8).collect();
                // Grey and RGB tRNS name a colour that occurs, so some pixels turn transparent.
                let trns = with_trns.then(|| match color {
                    ColorType::Indexed => (0..1 + rng.next() % palette_len)
                        .map(|_| rng.next() as u8)
                        .collect(),
                    ColorType::Grayscale => samples[0].to_be_bytes().to_vec(),
                    ColorType::Rgb => samples[..3].iter().flat_map(|s| s.to_be_bytes()).collect(),
                    _ => Vec::new(),
                });
                let trns = trns.filter(|t| !t.is_empty());
                Source {
                    color,
                    depth,
                    width,
                    height,
                    interlaced,
                    samples,
                    palette,
                    trns,
                }
            },
        )
}

/// A sample widened to 8 bits the way PNG decoders do: low depths scaled up, 16 bits cut to
/// their high byte.
fn to_8(value: u16, depth: u8) -> u8 {
    match depth {
        16 => (value >> 8) as u8,
        8 => value as u8,
        _ => (u32::from(value) * 255 / ((1 << depth) - 1)) as u8,
    }
}

/// The RGBA8 pixels the source stands for, computed from the samples alone.
fn expected_rgba(source: &Source) -> Vec<u8> {
    let n = channels(source.color);
    let d = source.depth;
    let trns_value: Option<Vec<u16>> = source.trns.as_ref().map(|t| {
        t.chunks(2)
            .map(|b| u16::from_be_bytes([b[0], *b.get(1).unwrap_or(&0)]))
            .collect()
    });
    let mut out = Vec::with_capacity(source.samples.len() / n * 4);
    for pixel in source.samples.chunks(n) {
        let rgba = match source.color {
            ColorType::Grayscale => {
                let g = to_8(pixel[0], d);
                let transparent = trns_value.as_deref() == Some(&pixel[..1]);
                [g, g, g, if transparent { 0 } else { 255 }]
            }
            ColorType::GrayscaleAlpha => {
                let g = to_8(pixel[0], d);
                [g, g, g, to_8(pixel[1], d)]
            }
            ColorType::Rgb => {
                let transparent = trns_value.as_deref() == Some(pixel);
                [
                    to_8(pixel[0], d),
                    to_8(pixel[1], d),
                    to_8(pixel[2], d),
                    if transparent { 0 } else { 255 },
                ]
            }
            ColorType::Rgba => [
                to_8(pixel[0], d),
                to_8(pixel[1], d),
                to_8(pixel[2], d),
                to_8(pixel[3], d),
            ],
            ColorType::Indexed => {
                let i = usize::from(pixel[0]);
                let alpha = source
                    .trns
                    .as_ref()
                    .and_then(|t| t.get(i).copied())
                    .unwrap_or(255);
                [
                    source.palette[i * 3],
                    source.palette[i * 3 + 1],
                    source.palette[i * 3 + 2],
                    alpha,
                ]
            }
        };
        out.extend_from_slice(&rgba);
    }
    out
}

/// One scanline's samples packed as PNG stores them (MSB first below 8 bits, big-endian 16).
fn pack(samples: &[u16], depth: u8) -> Vec<u8> {
    match depth {
        16 => samples.iter().flat_map(|s| s.to_be_bytes()).collect(),
        8 => samples.iter().map(|&s| s as u8).collect(),
        _ => {
            let per_byte = 8 / usize::from(depth);
            samples
                .chunks(per_byte)
                .map(|group| {
                    group.iter().enumerate().fold(0u8, |byte, (i, &s)| {
                        byte | ((s as u8) << (8 - usize::from(depth) * (i + 1)))
                    })
                })
                .collect()
        }
    }
}

fn encode(source: &Source) -> Vec<u8> {
    if source.interlaced {
        return encode_interlaced(source);
    }
    let n = channels(source.color);
    let row_samples = source.width as usize * n;
    let data: Vec<u8> = source
        .samples
        .chunks(row_samples)
        .flat_map(|row| pack(row, source.depth))
        .collect();
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&mut out, source.width, source.height);
    encoder.set_color(source.color);
    encoder.set_depth(bit_depth(source.depth));
    if source.color == ColorType::Indexed {
        encoder.set_palette(source.palette.clone());
    }
    if let Some(trns) = &source.trns {
        encoder.set_trns(trns.clone());
    }
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&data).unwrap();
    writer.finish().unwrap();
    out
}

/// The png crate does not write Adam7, so interlaced images are assembled here: the seven
/// passes' scanlines (filter type 0) in one zlib stream of stored blocks.
fn encode_interlaced(source: &Source) -> Vec<u8> {
    const PASSES: [(u32, u32, u32, u32); 7] = [
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ];
    let n = channels(source.color);
    let (w, h) = (source.width, source.height);
    let mut raw = Vec::new();
    for (x0, y0, dx, dy) in PASSES {
        if x0 >= w || y0 >= h {
            continue;
        }
        for y in (y0..h).step_by(dy as usize) {
            let mut row = Vec::new();
            for x in (x0..w).step_by(dx as usize) {
                let at = (y * w + x) as usize * n;
                row.extend_from_slice(&source.samples[at..at + n]);
            }
            raw.push(0);
            raw.extend(pack(&row, source.depth));
        }
    }
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[source.depth, color_code(source.color), 0, 0, 1]);
    let mut out = PNG_SIGNATURE.to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    if source.color == ColorType::Indexed {
        out.extend(chunk(b"PLTE", &source.palette));
    }
    if let Some(trns) = &source.trns {
        out.extend(chunk(b"tRNS", trns));
    }
    out.extend(chunk(b"IDAT", &zlib_stored(&raw)));
    out.extend(chunk(b"IEND", &[]));
    out
}

fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        out.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// Sanitises within the time bound.
fn timed(bytes: &[u8]) -> Result<Result<SanitisedPng, PngError>, TestCaseError> {
    let start = Instant::now();
    let result = sanitise_png(bytes);
    let took = start.elapsed();
    prop_assert!(took < CASE_TIME_BOUND, "took {took:?}");
    Ok(result)
}

/// An accepted image's output: plain RGBA8 of the stated size, only IHDR, IDAT and IEND.
/// Returns its pixels.
fn check_output(out: &SanitisedPng) -> Result<Vec<u8>, TestCaseError> {
    let kinds: Vec<[u8; 4]> = chunks(&out.bytes).iter().map(|c| c.kind).collect();
    prop_assert_eq!(kinds.first(), Some(b"IHDR"));
    prop_assert_eq!(kinds.last(), Some(b"IEND"));
    prop_assert!(
        kinds
            .iter()
            .all(|k| [b"IHDR", b"IDAT", b"IEND"].contains(&k)),
        "output carries {:?}",
        kinds
    );
    let mut reader = png::Decoder::new(Cursor::new(&out.bytes))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    prop_assert_eq!(
        (frame.color_type, frame.bit_depth),
        (ColorType::Rgba, BitDepth::Eight)
    );
    prop_assert_eq!((frame.width, frame.height), (out.width, out.height));
    pixels.truncate(frame.buffer_size());
    Ok(pixels)
}

/// One change to a valid PNG.
#[derive(Debug, Clone)]
enum Mutation {
    /// An unknown ancillary chunk (private, safe-to-copy name) after the chunk picked.
    InsertAncillary(Index, [u8; 4], Vec<u8>),
    CorruptCrc(Index, u32),
    SetSize(u32, u32),
    /// acTL (and an fcTL) after IHDR.
    Animate(u32, bool),
    Truncate(Index),
    FlipByte(Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let ancillary_name = "[q-z][a-z][A-Z][a-z]".prop_map(|s| {
        let mut name = [0; 4];
        name.copy_from_slice(s.as_bytes());
        name
    });
    let size = prop_oneof![
        1u32..40,
        Just(0u32),
        1500u32..1700,
        Just(u32::MAX),
        any::<u32>()
    ];
    prop_oneof![
        3 => (any::<Index>(), ancillary_name, proptest::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(at, name, data)| Mutation::InsertAncillary(at, name, data)),
        2 => (any::<Index>(), 1u32..).prop_map(|(at, xor)| Mutation::CorruptCrc(at, xor)),
        2 => (size.clone(), size).prop_map(|(w, h)| Mutation::SetSize(w, h)),
        1 => (1u32..4, any::<bool>()).prop_map(|(frames, fctl)| Mutation::Animate(frames, fctl)),
        2 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), 1u8..).prop_map(|(at, xor)| Mutation::FlipByte(at, xor)),
    ]
}

/// What a mutation must lead to.
#[derive(Debug, PartialEq)]
enum Expect {
    /// Accepted with the source's pixels.
    SamePixels,
    Refused,
    /// Refused, or accepted well-formed.
    Either,
}

fn apply(png: &mut Vec<u8>, mutation: &Mutation) -> Expect {
    let all = chunks(png);
    match mutation {
        Mutation::InsertAncillary(at, name, data) => {
            // After IHDR and before IEND: anywhere an ancillary chunk may stand.
            let after = at.get(&all[..all.len() - 1]);
            png.splice(after.end()..after.end(), chunk(name, data));
            Expect::SamePixels
        }
        Mutation::CorruptCrc(at, xor) => {
            let c = at.get(&all);
            let crc = c.crc_start();
            let value = u32::from_be_bytes(png[crc..crc + 4].try_into().unwrap()) ^ xor;
            png[crc..crc + 4].copy_from_slice(&value.to_be_bytes());
            Expect::Refused
        }
        Mutation::SetSize(w, h) => {
            let ihdr = &all[0];
            let at = ihdr.data_start();
            png[at..at + 4].copy_from_slice(&w.to_be_bytes());
            png[at + 4..at + 8].copy_from_slice(&h.to_be_bytes());
            let crc = crc32(&png[ihdr.start + 4..ihdr.crc_start()]);
            png[ihdr.crc_start()..ihdr.end()].copy_from_slice(&crc.to_be_bytes());
            let in_range = |side: u32| (1..=super::MAX_SIDE).contains(&side);
            if in_range(*w) && in_range(*h) && u64::from(*w) * u64::from(*h) <= super::MAX_PIXELS {
                Expect::Either
            } else {
                // Refused from the IHDR alone (the time bound shows nothing was decoded).
                Expect::Refused
            }
        }
        Mutation::Animate(frames, with_fctl) => {
            let (w, h) = {
                let at = all[0].data_start();
                (
                    u32::from_be_bytes(png[at..at + 4].try_into().unwrap()),
                    u32::from_be_bytes(png[at + 4..at + 8].try_into().unwrap()),
                )
            };
            let mut extra = Vec::new();
            let mut actl = frames.to_be_bytes().to_vec();
            actl.extend_from_slice(&0u32.to_be_bytes());
            extra.extend(chunk(b"acTL", &actl));
            if *with_fctl {
                let mut fctl = 0u32.to_be_bytes().to_vec();
                for v in [w, h, 0, 0] {
                    fctl.extend_from_slice(&v.to_be_bytes());
                }
                fctl.extend_from_slice(&[0, 1, 0, 1, 0, 0]);
                extra.extend(chunk(b"fcTL", &fctl));
            }
            let end = all[0].end();
            png.splice(end..end, extra);
            Expect::Refused
        }
        Mutation::Truncate(at) => {
            let keep = at.index(png.len());
            png.truncate(keep);
            Expect::Refused
        }
        Mutation::FlipByte(at, xor) => {
            let i = at.index(png.len());
            png[i] ^= xor;
            Expect::Either
        }
    }
}

/// A zlib stream of 10 MB of zero bytes (scanlines of a 1600×1600 RGBA8 black image), a few
/// kilobytes compressed.
static ZERO_BOMB: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let (w, h) = (1600, 1600);
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&mut out, w, h);
    encoder.set_color(ColorType::Rgba);
    encoder.set_depth(BitDepth::Eight);
    let mut writer = encoder.write_header().unwrap();
    writer
        .write_image_data(&vec![0; (w * h * 4) as usize])
        .unwrap();
    writer.finish().unwrap();
    chunks(&out)
        .iter()
        .filter(|c| &c.kind == b"IDAT")
        .flat_map(|c| out[c.data_start()..c.crc_start()].to_vec())
        .collect()
});

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn valid_pngs_come_out_as_exactly_their_pixels(source in source()) {
        let png = encode(&source);
        let out = timed(&png)?;
        let out = out.map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
        prop_assert_eq!((out.width, out.height), (source.width, source.height));
        prop_assert_eq!(check_output(&out)?, expected_rgba(&source));
    }

    #[test]
    fn mutated_pngs_are_refused_or_come_out_well_formed(
        source in source(),
        mutations in proptest::collection::vec(mutation(), 1..3),
    ) {
        let mut png = encode(&source);
        let mut expect = Expect::SamePixels;
        for mutation in &mutations {
            expect = match (expect, apply(&mut png, mutation)) {
                (Expect::Refused, _) | (_, Expect::Refused) => Expect::Refused,
                (Expect::Either, _) | (_, Expect::Either) => Expect::Either,
                _ => Expect::SamePixels,
            };
            if expect != Expect::SamePixels {
                // Later mutations would read a damaged structure: only inserted chunks stack.
                break;
            }
        }
        let result = timed(&png)?;
        match (expect, result) {
            (Expect::Refused, result) => prop_assert!(result.is_err(), "accepted"),
            (Expect::SamePixels, Ok(out)) => {
                prop_assert_eq!(check_output(&out)?, expected_rgba(&source));
            }
            (Expect::SamePixels, Err(e)) => {
                return Err(TestCaseError::fail(format!("refused: {e}")));
            }
            (Expect::Either, Ok(out)) => {
                let pixels = check_output(&out)?;
                prop_assert_eq!(pixels.len(), (out.width * out.height * 4) as usize);
            }
            (Expect::Either, Err(_)) => {}
        }
    }

    #[test]
    fn arbitrary_bytes_are_refused_or_come_out_well_formed(
        signed in any::<bool>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut input = if signed { PNG_SIGNATURE.to_vec() } else { Vec::new() };
        input.extend_from_slice(&bytes);
        if let Ok(out) = timed(&input)? {
            check_output(&out)?;
        }
    }
}

proptest! {
    #![proptest_config(config(32))]

    /// A tiny IDAT that inflates to 10 MB for an image of a few pixels: decoding stops at the
    /// image's own size, so it is refused or yields exactly that many (black) pixels, fast.
    #[test]
    fn an_inflation_bomb_decodes_no_more_than_the_declared_size(
        width in 1u32..=16,
        height in 1u32..=16,
    ) {
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut png = PNG_SIGNATURE.to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        png.extend(chunk(b"IDAT", &ZERO_BOMB));
        png.extend(chunk(b"IEND", &[]));
        prop_assert!(ZERO_BOMB.len() < 64 * 1024, "bomb is {} bytes", ZERO_BOMB.len());
        if let Ok(out) = timed(&png)? {
            let pixels = check_output(&out)?;
            prop_assert_eq!(pixels, vec![0; (width * height * 4) as usize]);
        }
    }
}

/// A spelling near a canonical one: its characters, a few of them replaced by any character of
/// the alphabet or `=`, and `=` added or taken away at the end.
fn near_spelling() -> impl Strategy<Value = String> {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    (
        proptest::collection::vec(any::<u8>(), 0..10),
        proptest::collection::vec((any::<Index>(), 0..CHARS.len()), 0..3),
        -2i8..=2,
    )
        .prop_map(|(bytes, replacements, padding)| {
            let mut text = STANDARD.encode(bytes).into_bytes();
            for (at, with) in replacements {
                if !text.is_empty() {
                    let at = at.index(text.len());
                    text[at] = CHARS[with];
                }
            }
            match padding {
                1.. => text.extend(std::iter::repeat_n(b'=', padding.unsigned_abs().into())),
                ..0 => text.truncate(text.len().saturating_sub(padding.unsigned_abs().into())),
                0 => {}
            }
            String::from_utf8(text).unwrap_or_default()
        })
}

proptest! {
    #![proptest_config(config(4096))]

    /// Exactly one accepted spelling per byte string: whatever decodes is what the standard
    /// encoder writes for its bytes, and what that encoder writes always decodes.
    #[test]
    fn only_the_canonical_spelling_decodes(
        text in near_spelling(),
        bytes in proptest::collection::vec(any::<u8>(), 1..64),
    ) {
        if let Ok(decoded) = decode_base64_strict(&text) {
            prop_assert_eq!(STANDARD.encode(&decoded), text);
        }
        prop_assert_eq!(decode_base64_strict(&STANDARD.encode(&bytes)), Ok(bytes));
    }
}
