//! `autogpt-shim doctor`: the start-up checks of [`crate::preflight`] (the ones `start` and
//! `install` run), printed one per line as `[OK  ] label  detail` (or `WARN`, `FAIL`,
//! `INFO`) with a summary; exit 78 when any check fails (shim-reference-behaviour.md
//! section 16). Every problem is listed, not only the first.

use std::io::{self, Write};

use crate::preflight::{self, Finding, Level};

/// Exit code when a blocking check failed (the reference's preflight code).
pub const EXIT_BLOCKED: u8 = 78;

/// Prints the findings, one line each, and a summary; returns 0, or [`EXIT_BLOCKED`] when any
/// failed (1 if the report itself cannot be printed).
pub fn doctor(inputs: &preflight::Inputs, out: &mut dyn Write) -> u8 {
    report(&preflight::checks(inputs), out)
}

/// Prints `findings` as [`doctor`] does.
pub fn report(findings: &[Finding], out: &mut dyn Write) -> u8 {
    let printed = (|| -> io::Result<usize> {
        for finding in findings {
            writeln!(
                out,
                "{} {}  {}",
                finding.level.marker(),
                finding.label,
                finding.detail
            )?;
        }
        let failed = findings.iter().filter(|f| f.level == Level::Fail).count();
        if failed == 0 {
            writeln!(out, "no blocking problems: the daemon can start")?;
        } else {
            writeln!(
                out,
                "{failed} blocking {}: fix {} before starting the daemon (`start` refuses until then)",
                if failed == 1 { "problem" } else { "problems" },
                if failed == 1 { "it" } else { "them" }
            )?;
        }
        Ok(failed)
    })();
    match printed {
        Ok(0) => 0,
        Ok(_) => EXIT_BLOCKED,
        Err(_) => 1,
    }
}
