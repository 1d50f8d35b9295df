//! The budget's cuts: each answer within its characters, and each continuation exact.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::protocol::{FileListPayload, FileReadPayload};

fn text_len(value: &Value) -> usize {
    char_len(&value.to_string())
}

fn read_answer(content: &str, size_bytes: u64, truncated: bool) -> Value {
    json!({"content": content, "encoding": "utf-8", "size_bytes": size_bytes, "truncated": truncated})
}

#[test]
fn a_long_text_read_is_cut_at_a_character_and_says_where_to_go_on() {
    let line = "ab\"c\né\n";
    let content = line.repeat(40_000);
    let mut answer = read_answer(&content, content.len() as u64, true);
    bound(
        &mut answer,
        Plan::Read {
            offset: 10,
            capped: true,
        },
        10_000,
    );
    assert!(text_len(&answer) <= 10_000, "{}", text_len(&answer));
    let kept = answer["content"].as_str().unwrap();
    assert!(
        kept.len() > 5_000 && content.starts_with(kept),
        "{}",
        kept.len()
    );
    assert_eq!(answer["next_offset"], 10 + kept.len() as u64);
    assert_eq!(answer["size_bytes"], kept.len() as u64);
    assert_eq!(answer["truncated"], true);
    assert!(
        answer["note"]
            .as_str()
            .unwrap()
            .contains(&format!("offset {}", 10 + kept.len()))
    );
}

#[test]
fn a_page_that_ends_inside_a_character_reads_it_whole_next_time() {
    // "aé" read with length 2: the second byte of é is on the next page.
    let mut answer = read_answer("a\u{FFFD}", 2, true);
    bound(
        &mut answer,
        Plan::Read {
            offset: 0,
            capped: true,
        },
        10_000,
    );
    assert_eq!(answer["content"], "a");
    assert_eq!(answer["next_offset"], 1);
    assert!(!answer["note"].as_str().unwrap().contains("base64"));
    // Three bytes of a four-byte character also read as one U+FFFD, of three bytes.
    let mut answer = read_answer("ab\u{FFFD}", 5, true);
    bound(
        &mut answer,
        Plan::Read {
            offset: 100,
            capped: true,
        },
        10_000,
    );
    assert_eq!(
        (answer["content"].as_str(), answer["next_offset"].as_u64()),
        (Some("ab"), Some(102))
    );
}

#[test]
fn a_read_that_fits_is_untouched() {
    let original = read_answer("short", 5, false);
    let mut answer = original.clone();
    bound(
        &mut answer,
        Plan::Read {
            offset: 0,
            capped: true,
        },
        10_000,
    );
    assert_eq!(answer, original);
    // The client's own length, not the face's cap: the wire answer as it is.
    let original = read_answer("short", 5, true);
    let mut answer = original.clone();
    bound(
        &mut answer,
        Plan::Read {
            offset: 0,
            capped: false,
        },
        10_000,
    );
    assert_eq!(answer, original);
}

#[test]
fn a_base64_read_is_cut_at_a_group_of_four() {
    let content = "QUJD".repeat(10_000);
    let mut answer =
        json!({"content": content, "encoding": "base64", "size_bytes": 30_000, "truncated": false});
    bound(
        &mut answer,
        Plan::Read {
            offset: 3,
            capped: false,
        },
        5_000,
    );
    assert!(text_len(&answer) <= 5_000);
    let kept = answer["content"].as_str().unwrap().len() as u64;
    assert_eq!(kept % 4, 0);
    assert_eq!(answer["next_offset"], 3 + kept / 4 * 3);
}

#[test]
fn a_read_is_capped_before_it_runs() {
    let limits = FileLimits::for_max_file_size(10 * 1024 * 1024);
    let read = |length, encoding| {
        let mut message = Message::FileRead(FileReadPayload {
            path: "a".to_owned(),
            encoding,
            format: crate::protocol::FileFormat::Text,
            offset: 0,
            length,
        });
        let mut plan = Plan::Read {
            offset: 0,
            capped: false,
        };
        shape(&mut message, &mut plan, 100_000, &limits);
        match message {
            Message::FileRead(read) => (read.length, plan),
            other => panic!("{other:?}"),
        }
    };
    let capped = Plan::Read {
        offset: 0,
        capped: true,
    };
    assert_eq!(read(None, FileEncoding::Utf8), (Some(99_600), capped));
    assert_eq!(read(None, FileEncoding::Base64), (Some(74_700), capped));
    let own = Plan::Read {
        offset: 0,
        capped: false,
    };
    assert_eq!(read(Some(10), FileEncoding::Utf8), (Some(10), own));
    // Under a smaller configured limit, the limit: a big file reads in pages, never FILE_TOO_LARGE.
    let small = FileLimits::for_max_file_size(4096);
    let mut message = Message::FileRead(FileReadPayload {
        path: "a".to_owned(),
        encoding: FileEncoding::Utf8,
        format: crate::protocol::FileFormat::Text,
        offset: 0,
        length: None,
    });
    shape(
        &mut message,
        &mut Plan::Read {
            offset: 0,
            capped: false,
        },
        100_000,
        &small,
    );
    assert!(matches!(message, Message::FileRead(read) if read.length == Some(4096)));
}

