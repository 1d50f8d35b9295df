//! X11 window names as text: `_NET_WM_NAME` (EWMH, UTF-8) before `WM_NAME` (ICCCM: `STRING`
//! is Latin-1, `COMPOUND_TEXT` is ISO 2022, `UTF8_STRING` occurs too) before the application
//! from `WM_CLASS`, so windows of xterm, Tk, Java/AWT, Xt and Motif programs, which set only
//! `WM_NAME`, are listed under their real titles.

/// The encoding an 8-bit text property's type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// `STRING`: ISO 8859-1.
    Latin1,
    /// `UTF8_STRING`.
    Utf8,
    /// `COMPOUND_TEXT`: see [`compound_text`] for what is decoded.
    CompoundText,
    /// Any other type (`C_STRING`, a locale's own): read as UTF-8, which covers ASCII.
    Other,
}

/// The text of an 8-bit property of `encoding`: its first element (ICCCM separates a list's
/// elements with NUL), without control characters other than tab and newline.
pub(super) fn decode(encoding: Encoding, bytes: &[u8]) -> String {
    let first = bytes.split(|b| *b == 0).next().unwrap_or_default();
    let text = match encoding {
        Encoding::Latin1 => latin1(first),
        Encoding::Utf8 | Encoding::Other => String::from_utf8_lossy(first).into_owned(),
        Encoding::CompoundText => compound_text(first),
    };
    text.chars().filter(|c| shown(*c)).collect()
}

/// Whether a character belongs in a title: not a control character, bar tab and newline,
/// which the ICCCM allows in text properties.
fn shown(c: char) -> bool {
    !c.is_control() || c == '\t' || c == '\n'
}

/// ISO 8859-1: each byte is the code point of the same number.
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().copied().map(char::from).collect()
}

/// `WM_CLASS`: the instance name and the class name, each NUL-terminated `STRING`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct WmClass {
    pub instance: String,
    pub class: String,
}

impl WmClass {
    pub(super) fn parse(bytes: &[u8]) -> Self {
        let mut parts = bytes
            .split(|b| *b == 0)
            .map(|part| decode(Encoding::Latin1, part));
        Self {
            instance: parts.next().unwrap_or_default(),
            class: parts.next().unwrap_or_default(),
        }
    }

    /// The application: the class name (`XTerm`), or the instance name (`xterm`) when a
    /// program set no class.
    pub(super) fn application(&self) -> &str {
        if self.class.trim().is_empty() {
            &self.instance
        } else {
            &self.class
        }
    }
}

/// The name a window is listed under: `_NET_WM_NAME`, else `WM_NAME`, else the application
/// from `WM_CLASS` (as taskbars name an untitled window), else nothing. A name that is empty
/// or all blanks counts as absent.
pub(super) fn title(
    net_wm_name: Option<String>,
    wm_name: Option<String>,
    class: &WmClass,
) -> String {
    [net_wm_name, wm_name, Some(class.application().to_owned())]
        .into_iter()
        .flatten()
        .find(|name| !name.trim().is_empty())
        .unwrap_or_default()
}

const ESC: u8 = 0x1B;
/// The 8-bit Control Sequence Introducer.
const CSI: u8 = 0x9B;
/// What ends the encoding name at the head of an extended segment.
const STX: u8 = 0x02;

/// A character set ISO 2022 designates into GL (bytes 0x21-0x7E) or GR (0xA0-0xFF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charset {
    /// ASCII (`ESC ( B`), also the initial GL.
    Ascii,
    /// JIS X 0201 Roman (`ESC ( J`): ASCII with ¥ and ‾ at 0x5C and 0x7E.
    JisRoman,
    /// The right half of ISO 8859-1 (`ESC - A`), also the initial GR.
    Latin1,
    /// The right half of ISO 8859-15 (`ESC - b`): Latin-1 with eight letters and € replaced.
    Latin9,
    /// Any other set, of characters `width` bytes long: each becomes U+FFFD.
    Unknown { width: usize },
}

