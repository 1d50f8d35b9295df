//! Computer-use figures on a private 1920×1080 Xvfb desktop with the witness window open:
//! in-process capture of the primary monitor alone (the baseline), the display list, capture +
//! JPEG q75, capture + PNG and the pointer overlay (medians of 30, interleaved); then through the test
//! platform with the real binary, the SCREENSHOT_REQUEST round trip (JPEG q75, median of 10:
//! the rate limit allows ten a minute) and the INPUT_ACTION mouse_move round trip (median of
//! 30) against a PING round trip.
//! Run with `cargo bench -p e2e --bench computer` after
//! `cargo build --release --workspace --bins` (it measures the binary next to it).

// Bench support: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

fn main() -> ExitCode {
    #[cfg(unix)]
    return bench::main();
    #[cfg(not(unix))]
    {
        eprintln!("computer bench: it needs an X server, so it runs on Linux only");
        ExitCode::FAILURE
    }
}

/// The X server, the witness window and the binary: Unix only.
#[cfg(unix)]
mod bench {
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use e2e::display::Desktop;
    use e2e::platform::{Platform, Shim, TOKEN, fresh_dir};
    use e2e::witness::Witness;
    use local_core::desktop::screen::{self, Encoding, Source};
    use serde_json::json;

    const LOCAL_ROUNDS: usize = 30;
    const SHOT_ROUNDS: usize = 10;
    const INPUT_ROUNDS: usize = 30;
    /// The bench re-runs itself with this argument inside the desktop's environment, since a
    /// process cannot safely change its own DISPLAY.
    const INNER: &str = "--capture-inner";

    pub(super) fn main() -> ExitCode {
        if std::env::args().any(|a| a == INNER) {
            inner();
            return ExitCode::SUCCESS;
        }
        let desktop = Desktop::start();
        let _witness = Witness::start(&desktop, "Bench witness");
        let output = desktop
            .command(std::env::current_exe().unwrap())
            .arg(INNER)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        println!();
        println!("computer bench (Xvfb 1920x1080, release build)");
        print!("{}", String::from_utf8_lossy(&output.stdout));

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (ping, shot, input) = runtime.block_on(through_the_shim(&desktop));
        println!("  PING round trip (baseline)           median {ping:>8.2} ms");
        println!(
            "  SCREENSHOT_REQUEST jpeg q75 round trip median {shot:>8.2} ms  ({:.1}x PING, {SHOT_ROUNDS} rounds)",
            shot / ping
        );
        println!(
            "  INPUT_ACTION mouse_move round trip   median {input:>8.2} ms  ({:.1}x PING, {INPUT_ROUNDS} rounds)",
            input / ping
        );
        ExitCode::SUCCESS
    }

    fn median(samples: &mut [f64]) -> f64 {
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }

    fn ms(since: Instant) -> f64 {
        since.elapsed().as_secs_f64() * 1000.0
    }

    /// The in-process variants, timed in turn within every round so that the machine's slow
    /// spells fall on all of them alike.
    #[derive(Clone, Copy)]
    enum Variant {
        /// Our capture of the primary monitor: the baseline.
        Capture,
        /// The display list every screenshot and input action starts with.
        Displays,
        Jpeg,
        Png,
        /// What include_cursor adds: asking X for the pointer and blending it.
        Pointer,
    }

    const VARIANTS: [Variant; 5] = [
        Variant::Capture,
        Variant::Displays,
        Variant::Jpeg,
        Variant::Png,
        Variant::Pointer,
    ];

    fn run(variant: Variant, shot: &mut screen::Capture) {
        let capture = || {
            let capture = screen::capture(Source::Monitor(0), false).unwrap();
            assert_eq!(capture.image.dimensions(), (1920, 1080));
            capture
        };
        let encoded = |encoding| {
            assert!(
                !screen::encode(&capture().image, encoding)
                    .unwrap()
                    .is_empty()
            )
        };
        match variant {
            Variant::Capture => drop(capture()),
            Variant::Displays => assert!(!screen::displays().unwrap().is_empty()),
            Variant::Jpeg => encoded(Encoding::Jpeg { quality: 75 }),
            Variant::Png => encoded(Encoding::Png),
            Variant::Pointer => assert!(screen::draw_cursor(shot).unwrap()),
        }
    }

    /// In-process figures, run inside the desktop's environment.
    fn inner() {
        let mut shot = screen::capture(Source::Monitor(0), false).unwrap();
        let mut samples = vec![Vec::new(); VARIANTS.len()];
        for _ in 0..LOCAL_ROUNDS {
            for (variant, times) in VARIANTS.iter().zip(&mut samples) {
                let started = Instant::now();
                run(*variant, &mut shot);
                times.push(ms(started));
            }
        }
        let [capture, displays, jpeg, png, pointer] =
            samples.iter_mut().map(|s| median(s)).collect::<Vec<_>>()[..]
        else {
            unreachable!("one median per variant")
        };
        println!("  capture 1920x1080 (baseline)         median {capture:>8.2} ms");
        println!("  display list                         median {displays:>8.2} ms");
        println!(
            "  capture + JPEG q75                   median {jpeg:>8.2} ms  ({:.2}x capture; target <= 40 ms)",
            jpeg / capture
        );
        println!(
            "  capture + PNG (fast)                 median {png:>8.2} ms  ({:.2}x capture)",
            png / capture
        );
        println!(
            "  pointer overlay (include_cursor)     median {pointer:>8.2} ms  ({:.3}x capture)",
            pointer / capture
        );
    }

    async fn through_the_shim(desktop: &Desktop) -> (f64, f64, f64) {
        let home = fresh_dir("computer-bench");
        let root = home.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let platform = Platform::bind().await;
        let args = platform.start_args(&root, "WARNING", &["--enable-computer-use"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut env: Vec<(&str, String)> = desktop.env();
        env.push(("AUTOGPT_SHIM_TOKEN", TOKEN.to_owned()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let shim = Shim::spawn(&home, &args, &env);
        let (mut conn, _) = platform.session(&["files", "computer_use"], |_| {}).await;

        let mut pings = Vec::new();
        for round in 0..INPUT_ROUNDS {
            let started = Instant::now();
            let reply = conn.call("PING", &format!("p{round}"), json!({})).await;
            assert_eq!(reply["type"], "PONG", "{reply}");
            pings.push(ms(started));
        }
        let mut shots = Vec::new();
        for round in 0..SHOT_ROUNDS {
            let started = Instant::now();
            let reply = conn
                .call(
                    "SCREENSHOT_REQUEST",
                    &format!("s{round}"),
                    json!({"quality": 75}),
                )
                .await;
            assert_eq!(reply["type"], "SCREENSHOT_RESPONSE", "{reply}");
            shots.push(ms(started));
        }
        let mut moves = Vec::new();
        for round in 0..INPUT_ROUNDS {
            let x = 200 + i64::try_from(round).unwrap() * 10;
            let started = Instant::now();
            let reply = conn
                .call(
                    "INPUT_ACTION",
                    &format!("m{round}"),
                    json!({"action": "mouse_move", "coordinate": [x, 300]}),
                )
                .await;
            assert_eq!(reply["type"], "ACK", "{reply}");
            moves.push(ms(started));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The shim goes first: it writes into its home until it is killed.
        drop(shim);
        let _ = std::fs::remove_dir_all(&home);
        (median(&mut pings), median(&mut shots), median(&mut moves))
    }
}
