//! Bounded answers: every tool result's text stays within a budget of characters (100,000 by
//! default, `mcp --max-answer-chars`), so it fits a model's context.
//!
//! What is cut says so and says how to go on: a read is capped before it runs (a file of any
//! size reads in pages) and its answer gives `next_offset`; a listing is paged with `offset`
//! and its answer gives `next_offset`; a command's output keeps its head and tail with the
//! middle elided and a marker saying how much; any other answer's longest list is cut from
//! the end. Every cut adds a `note` sentence. The wire payloads are the connector's: only
//! this face adds `note` and `next_offset`.

use local_core::machine::files::{Encoding, FileLimits};
use serde_json::{Map, Value};

use crate::protocol::{FileEncoding, Message};

/// Characters kept free of content for the fields a cut adds (`note`, `next_offset`).
const NOTE_ROOM: usize = 400;

/// What a call's answer needs to be finished with, from its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Plan {
    /// Nothing beyond the budget.
    #[default]
    Plain,
    /// A read from `offset`; `capped` once the face lowered its length to the budget.
    Read { offset: u64, capped: bool },
    /// A listing page after the first `skip` entries.
    List { skip: u64 },
}

/// Shapes a call's message to the budget before it runs: a read's length is capped at what
/// the budget (and the configured read limit) holds, and a listing page asks for the entries
/// it skips too (the wire has no offset; its order is stable, sorted by name).
pub(super) fn shape(message: &mut Message, plan: &mut Plan, max_chars: usize, limits: &FileLimits) {
    match (message, plan) {
        (Message::FileRead(read), Plan::Read { capped, .. }) => {
            let base64 = read.encoding == FileEncoding::Base64;
            let room = u64::try_from(max_chars.saturating_sub(NOTE_ROOM)).unwrap_or(u64::MAX);
            let (budget, encoding) = if base64 {
                (room / 4 * 3, Encoding::Base64)
            } else {
                (room, Encoding::Text)
            };
            let cap = budget.min(limits.effective_read_limit(encoding)).max(1);
            if read.length.is_none_or(|length| length > cap) {
                read.length = Some(cap);
                *capped = true;
            }
        }
        (Message::FileList(list), Plan::List { skip }) => {
            list.max_entries = list.max_entries.saturating_add(*skip);
        }
        _ => {}
    }
}

/// Bounds a successful reply's payload to `max_chars` characters of JSON text, saying what
/// was cut and how to go on.
pub(super) fn bound(payload: &mut Value, plan: Plan, max_chars: usize) {
    let Value::Object(fields) = payload else {
        return;
    };
    match plan {
        Plan::Read { offset, capped } => read(fields, offset, capped, max_chars),
        Plan::List { skip } => listing(fields, skip, max_chars),
        Plan::Plain if fields.contains_key("exit_code") => command(fields, max_chars),
        Plan::Plain => longest_list(fields, max_chars),
    }
}