fn entries(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"name": format!("f{i:05}"), "path": format!("/root/f{i:05}"), "is_file": true, "is_dir": false, "is_symlink": false, "size_bytes": 1, "mtime": 1.5}))
        .collect()
}

#[test]
fn a_listing_pages_with_offset() {
    let mut message = Message::FileList(FileListPayload {
        path: ".".to_owned(),
        glob: None,
        recursive: false,
        include_hidden: false,
        max_entries: 100,
    });
    shape(
        &mut message,
        &mut Plan::List { skip: 250 },
        100_000,
        &FileLimits::for_max_file_size(1),
    );
    assert!(matches!(message, Message::FileList(list) if list.max_entries == 350));

    let all = entries(350);
    let mut answer = json!({"entries": all, "truncated": true});
    bound(&mut answer, Plan::List { skip: 250 }, 100_000);
    let page = answer["entries"].as_array().unwrap();
    assert_eq!(page.len(), 100);
    assert_eq!(page[0]["name"], "f00250");
    assert_eq!(answer["next_offset"], 350);

    // Over the budget: cut, with the next page where the cut is.
    let mut answer = json!({"entries": entries(1000), "truncated": false});
    bound(&mut answer, Plan::List { skip: 0 }, 20_000);
    assert!(text_len(&answer) <= 20_000);
    let kept = answer["entries"].as_array().unwrap().len();
    assert!(kept > 50 && kept < 1000, "{kept}");
    assert_eq!(answer["next_offset"], kept as u64);
    assert_eq!(answer["truncated"], true);

    // The last page: no continuation.
    let mut answer = json!({"entries": entries(3), "truncated": false});
    bound(&mut answer, Plan::List { skip: 0 }, 20_000);
    assert!(answer.get("next_offset").is_none() && answer.get("note").is_none());
}

#[test]
fn command_output_keeps_its_head_and_tail() {
    let stdout: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
    let mut answer = json!({"stdout": stdout, "stderr": "warning\n", "exit_code": 0, "timed_out": false, "duration_seconds": 0.5, "output_truncated": false});
    bound(&mut answer, Plan::Plain, 30_000);
    assert!(text_len(&answer) <= 30_000, "{}", text_len(&answer));
    let kept = answer["stdout"].as_str().unwrap();
    assert!(kept.starts_with("line 0\nline 1\n"), "{}", &kept[..20]);
    assert!(kept.ends_with("line 49999\n"));
    assert!(kept.contains(" characters elided ...]\n"));
    assert_eq!(
        answer["stderr"], "warning\n",
        "a short stream is kept whole"
    );
    assert_eq!(answer["output_truncated"], true);
    assert!(
        answer["note"]
            .as_str()
            .unwrap()
            .contains("stdout keeps its start and end")
    );
    let elided: usize = kept
        .split("[... ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap();
    let marker = format!("\n[... {elided} characters elided ...]\n");
    assert_eq!(
        kept.chars().count() - marker.chars().count() + elided,
        stdout.chars().count(),
        "the marker counts exactly what went"
    );
}

#[test]
fn another_answer_cuts_its_longest_list() {
    let windows: Vec<Value> = (0..2000)
        .map(|i| json!({"window_id": format!("win_{i}"), "title": "a window title", "bounds": [0, 0, 10, 10]}))
        .collect();
    let mut answer = json!({"windows": windows, "truncated": false});
    bound(&mut answer, Plan::Plain, 10_000);
    assert!(text_len(&answer) <= 10_000);
    assert_eq!(answer["truncated"], true);
    assert!(
        answer["note"]
            .as_str()
            .unwrap()
            .contains("items of `windows`")
    );
    let mut clipboard =
        json!({"format": "text", "content": "x".repeat(50_000), "size_bytes": 50_000});
    bound(&mut clipboard, Plan::Plain, 10_000);
    assert!(text_len(&clipboard) <= 10_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn json_len_is_serde_jsons(text in "\\PC*|[\\x00-\\x1f\"\\\\a-z\u{e9}\u{1F600}]{0,64}") {
        let expected = json_len(&text) + 2;
        prop_assert_eq!(expected, char_len(&Value::String(text).to_string()));
    }

    #[test]
    fn every_read_answer_fits(text in "[\\x00-\\x1f\"\\\\a-z\u{e9}\u{1F600}]{0,3000}", max in 2_000_usize..4_000, capped: bool) {
        let mut answer = read_answer(&text, text.len() as u64, capped);
        bound(&mut answer, Plan::Read { offset: 7, capped }, max);
        prop_assert!(text_len(&answer) <= max);
        let kept = answer["content"].as_str().unwrap();
        prop_assert!(text.starts_with(kept));
        if let Some(next) = answer["next_offset"].as_u64() {
            prop_assert_eq!(next, 7 + kept.len() as u64);
        }
    }

    #[test]
    fn every_command_answer_fits(out in "[\\x00-\\x1f\"a-z\u{e9}]{0,6000}", err in "[a-z\n]{0,6000}", max in 2_000_usize..6_000) {
        let mut answer = json!({"stdout": out, "stderr": err, "exit_code": 1, "timed_out": false, "duration_seconds": 0.1, "output_truncated": false});
        bound(&mut answer, Plan::Plain, max);
        prop_assert!(text_len(&answer) <= max, "{} > {}", text_len(&answer), max);
    }
}
