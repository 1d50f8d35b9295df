//! LOCAL_LLM_COMPLETION with a REAL local model (llama.cpp's server with SmolLM2-135M, see
//! `e2e::real_model`): tokens per second and time to first chunk through the connector
//! (the real `autogpt-shim`, streamed, over the test platform's WebSocket) against calling the
//! same server directly with `local_core::llm::LlmClient::chat_stream`, and the ratio.
//!
//! Needs the environment `scripts/test` prepares and the binaries built in the bench profile:
//!
//! ```sh
//! eval "$(scripts/model-env)"
//! cargo build --release --workspace --bins && cargo bench -p e2e --bench llm
//! ```
//!
//! Both paths send the same request at temperature 0, so the model generates the same tokens;
//! the rounds alternate between the paths so that load on the machine falls on both alike.
//! After one unmeasured round per path the prompt is in llama.cpp's cache, so the time to the
//! first chunk is one token's generation plus each path's own overhead.

// Bench support: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use e2e::{
    platform::{Conn, Platform, Shim, TOKEN, fresh_dir},
    real_model::ModelServer,
};
use local_core::llm::{
    AuthHeader, BackendConfig, BackendKind, ChatMessage, ChatRequest, LlmClient,
};
use serde_json::json;

const MAX_TOKENS: u32 = 64;
const ROUNDS: usize = 5;
const SYSTEM: &str = "You are a helpful assistant.";
const PROMPT: &str = "Write a short story about a lighthouse keeper and a storm.";

/// One completion as the caller saw it.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// From sending the request to the first non-empty text.
    first_chunk: Duration,
    /// From sending the request to the complete answer.
    total: Duration,
    /// Generated tokens, as the backend counted them.
    tokens: u64,
}

impl Round {
    fn tokens_per_second(self) -> f64 {
        self.tokens as f64 / self.total.as_secs_f64()
    }
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("llm bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run());
    ExitCode::SUCCESS
}

async fn run() {
    // Fails with directions when scripts/test's environment is missing.
    let model = ModelServer::start().await;
    let home = fresh_dir("llm-bench");
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let platform = Platform::bind().await;
    let shim = start_shim(&home, &root, &platform, model.base_url());
    let (mut conn, hello) = platform.session(&["local_llm"], |_| {}).await;
    assert_eq!(
        hello["payload"]["local_llm_models"],
        json!([model.model()]),
        "{hello}"
    );
    let client = LlmClient::new(BackendConfig {
        kind: BackendKind::OpenAiCompatible,
        base_url: model.base_url().to_owned(),
        api_key: None,
        auth_header: AuthHeader::Bearer,
        connect_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(120),
        list_timeout: Duration::from_secs(5),
    })
    .unwrap();

    // One unmeasured round each: the prompt lands in the server's cache for both paths.
    through_connector(&mut conn, model.model(), "warm").await;
    directly(&client, model.model()).await;
    let mut via = Vec::new();
    let mut direct = Vec::new();
    for round in 0..ROUNDS {
        via.push(through_connector(&mut conn, model.model(), &format!("r{round}")).await);
        direct.push(directly(&client, model.model()).await);
    }
    conn.close(1000).await;
    drop(shim);
    let _ = std::fs::remove_dir_all(&home);

    let tps = |rounds: &[Round]| median_f64(rounds.iter().map(|r| r.tokens_per_second()));
    let ttfc = |rounds: &[Round]| median_f64(rounds.iter().map(|r| ms(r.first_chunk)));
    let (via_tps, direct_tps) = (tps(&via), tps(&direct));
    let (via_ttfc, direct_ttfc) = (ttfc(&via), ttfc(&direct));
    println!();
    println!(
        "llm bench: {} via llama.cpp (xllamacpp), max_tokens {MAX_TOKENS}, temperature 0, \
         {ROUNDS} rounds each, medians",
        model.model()
    );
    println!(
        "  {:<28} {:>10} {:>14} {:>12}",
        "path", "tokens/s", "first chunk", "tokens"
    );
    for (name, rounds, tps, ttfc) in [
        ("connector (LOCAL_LLM)", &via, via_tps, via_ttfc),
        ("direct (LlmClient)", &direct, direct_tps, direct_ttfc),
    ] {
        let tokens = median_f64(rounds.iter().map(|r| r.tokens as f64));
        println!("  {name:<28} {tps:>10.1} {ttfc:>11.1} ms {tokens:>12.0}");
    }
    println!(
        "  overhead ratio (direct tokens/s / connector tokens/s): {:.3}; time to first chunk \
         +{:.1} ms ({:.2}x)",
        direct_tps / via_tps,
        via_ttfc - direct_ttfc,
        via_ttfc / direct_ttfc
    );
}

fn start_shim(
    home: &std::path::Path,
    root: &std::path::Path,
    platform: &Platform,
    backend: &str,
) -> Shim {
    let args = platform.start_args(root, "WARNING", &["--enable-local-llm"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Shim::spawn(
        home,
        &args,
        &[
            ("AUTOGPT_SHIM_TOKEN", TOKEN),
            ("AUTOGPT_SHIM_OLLAMA_URL", backend),
            ("AUTOGPT_SHIM_LOCAL_LLM_BACKEND", "openai-compatible"),
        ],
    )
}

async fn through_connector(conn: &mut Conn, model: &str, id: &str) -> Round {
    let payload = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT},
        ],
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "stream": true,
    });
    let started = Instant::now();
    conn.request("LOCAL_LLM_COMPLETION", id, payload).await;
    let mut first_chunk = None;
    loop {
        let frame = conn.recv().await;
        assert_eq!(frame["id"], id, "{frame}");
        match frame["type"].as_str().unwrap() {
            "LOCAL_LLM_COMPLETION_CHUNK" => {
                if first_chunk.is_none() && frame["payload"]["delta"] != "" {
                    first_chunk = Some(started.elapsed());
                }
            }
            "LOCAL_LLM_COMPLETION_RESPONSE" => {
                return Round {
                    first_chunk: first_chunk.expect("no text chunk"),
                    total: started.elapsed(),
                    tokens: frame["payload"]["tokens"]["completion"].as_u64().unwrap(),
                };
            }
            other => panic!("unexpected {other}: {frame}"),
        }
    }
}

async fn directly(client: &LlmClient, model: &str) -> Round {
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![
            ChatMessage {
                role: "system".to_owned(),
                content: SYSTEM.to_owned(),
            },
            ChatMessage {
                role: "user".to_owned(),
                content: PROMPT.to_owned(),
            },
        ],
        max_tokens: MAX_TOKENS,
        temperature: 0.0,
        // The connector sends the same default when the payload has none.
        top_p: 1.0,
    };
    let started = Instant::now();
    let mut first_chunk = None;
    let completion = client
        .chat_stream(&request, |_| {
            first_chunk.get_or_insert_with(|| started.elapsed());
        })
        .await
        .unwrap();
    Round {
        first_chunk: first_chunk.expect("no text delta"),
        total: started.elapsed(),
        tokens: completion.tokens.completion.unwrap(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median_f64(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}