impl Charset {
    fn width(self) -> usize {
        match self {
            Self::Unknown { width } => width,
            _ => 1,
        }
    }

    /// The character `byte` (high bit cleared: the set's position) stands for.
    fn char(self, byte: u8) -> char {
        let position = byte & 0x7F;
        match (self, position) {
            (Self::JisRoman, 0x5C) => '¥',
            (Self::JisRoman, 0x7E) => '‾',
            (Self::Ascii | Self::JisRoman, _) => char::from(position),
            (Self::Latin9, _) => match position | 0x80 {
                0xA4 => '€',
                0xA6 => 'Š',
                0xA8 => 'š',
                0xB4 => 'Ž',
                0xB8 => 'ž',
                0xBC => 'Œ',
                0xBD => 'œ',
                0xBE => 'Ÿ',
                other => char::from(other),
            },
            (Self::Latin1, _) => char::from(position | 0x80),
            (Self::Unknown { .. }, _) => char::REPLACEMENT_CHARACTER,
        }
    }
}

/// X11 Compound Text (ISO 2022 with the X Consortium's extensions). Covered: ASCII and
/// JIS X 0201 Roman in GL; the Latin-1 and Latin-9 right halves in GR; UTF-8 segments
/// (`ESC % G` … `ESC % @`, as XFree86's Xlib writes them); extended segments
/// (`ESC % / F M L name STX …`) named `iso8859-1` or `utf-8`. Every other designated set
/// (other ISO 8859 parts, the Chinese, Japanese and Korean 94ⁿ sets) decodes to one U+FFFD
/// per character, other extended segments to one U+FFFD each; directionality
/// (`CSI 1 ]`, `CSI 2 ]`, `CSI ]`) and any other escape or control sequence are stripped.
pub(super) fn compound_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let (mut gl, mut gr) = (Charset::Ascii, Charset::Latin1);
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        at = match byte {
            ESC => escape(bytes, at, &mut gl, &mut gr, &mut out),
            CSI => control_sequence_end(bytes, at + 1),
            b' ' | b'\t' | b'\n' => {
                out.push(char::from(byte));
                at + 1
            }
            0x21..=0x7E => graphic(gl, bytes, at, &mut out),
            0xA0..=0xFF => graphic(gr, bytes, at, &mut out),
            // Other C0 and C1 controls have no place in compound text: dropped.
            _ => at + 1,
        };
    }
    out
}

/// One character of `set` at `at`; returns where the next starts.
fn graphic(set: Charset, bytes: &[u8], at: usize, out: &mut String) -> usize {
    out.push(set.char(bytes[at]));
    (at + set.width()).min(bytes.len())
}

/// Where a control sequence whose parameters start at `at` ends: after its final byte
/// (0x40-0x7E), past parameter (0x30-0x3F) and intermediate (0x20-0x2F) bytes.
fn control_sequence_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|b| (0x40..=0x7E).contains(b))
        .map_or(bytes.len(), |end| at + end + 1)
}

