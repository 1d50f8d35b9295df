//! A command's output: both pipes drained into one shared budget (first come, first kept), then
//! trimmed to make room for the truncation marker without splitting a character.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::OUTPUT_TRUNCATED_MARKER;

/// Size of one read from a child's pipe, as in the reference.
const READ_CHUNK: usize = 64 * 1024;

/// What was kept of one stream.
#[derive(Debug, Default)]
pub(super) struct Capture {
    pub(super) bytes: Vec<u8>,
    /// Bytes of this stream were dropped (so its end may split a character).
    pub(super) cut: bool,
}

/// Reads `pipe` to its end, keeping what the shared `remaining` budget allows.
pub(super) async fn drain<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    remaining: &AtomicUsize,
    capture: &mut Capture,
) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0_u8; READ_CHUNK];
    loop {
        let read = match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let before = remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.saturating_sub(read))
            })
            .unwrap_or_else(|left| left);
        let kept = before.min(read);
        capture.bytes.extend_from_slice(&buf[..kept]);
        if kept < read {
            capture.cut = true;
        }
    }
}

/// Makes room for the marker within `budget` when output was dropped, trimming stdout first,
/// then stderr. Returns the bytes of both streams and whether output was truncated.
pub(super) fn fit_output(
    mut stdout: Capture,
    mut stderr: Capture,
    budget: usize,
) -> (Vec<u8>, Vec<u8>, bool) {
    if !stdout.cut && !stderr.cut {
        return (stdout.bytes, stderr.bytes, false);
    }
    let marker = OUTPUT_TRUNCATED_MARKER.as_bytes();
    let marker = &marker[..marker.len().min(budget)];
    let room = budget - marker.len();
    let mut excess = (stdout.bytes.len() + stderr.bytes.len()).saturating_sub(room);
    for capture in [&mut stdout, &mut stderr] {
        let trim = excess.min(capture.bytes.len());
        if trim > 0 {
            capture.bytes.truncate(capture.bytes.len() - trim);
            capture.cut = true;
            excess -= trim;
        }
        if capture.cut {
            drop_partial_char(&mut capture.bytes);
        }
    }
    stderr.bytes.extend_from_slice(marker);
    (stdout.bytes, stderr.bytes, true)
}

/// Drops a UTF-8 sequence left incomplete by a cut, so decoding does not add a replacement
/// character that was not in the output.
pub(super) fn drop_partial_char(bytes: &mut Vec<u8>) {
    let tail_start = bytes.len().saturating_sub(4);
    let Some(lead) = (tail_start..bytes.len())
        .rev()
        .find(|&i| bytes[i] & 0xC0 != 0x80)
    else {
        return;
    };
    let expected = match bytes[lead] {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    };
    if bytes.len() - lead < expected {
        bytes.truncate(lead);
    }
}
