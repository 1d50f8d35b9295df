//! The committed OpenAPI document against the real `msguide-api`, checked by Schemathesis: every
//! phase (examples, coverage, fuzzing, stateful through the document's links) and every check
//! must pass, so a client generated from the document handles every answer the service gives.
//!
//! Schemathesis comes from the venv `scripts/schemathesis-env` prepares (`scripts/test` does it
//! and exports `MSGUIDE_TEST_SCHEMATHESIS`); without it this test fails with directions.
//! The hooks in `tests/fixtures/schemathesis_hooks.py` fill in the rules JSON Schema cannot state
//! (freshness, boxes inside the window, a context of the request's own session, unique ids, a
//! real PNG) for requests generated as valid, and drop one finding only: an integer field sent
//! as `1.0`, which the contract refuses as the original does and JSON Schema cannot express.
//!
//! The run is bounded for CI (fixed seed, `MSGUIDE_SCHEMATHESIS_MAX_EXAMPLES`, default 100 per
//! operation); docs/api.md says how to run it longer or with other seeds.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::support::{TOKEN, free_port, temp_dir};

const SCHEMATHESIS_VAR: &str = "MSGUIDE_TEST_SCHEMATHESIS";

/// The `st` command `scripts/schemathesis-env` installed; panics with directions when missing.
fn schemathesis() -> PathBuf {
    e2e::prepared(
        SCHEMATHESIS_VAR,
        "this test runs Schemathesis from the venv scripts/schemathesis-env prepares",
        "scripts/schemathesis-env",
    )
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The real binary on a free port, with a token and the audit on (so its route answers 200);
/// killed and reaped when dropped.
struct Api {
    child: std::process::Child,
    port: u16,
}

impl Api {
    fn start(stderr: &Path) -> Self {
        let port = free_port();
        let child = Command::new(e2e::platform::binary("msguide-api"))
            .args(["--port", &port.to_string()])
            .env("MSGUIDE_LOCAL_TOKEN", TOKEN)
            .env("MSGUIDE_ENABLE_AUDIT", "true")
            .env_remove("MSGUIDE_MODE")
            .env_remove("MSGUIDE_GUIDANCE_PROVIDER")
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "msguide-api never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_document_holds_for_every_answer_of_the_real_service() {
    let st = schemathesis();
    let dir = temp_dir("schemathesis");
    let api = Api::start(&dir.join("api.log"));
    let max_examples =
        std::env::var("MSGUIDE_SCHEMATHESIS_MAX_EXAMPLES").unwrap_or_else(|_| "100".to_owned());
    let seed = std::env::var("MSGUIDE_SCHEMATHESIS_SEED").unwrap_or_else(|_| "20260101".to_owned());
    let dropped = dir.join("dropped.jsonl");
    let started = Instant::now();
    let output = Command::new(&st)
        .arg("--config-file")
        .arg(fixtures().join("schemathesis.toml"))
        .arg("run")
        .arg(format!("http://127.0.0.1:{}/openapi.json", api.port))
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--checks", "all"])
        .args(["--max-examples", &max_examples, "--seed", &seed])
        .args(["--workers", "1", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
        .env("PYTHONPATH", fixtures())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MSGUIDE_ST_DROPPED_LOG", &dropped)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    drop(api);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!("{stdout}\n{stderr}");
    let dropped = std::fs::read_to_string(&dropped).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    // The summary, for the test log: operations, phases, cases generated, failures.
    println!("{report}");
    println!("schemathesis ran for {:.1} s", elapsed.as_secs_f64());
    assert!(
        output.status.success(),
        "Schemathesis found failures (exit {:?}); see the report above",
        output.status.code()
    );
    for finding in [
        "Undocumented status code",
        "Response violates schema",
        "Server error",
    ] {
        assert!(!report.contains(finding), "{finding} in:\n{report}");
    }
    for phase in ["Examples", "Coverage", "Fuzzing", "Stateful"] {
        assert!(
            report.contains(&format!("✅  {phase}")),
            "{phase} did not pass:\n{report}"
        );
    }
    assert!(
        report.contains("Tested: 10"),
        "every operation is tested:\n{report}"
    );
    assert!(report.contains(" passed,"), "no case counts in:\n{report}");
    // Every dropped finding is the integral-float one, and no other.
    for line in dropped.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        for item in entry["detail"].as_array().unwrap() {
            assert!(
                matches!(item["type"].as_str(), Some("int_type" | "int_parsing")),
                "dropped more than the integral-float finding: {line}"
            );
        }
    }
}