/// Acts on the escape sequence at `at` (ESC, intermediates 0x20-0x2F, a final 0x30-0x7E),
/// and on the segment it introduces for UTF-8 and extended segments; returns where decoding
/// goes on. A sequence cut off by the end of the text ends it.
fn escape(bytes: &[u8], at: usize, gl: &mut Charset, gr: &mut Charset, out: &mut String) -> usize {
    let start = at + 1;
    let Some(final_at) = bytes[start..]
        .iter()
        .position(|b| !(0x20..=0x2F).contains(b))
        .map(|n| start + n)
        .filter(|&i| (0x30..=0x7E).contains(&bytes[i]))
    else {
        return bytes.len();
    };
    let next = final_at + 1;
    let final_byte = bytes[final_at];
    match &bytes[start..final_at] {
        b"(" => {
            *gl = match final_byte {
                b'B' => Charset::Ascii,
                b'J' => Charset::JisRoman,
                _ => Charset::Unknown { width: 1 },
            };
        }
        b")" => {
            *gr = match final_byte {
                b'B' => Charset::Ascii,
                _ => Charset::Unknown { width: 1 },
            };
        }
        b"-" => {
            *gr = match final_byte {
                b'A' => Charset::Latin1,
                b'b' => Charset::Latin9,
                _ => Charset::Unknown { width: 1 },
            };
        }
        // 94² sets (GB 2312, JIS X 0208, KS C 5601): two bytes a character. `ESC $ F` is
        // the old form of `ESC $ ( F`.
        b"$" | b"$(" => *gl = Charset::Unknown { width: 2 },
        b"$)" => *gr = Charset::Unknown { width: 2 },
        b"%" if final_byte == b'G' => return utf8_segment(bytes, next, out),
        b"%/" if (b'0'..=b'4').contains(&final_byte) => {
            return extended_segment(bytes, next, out);
        }
        // Anything else (revisions, announcers, unknown designations) changes nothing here.
        _ => {}
    }
    next
}

/// The UTF-8 text from `at` up to `ESC % @` (or the end); returns where decoding goes on.
fn utf8_segment(bytes: &[u8], at: usize, out: &mut String) -> usize {
    let rest = &bytes[at..];
    let (text, next) = rest
        .windows(3)
        .position(|w| w == [ESC, b'%', b'@'])
        .map_or((rest, bytes.len()), |end| (&rest[..end], at + end + 3));
    out.push_str(&String::from_utf8_lossy(text));
    next
}

