//! Simulated actions: tiers, parameter schemas, single-use grants (also under a race), the
//! 16-job cap, job lifecycle, expiry, ownership and store capacity.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Options, Server};

async fn preview(server: &Server, tool: &str, parameters: Value) -> super::support::Resp {
    server
        .post("/v1/actions/preview")
        .json(&json!({"tool": tool, "parameters": parameters}))
        .send()
        .await
}

async fn confirmed(server: &Server) -> (String, String) {
    let p = preview(server, "create_work_item", json!({"title": "Investigate"}))
        .await
        .json();
    let id = p["previewId"].as_str().unwrap().to_owned();
    let grant = server
        .post(&format!("/v1/actions/{id}/confirm"))
        .send()
        .await
        .json();
    (id, grant["grantToken"].as_str().unwrap().to_owned())
}

async fn execute(server: &Server, id: &str, token: &str) -> super::support::Resp {
    server
        .post(&format!("/v1/actions/{id}/execute"))
        .json(&json!({"grantToken": token}))
        .send()
        .await
}

#[tokio::test]
async fn tiers_and_denials() {
    let server = Server::start().await;
    for (tool, status) in [
        ("delete_personal_data", "STEP_UP_REQUIRED"),
        ("modify_service_config", "STEP_UP_REQUIRED"),
        ("deploy_production", "DENIED"),
        ("private-unknown", "DENIED"),
    ] {
        let res = preview(&server, tool, json!({"anything": 1})).await;
        assert_eq!(
            (res.status, res.text()),
            (
                403,
                format!(r#"{{"status":"{status}","detail":"External actions are disabled"}}"#)
            ),
            "{tool}"
        );
    }
    let outcomes: Vec<String> = server
        .local
        .audit()
        .tail(10)
        .unwrap()
        .1
        .into_iter()
        .map(|e| e.outcome)
        .collect();
    assert_eq!(
        outcomes,
        ["STEP_UP_REQUIRED", "STEP_UP_REQUIRED", "DENIED", "DENIED"]
    );
}

#[tokio::test]
async fn previews_validate_and_store_an_immutable_copy() {
    let server = Server::start().await;
    let res = preview(&server, "create_work_item", json!({"title": "T"})).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let body = res.json();
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "effects",
            "expiryTime",
            "mock",
            "parameters",
            "previewId",
            "requiresConfirmation",
            "riskLevel",
            "tool"
        ]
    );
    assert_eq!(body["parameters"], json!({"title": "T", "description": ""}));
    assert_eq!(
        (body["riskLevel"].as_str(), body["effects"].as_str()),
        (
            Some("medium"),
            Some("Simulation only; no external effects.")
        )
    );
    assert_eq!(
        (
            body["requiresConfirmation"].as_bool(),
            body["mock"].as_bool()
        ),
        (Some(true), Some(true))
    );
    let stored = server
        .local
        .preview_parameters("local", body["previewId"].as_str().unwrap())
        .unwrap();
    assert_eq!(stored, r#"{"description":"","title":"T"}"#);
    let logs = preview(&server, "view_logs", json!({})).await.json();
    assert_eq!(
        (logs["riskLevel"].as_str(), logs["parameters"].clone()),
        (Some("low"), json!({"application": "MSGuide Demo"}))
    );

    assert_eq!(
        preview(
            &server,
            "create_work_item",
            json!({"title": "t".repeat(256)})
        )
        .await
        .status,
        200
    );
    for bad in [
        json!({}),
        json!({"title": "T", "command": "rm -rf /"}),
        json!({"title": "t".repeat(257)}),
        json!({"title": 5}),
        json!({"title": "T", "description": "d".repeat(4001)}),
    ] {
        let res = preview(&server, "create_work_item", bad.clone()).await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (422, "Invalid mock tool parameters"),
            "{}",
            &bad.to_string()[..40.min(bad.to_string().len())]
        );
    }
    assert_eq!(
        preview(&server, "view_logs", json!({"application": ""}))
            .await
            .status,
        422
    );
    let not_object = server
        .post("/v1/actions/preview")
        .json(&json!({"tool": "view_logs", "parameters": []}))
        .send()
        .await;
    assert_eq!(not_object.validation_type(), "dict_type");
    let longest_tool = preview(&server, &"t".repeat(64), json!({})).await;
    assert_eq!(
        longest_tool.status, 403,
        "a 64-character tool name passes the contract and meets the tiers"
    );
    let long_tool = preview(&server, &"t".repeat(65), json!({})).await;
    assert_eq!(long_tool.validation_type(), "string_too_long");
}

