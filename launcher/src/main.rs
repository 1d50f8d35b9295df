//! `msguide`: parses the command line and runs `start` on a single-threaded runtime.

use std::process::ExitCode;

use clap::Parser;
use msguide_launcher::{
    cli::{Cli, Command},
    job,
    paths::Os,
    start::{self, Context},
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Start(args) = cli.command;
    // Held until the launcher exits: the children die with the job, and so with the launcher.
    let _job = match job::contain() {
        Ok(job) => Some(job),
        Err(warning) => {
            eprintln!("msguide: {warning}");
            None
        }
    };
    // The siblings are looked for next to the real executable (a symlink to it is resolved).
    let own_dir = match std::env::current_exe() {
        Ok(exe) => exe.parent().map(std::path::Path::to_path_buf),
        Err(err) => {
            return fail(&format!(
                "cannot find the launcher's own executable ({}): start it by its full path",
                err.kind()
            ));
        }
    };
    let Some(own_dir) = own_dir else {
        return fail("cannot find the launcher's own directory");
    };
    // Two children and a few sockets: one thread is plenty.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return fail(&format!(
                "cannot start the runtime ({}): close some programs and try again",
                err.kind()
            ));
        }
    };
    let context = Context {
        own_dir,
        os: Os::CURRENT,
        vars: std::env::vars_os().collect(),
    };
    match runtime.block_on(start::run(&args, context)) {
        Ok(ended) => ExitCode::from(ended.exit_code()),
        Err(err) => fail(&err.to_string()),
    }
}

/// Prints the one line a refusal gets.
fn fail(message: &str) -> ExitCode {
    eprintln!("msguide: {message}");
    ExitCode::FAILURE
}