/// A read: content cut to the budget (text at a character, base64 at a whole group of four),
/// and when the file goes on past the answer, `next_offset` and a note.
fn read(fields: &mut Map<String, Value>, offset: u64, capped: bool, max_chars: usize) {
    let Some(Value::String(content)) = fields.remove("content") else {
        return;
    };
    let base64 = fields.get("encoding").and_then(Value::as_str) == Some("base64");
    let size_bytes = fields
        .get("size_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let goes_on = fields.get("truncated").and_then(Value::as_bool) == Some(true);
    // `"content":"..."` and its comma around the text.
    let room = max_chars.saturating_sub(answer_len(fields) + 13 + NOTE_ROOM);
    let cut = json_len(&content) > room;
    if !(cut || capped && goes_on) {
        fields.insert("content".to_owned(), Value::String(content));
        return;
    }
    let mut kept = match (cut, base64) {
        (true, true) => content[..room.min(content.len()) / 4 * 4].to_owned(),
        (true, false) => head(&content, room).to_owned(),
        (false, _) => content,
    };
    // A text page that ends inside a character shows its bytes as one U+FFFD: that character
    // is read whole on the next page (a U+FFFD the file holds is too, the same bytes again).
    if !base64 && kept.ends_with('\u{FFFD}') && kept.chars().nth(1).is_some() {
        kept.pop();
    }
    // Text pages count the bytes of their UTF-8 text, exact while the file is valid UTF-8.
    let consumed = match (base64, cut) {
        (true, true) => kept.len() as u64 / 4 * 3,
        (true, false) => size_bytes,
        (false, _) => (kept.len() as u64).min(size_bytes),
    };
    let next = offset.saturating_add(consumed);
    let mut note = format!(
        "The file goes on past this answer, which stops within {max_chars} characters: call read_file again with offset {next} to read on."
    );
    if kept.contains('\u{FFFD}') {
        note.push_str(
            " Where the file is not UTF-8 text, read it with encoding base64 for its exact bytes.",
        );
    }
    fields.insert("content".to_owned(), Value::String(kept));
    fields.insert("size_bytes".to_owned(), consumed.into());
    fields.insert("truncated".to_owned(), true.into());
    fields.insert("next_offset".to_owned(), next.into());
    fields.insert("note".to_owned(), note.into());
}

/// A listing page: the skipped entries dropped, the rest cut to the budget, and when more
/// entries follow, `next_offset` and a note.
fn listing(fields: &mut Map<String, Value>, skip: u64, max_chars: usize) {
    let Some(Value::Array(mut entries)) = fields.remove("entries") else {
        return;
    };
    let skipped = usize::try_from(skip)
        .unwrap_or(usize::MAX)
        .min(entries.len());
    entries.drain(..skipped);
    let room = max_chars.saturating_sub(answer_len(fields) + NOTE_ROOM);
    let cut = keep_within(&mut entries, room);
    let more = cut || fields.get("truncated").and_then(Value::as_bool) == Some(true);
    let next = skip.saturating_add(entries.len() as u64);
    fields.insert("entries".to_owned(), Value::Array(entries));
    if more {
        fields.insert("truncated".to_owned(), true.into());
        fields.insert("next_offset".to_owned(), next.into());
        let why = if cut {
            format!("this answer stops within {max_chars} characters")
        } else {
            "max_entries was reached".to_owned()
        };
        fields.insert(
            "note".to_owned(),
            format!("More entries follow ({why}): call list_directory again with offset {next} for the next page (a listing pages through its first 10,000 entries; narrow a larger one with glob or a subfolder).").into(),
        );
    }
}

/// A command's output over the budget: each stream over its share keeps its head and tail,
/// with a marker where the middle was, and the note says how much went.
fn command(fields: &mut Map<String, Value>, max_chars: usize) {
    let text = |fields: &Map<String, Value>, name: &str| {
        fields
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (stdout, stderr) = (text(fields, "stdout"), text(fields, "stderr"));
    let (out_len, err_len) = (json_len(&stdout), json_len(&stderr));
    let total = answer_len(fields);
    if total <= max_chars {
        return;
    }
    let room = (out_len + err_len).saturating_sub(total - max_chars + NOTE_ROOM);
    // A stream within half the room keeps it all; the other has the rest.
    let (out_share, err_share) = if out_len <= room / 2 {
        (out_len, room - out_len)
    } else if err_len <= room / 2 {
        (room - err_len, err_len)
    } else {
        (room / 2, room - room / 2)
    };
    let mut said = Vec::new();
    for (name, stream, share) in [("stdout", stdout, out_share), ("stderr", stderr, err_share)] {
        if let Some((kept, elided)) = elide(&stream, share) {
            fields.insert(name.to_owned(), kept.into());
            said.push(format!(
                "{name} keeps its start and end, {elided} characters in the middle elided"
            ));
        }
    }
    fields.insert("output_truncated".to_owned(), true.into());
    fields.insert(
        "note".to_owned(),
        format!(
            "The output is longer than this answer's {max_chars} characters: {} (marked where they were).",
            said.join("; ")
        )
        .into(),
    );
}

/// `text` within `share` JSON characters: its head and tail around a marker, and how many
/// characters went; `None` when it fits.
fn elide(text: &str, share: usize) -> Option<(String, usize)> {
    if json_len(text) <= share {
        return None;
    }
    // The marker's own length, with room for any count.
    let room = share.saturating_sub(48) / 2;
    let start = head(text, room);
    let end = tail(&text[start.len()..], room);
    let elided = text.chars().count() - start.chars().count() - end.chars().count();
    Some((
        format!("{start}\n[... {elided} characters elided ...]\n{end}"),
        elided,
    ))
}

/// Any other answer over the budget: its longest list is cut from the end (a window list, an
/// accessibility tree), else its longest text (the clipboard), and the note says so.
fn longest_list(fields: &mut Map<String, Value>, max_chars: usize) {
    let total = answer_len(fields);
    if total <= max_chars {
        return;
    }
    let longest = |arrays: bool| {
        fields
            .iter()
            .filter(|(_, value)| {
                if arrays {
                    value.is_array()
                } else {
                    value.is_string()
                }
            })
            .max_by_key(|(_, value)| value.to_string().len())
            .map(|(name, _)| name.clone())
    };
    let Some(name) = longest(true).or_else(|| longest(false)) else {
        return;
    };
    let Some(value) = fields.remove(&name) else {
        return;
    };
    let room = max_chars.saturating_sub(answer_len(fields) + name.len() + 4 + NOTE_ROOM);
    let what = match value {
        Value::Array(mut items) => {
            keep_within(&mut items, room);
            let kept = items.len();
            fields.insert(name.clone(), Value::Array(items));
            if fields.contains_key("truncated") {
                fields.insert("truncated".to_owned(), true.into());
            }
            format!("only the first {kept} items of `{name}` are given")
        }
        Value::String(text) => {
            let kept = head(&text, room.saturating_sub(2)).to_owned();
            fields.insert(name.clone(), kept.into());
            format!("`{name}` is cut at {room} characters")
        }
        other => {
            fields.insert(name.clone(), other);
            return;
        }
    };
    fields.insert(
        "note".to_owned(),
        format!("This answer stops within {max_chars} characters: {what}.").into(),
    );
}

/// Drops items from the end until the list's JSON fits `room` characters; whether any went.
fn keep_within(items: &mut Vec<Value>, room: usize) -> bool {
    let sizes: Vec<usize> = items
        .iter()
        .map(|item| char_len(&item.to_string()) + 1)
        .collect();
    let mut used = 2;
    let fitting = sizes
        .iter()
        .take_while(|size| {
            used += **size;
            used <= room
        })
        .count();
    let cut = fitting < items.len();
    items.truncate(fitting);
    cut
}

/// The characters of the payload's JSON text as it stands.
fn answer_len(fields: &Map<String, Value>) -> usize {
    char_len(&Value::Object(fields.clone()).to_string())
}

fn char_len(text: &str) -> usize {
    text.chars().count()
}

/// The characters `text` takes inside a JSON string, as serde_json writes it.
fn json_len(text: &str) -> usize {
    text.chars().map(escaped_len).sum()
}

const fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        '\0'..='\u{1f}' => 6,
        _ => 1,
    }
}

/// The longest start of `text` within `room` JSON characters.
fn head(text: &str, room: usize) -> &str {
    let mut used = 0;
    let end = text
        .char_indices()
        .find(|(_, c)| {
            used += escaped_len(*c);
            used > room
        })
        .map_or(text.len(), |(at, _)| at);
    &text[..end]
}

/// The longest end of `text` within `room` JSON characters.
fn tail(text: &str, room: usize) -> &str {
    let mut used = 0;
    let start = text
        .char_indices()
        .rev()
        .find(|(_, c)| {
            used += escaped_len(*c);
            used > room
        })
        .map_or(0, |(at, c)| at + c.len_utf8());
    &text[start..]
}

#[cfg(test)]
mod tests;