#[tokio::test]
async fn grants_are_single_use_and_bound_to_their_preview() {
    let server = Server::start().await;
    let (id, token) = confirmed(&server).await;
    assert_eq!(token.len(), 43);
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    assert!(!token.contains(&id));
    let again = server
        .post(&format!("/v1/actions/{id}/confirm"))
        .send()
        .await;
    assert_eq!(
        (again.status, again.detail().as_str()),
        (409, "Preview already confirmed or consumed")
    );

    let wrong = execute(&server, &id, "not-the-token").await;
    assert_eq!(
        (wrong.status, wrong.detail().as_str()),
        (403, "Invalid execution grant")
    );
    let (other_id, other_token) = confirmed(&server).await;
    assert_eq!(
        execute(&server, &id, &other_token).await.status,
        403,
        "a valid token of another preview"
    );
    let job = execute(&server, &id, &token).await;
    assert_eq!(job.status, 200, "{}", job.text());
    assert_eq!(job.json()["status"], "pending");
    let replay = execute(&server, &id, &token).await;
    assert_eq!(
        (replay.status, replay.detail().as_str()),
        (409, "Grant already consumed")
    );
    assert_eq!(
        server
            .post(&format!("/v1/actions/{id}/confirm"))
            .send()
            .await
            .status,
        409
    );

    let job_id = execute(&server, &other_id, &other_token).await.json()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = server
        .post(&format!("/v1/jobs/{job_id}/cancel"))
        .send()
        .await
        .json();
    assert_eq!(cancelled["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        server
            .get(&format!("/v1/jobs/{job_id}"))
            .send()
            .await
            .json()["status"],
        "cancelled"
    );
    let extra = server
        .post(&format!("/v1/actions/{id}/execute"))
        .json(&json!({"grantToken": token, "private-x": 1}))
        .send()
        .await;
    assert_eq!(extra.validation_type(), "extra_forbidden");
    let longest = execute(&server, &id, &"t".repeat(256)).await;
    assert_eq!(
        longest.status, 403,
        "a 256-character token passes the contract and fails the grant check"
    );
    let too_long = execute(&server, &id, &"t".repeat(257)).await;
    assert_eq!(too_long.validation_type(), "string_too_long");
}

#[tokio::test]
async fn racing_executes_yield_exactly_one_job() {
    let server = Server::start().await;
    for _ in 0..5 {
        let (id, token) = confirmed(&server).await;
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                server
                    .post(&format!("/v1/actions/{id}/execute"))
                    .json(&json!({"grantToken": token}))
            })
            .map(|req| tokio::spawn(req.send_owned()))
            .collect();
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap().status);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
    }
    let started = server
        .local
        .audit()
        .tail(1000)
        .unwrap()
        .1
        .iter()
        .filter(|e| e.outcome == "mock_execution_started")
        .count();
    assert_eq!(started, 5);
}