/// An extended segment after `ESC % / F`: two length bytes M L (`(M - 128) * 128 + L - 128`
/// bytes follow), then the encoding's name up to STX, then the text.
fn extended_segment(bytes: &[u8], at: usize, out: &mut String) -> usize {
    let Some(&[m, l]) = bytes.get(at..at + 2) else {
        return bytes.len();
    };
    let length = usize::from(m & 0x7F) * 128 + usize::from(l & 0x7F);
    let end = (at + 2 + length).min(bytes.len());
    let segment = &bytes[at + 2..end];
    let (name, text) = segment
        .iter()
        .position(|b| *b == STX)
        .map_or((segment, &[][..]), |i| (&segment[..i], &segment[i + 1..]));
    if name.eq_ignore_ascii_case(b"iso8859-1") {
        out.push_str(&latin1(text));
    } else if name.eq_ignore_ascii_case(b"utf-8") {
        out.push_str(&String::from_utf8_lossy(text));
    } else if !text.is_empty() {
        out.push(char::REPLACEMENT_CHARACTER);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_is_latin1_including_bytes_above_0x7f() {
        // "café-ñ" as xterm sets it: é = 0xE9, ñ = 0xF1, single bytes.
        assert_eq!(decode(Encoding::Latin1, b"caf\xE9-\xF1"), "café-ñ");
        assert_eq!(decode(Encoding::Latin1, b"\xA0\xFF"), "\u{A0}ÿ");
        // Read as UTF-8 (what the listing did before) these bytes are not text at all.
        assert!(String::from_utf8(b"caf\xE9".to_vec()).is_err());
        // The first element of a list, controls dropped.
        assert_eq!(decode(Encoding::Latin1, b"one\0two"), "one");
        assert_eq!(decode(Encoding::Latin1, b"a\x07b\x85c\td"), "abc\td");
    }

    #[test]
    fn utf8_string_is_utf8() {
        assert_eq!(
            decode(Encoding::Utf8, "日本語 – ✓".as_bytes()),
            "日本語 – ✓"
        );
        assert_eq!(decode(Encoding::Utf8, b"bad \xFF end"), "bad \u{FFFD} end");
        assert_eq!(decode(Encoding::Other, b"plain"), "plain");
    }

    #[test]
    fn compound_text_decodes_ascii_latin1_and_the_escapes_around_them() {
        let ct = |bytes: &[u8]| decode(Encoding::CompoundText, bytes);
        // The initial state: ASCII in GL, the Latin-1 right half in GR.
        assert_eq!(ct(b"caf\xE9 cr\xE8me"), "café crème");
        // Explicit designations, as Xlib writes them, change nothing for Latin-1 text.
        assert_eq!(ct(b"\x1B(Bcaf\x1B-A\xE9"), "café");
        // Latin-9 in GR: € and Œ where Latin-1 has ¤ and ¼.
        assert_eq!(ct(b"\x1B-b\xA4 \xBC"), "€ Œ");
        // JIS X 0201 Roman in GL, then back to ASCII.
        assert_eq!(ct(b"\x1B(J\x5C\x1B(B\x5C"), "¥\\");
        // Directionality and other control sequences are stripped.
        assert_eq!(ct(b"\x9B1]abc\x9B]"), "abc");
        // A UTF-8 segment (XFree86), then compound text again.
        assert_eq!(ct(b"a\x1B%G\xE6\x97\xA5\xE2\x9C\x93\x1B%@\xE9"), "a日✓é");
        // Extended segments: Latin-1 and UTF-8 by name, any other as one U+FFFD.
        assert_eq!(ct(b"\x1B%/1\x80\x8Ciso8859-1\x02\xE9t\xE9!"), "été!");
        assert_eq!(ct(b"\x1B%/0\x80\x89utf-8\x02\xE2\x9C\x93 ok"), "✓ ok");
        assert_eq!(
            ct(b"\x1B%/2\x80\x8Bbig5-0\x02\xA4\xA4\xA4\xE5x"),
            "\u{FFFD}x"
        );
        // A two-byte set (JIS X 0208 "日本"): one U+FFFD a character; Latin-1 GR survives.
        assert_eq!(ct(b"\x1B$(BF|K\\\x1B(B \xE9"), "\u{FFFD}\u{FFFD} é");
        // An unknown 96-set in GR (Greek): one U+FFFD a byte, GL untouched.
        assert_eq!(ct(b"\x1B-F\xE1\xE2a"), "\u{FFFD}\u{FFFD}a");
        // Truncated sequences end the text rather than leak escape bytes.
        assert_eq!(ct(b"ok\x1B"), "ok");
        assert_eq!(ct(b"ok\x1B$("), "ok");
        assert_eq!(ct(b"ok\x1B%/1\x80"), "ok");
        assert_eq!(ct(b"ok\x9B1"), "ok");
    }

    #[test]
    fn the_title_falls_back_from_net_wm_name_to_wm_name_to_the_class() {
        let class = WmClass::parse(b"xterm\0XTerm\0");
        assert_eq!(class.instance, "xterm");
        assert_eq!(class.application(), "XTerm");
        let name = |s: &str| Some(s.to_owned());
        assert_eq!(title(name("EWMH"), name("ICCCM"), &class), "EWMH");
        assert_eq!(title(None, name("ICCCM"), &class), "ICCCM");
        // Empty or blank counts as absent.
        assert_eq!(title(name(""), name("ICCCM"), &class), "ICCCM");
        assert_eq!(title(name(" "), None, &class), "XTerm");
        assert_eq!(title(None, None, &class), "XTerm");
        // No class: the instance; nothing at all: empty.
        let instance_only = WmClass::parse(b"tool\0\0");
        assert_eq!(instance_only.application(), "tool");
        assert_eq!(title(None, None, &instance_only), "tool");
        assert_eq!(title(None, None, &WmClass::parse(b"")), "");
        // WM_CLASS is Latin-1 like any STRING.
        assert_eq!(WmClass::parse(b"caf\xE9\0Caf\xE9\0").application(), "Café");
    }
}
