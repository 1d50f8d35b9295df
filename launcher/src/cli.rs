//! The command line: `msguide start [--port N] [--headless]`, parsed by clap.

use clap::{Args, Parser, Subcommand};

/// The port `start` uses without `--port`; the desktop client expects it.
pub const DEFAULT_PORT: u16 = 8765;
/// The lowest port `--port` accepts: the ones below are privileged.
pub const MIN_PORT: u16 = 1024;

/// Starts MSGuide on this computer: the local API on 127.0.0.1 with a fresh token, then the
/// desktop client.
#[derive(Debug, Parser)]
#[command(name = "msguide", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start msguide-api on 127.0.0.1 with a fresh token and, unless --headless, the desktop
    /// client; Ctrl-C or SIGTERM stops both.
    Start(StartArgs),
}

/// The options of `start`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StartArgs {
    /// Loopback port for the API (1024-65535). A busy port is refused; nothing holding it is
    /// stopped.
    #[arg(
        long,
        default_value_t = DEFAULT_PORT,
        value_parser = clap::value_parser!(u16).range(i64::from(MIN_PORT)..)
    )]
    pub port: u16,
    /// Run the API only and print its URL and token (valid until the launcher stops) instead
    /// of starting the desktop client.
    #[arg(long)]
    pub headless: bool,
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<StartArgs, clap::Error> {
        let cli = Cli::try_parse_from([&["msguide"], args].concat())?;
        let Command::Start(start) = cli.command;
        Ok(start)
    }

    #[test]
    fn defaults_to_8765_with_the_desktop() {
        assert_eq!(
            parse(&["start"]).unwrap(),
            StartArgs {
                port: 8765,
                headless: false
            }
        );
        assert_eq!(
            parse(&["start", "--headless", "--port", "9000"]).unwrap(),
            StartArgs {
                port: 9000,
                headless: true
            }
        );
    }

    #[test]
    fn ports_outside_1024_to_65535_are_refused() {
        for (port, accepted) in [
            ("0", false),
            ("80", false),
            ("1023", false),
            ("1024", true),
            ("65535", true),
            ("65536", false),
            ("-1", false),
            ("http", false),
        ] {
            let parsed = parse(&["start", "--port", port]);
            assert_eq!(parsed.is_ok(), accepted, "{port}");
            if let Err(err) = parsed {
                assert!(
                    matches!(
                        err.kind(),
                        ErrorKind::ValueValidation | ErrorKind::UnknownArgument
                    ),
                    "{port}: {:?}",
                    err.kind()
                );
            }
        }
        let refusal = parse(&["start", "--port", "80"]).unwrap_err().to_string();
        assert!(refusal.contains("1024..=65535"), "{refusal}");
    }

    #[test]
    fn a_subcommand_is_required() {
        assert!(Cli::try_parse_from(["msguide"]).is_err());
        assert!(Cli::try_parse_from(["msguide", "stop"]).is_err());
    }
}
