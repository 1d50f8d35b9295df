//! `autogpt-shim-sandbox`: the launcher of a command confined by `--shell-sandbox`, shipped
//! beside `autogpt-shim`, which starts it in place of the command
//! ([`local_core::machine::sandbox`]): it confines itself and then becomes the command.
//!
//! A binary of its own rather than the connector re-executing itself: each confined command
//! starts it, and this one links only the sandbox (a few hundred KiB against the connector's
//! tens of MiB), so its start costs a fraction of the connector's. The connector starts the
//! next one ahead, confined and waiting on its stdin (`__sandbox-exec spare`), so a command's
//! request pays only the program's own start: that is what holds up the benchmark's
//! `EXECUTE_COMMAND [true]` median with `--shell-sandbox workspace` within 1.5 times `off`'s
//! (`cargo bench -p e2e --bench connector -- sandbox`; docs/connector.md).

use std::process::ExitCode;

use local_core::machine::sandbox::{self, Launched};

fn main() -> ExitCode {
    let Some(launched) = sandbox::launch_if_asked() else {
        eprintln!(
            "autogpt-shim-sandbox: this is the shell sandbox's launcher, which autogpt-shim starts for each confined command: run autogpt-shim instead"
        );
        return ExitCode::from(2);
    };
    match launched {
        Launched::Report(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Launched::Failed { message, code } => {
            eprintln!("autogpt-shim-sandbox: {message}");
            ExitCode::from(code)
        }
    }
}