#[tokio::test]
async fn at_most_sixteen_active_jobs() {
    let server = Server::start().await;
    let mut grants = Vec::new();
    for _ in 0..17 {
        grants.push(confirmed(&server).await);
    }
    let tasks: Vec<_> = grants
        .iter()
        .map(|(id, token)| {
            tokio::spawn(
                server
                    .post(&format!("/v1/actions/{id}/execute"))
                    .json(&json!({"grantToken": token}))
                    .send_owned(),
            )
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let ok = results.iter().filter(|r| r.status == 200).count();
    let refused: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    assert_eq!((ok, refused.len()), (16, 1));
    assert_eq!(refused[0].detail(), "Too many active mock jobs");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (id, token) = confirmed(&server).await;
    assert_eq!(
        execute(&server, &id, &token).await.status,
        200,
        "finished jobs free their slots"
    );
}

#[tokio::test]
async fn jobs_complete_and_keep_their_records_for_ten_minutes() {
    let server = Server::start().await;
    let (id, token) = confirmed(&server).await;
    let job_id = execute(&server, &id, &token).await.json()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(450)).await;
    let done = server
        .get(&format!("/v1/jobs/{job_id}"))
        .send()
        .await
        .json();
    assert_eq!(
        done,
        json!({
            "jobId": job_id, "status": "success", "error": null, "mock": true, "progress": 100,
            "result": {"mock": true, "tool": "create_work_item", "externalEffects": false, "message": "Simulation completed; no external action was performed."}
        })
    );
    assert_eq!(
        server
            .post(&format!("/v1/jobs/{job_id}/cancel"))
            .send()
            .await
            .json()["status"],
        "success"
    );
    for path in [
        "/v1/jobs/00000000-0000-4000-8000-000000000000",
        "/v1/jobs/not-a-uuid",
    ] {
        assert_eq!(server.get(path).send().await.status, 404);
        assert_eq!(
            server.post(&format!("{path}/cancel")).send().await.status,
            404
        );
    }
    server.clock.advance(Duration::from_secs(599));
    assert_eq!(
        server
            .get(&format!("/v1/jobs/{job_id}"))
            .send()
            .await
            .status,
        200
    );
    server.clock.advance(Duration::from_secs(1));
    let gone = server.get(&format!("/v1/jobs/{job_id}")).send().await;
    assert_eq!(
        (gone.status, gone.detail().as_str()),
        (410, "Resource expired")
    );
    assert_eq!(
        server
            .post(&format!("/v1/jobs/{job_id}/cancel"))
            .send()
            .await
            .status,
        410
    );
}

#[tokio::test]
async fn previews_expire_after_five_minutes_and_belong_to_their_owner() {
    let server = Server::start().await;
    let unknown = server
        .post("/v1/actions/00000000-0000-4000-8000-000000000000/confirm")
        .send()
        .await;
    assert_eq!(
        (unknown.status, unknown.detail().as_str()),
        (404, "Unknown resource")
    );
    let foreign = server
        .local
        .preview_action("someone-else", "view_logs", &serde_json::Map::new())
        .unwrap()
        .preview_id;
    assert_eq!(
        server
            .post(&format!("/v1/actions/{foreign}/confirm"))
            .send()
            .await
            .status,
        404
    );
    assert_eq!(
        server
            .post(&format!("/v1/actions/{foreign}/execute"))
            .json(&json!({"grantToken": "x"}))
            .send()
            .await
            .status,
        404
    );

    let (id, token) = confirmed(&server).await;
    let fresh = preview(&server, "view_logs", json!({})).await.json()["previewId"]
        .as_str()
        .unwrap()
        .to_owned();
    server.clock.advance(Duration::from_secs(299));
    let grant = server
        .post(&format!("/v1/actions/{fresh}/confirm"))
        .send()
        .await
        .json();
    assert!(
        grant["expiresIn"].as_u64().unwrap() <= 1,
        "grant expiry never outlives its preview: {grant}"
    );
    server.clock.advance(Duration::from_secs(1));
    let expired = execute(&server, &id, &token).await;
    assert_eq!(
        (expired.status, expired.detail().as_str()),
        (410, "Resource expired")
    );
    assert_eq!(
        server
            .post(&format!("/v1/actions/{fresh}/confirm"))
            .send()
            .await
            .status,
        410
    );
}

#[tokio::test]
async fn stores_purge_then_refuse_at_capacity() {
    let server = Server::start().await;
    for _ in 0..1000 {
        assert_eq!(server.post("/v1/sessions").send().await.status, 200);
    }
    let full = server.post("/v1/sessions").send().await;
    assert_eq!(
        (full.status, full.detail().as_str()),
        (429, "Local state capacity reached; retry after expiry")
    );
    server.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        server.post("/v1/sessions").send().await.status,
        200,
        "expired sessions are purged first"
    );

    let small = Server::with(Options {
        max_records: 1,
        ..Options::default()
    })
    .await;
    assert_eq!(preview(&small, "view_logs", json!({})).await.status, 200);
    assert_eq!(preview(&small, "view_logs", json!({})).await.status, 429);
    small.clock.advance(Duration::from_secs(300));
    assert_eq!(preview(&small, "view_logs", json!({})).await.status, 200);
}
