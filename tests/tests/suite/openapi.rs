//! The OpenAPI document: generated from the handlers, committed, complete, served offline.

use std::path::PathBuf;

use serde_json::Value;

use super::support::{Req, Server};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../openapi/openapi.json")
}

/// Regenerates `openapi/openapi.json`; on any difference it writes the new file and fails, so a
/// local `cargo test` fixes the file and CI catches a forgotten commit.
#[test]
fn committed_document_matches_the_handlers() {
    let mut generated = msguide_api::openapi().to_pretty_json().unwrap();
    generated.push('\n');
    let path = committed_path();
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        std::fs::write(&path, &generated).unwrap();
        panic!("openapi/openapi.json was stale and has been regenerated: review and commit it");
    }
}

/// Every camera-recovery refusal the service can answer is one of the guidance route's 422
/// examples, word for word, so the document lists every answer a client may meet.
#[test]
fn every_camera_refusal_is_a_documented_422_example() {
    use local_core::guide::error::CameraRefusal::{
        self, ConflictingVerification, ForgedTarget, LiveProbeVerification, ObservationIdReused,
        OutOfOrder, PrematureVerification, ReinitializationMethodMissing, TaskContext,
        VerificationMismatch, VerificationNotWithObservation,
    };
    // A new refusal fails to compile here until it is added to the list below.
    let listed = |refusal: CameraRefusal| match refusal {
        TaskContext
        | VerificationMismatch
        | VerificationNotWithObservation
        | OutOfOrder
        | ObservationIdReused
        | ForgedTarget
        | PrematureVerification
        | ConflictingVerification
        | LiveProbeVerification
        | ReinitializationMethodMissing => refusal,
    };
    let document: Value = serde_json::from_str(&msguide_api::openapi().to_json().unwrap()).unwrap();
    let examples = &document["paths"]["/v1/guidance"]["post"]["responses"]["422"]["content"]["application/json"]
        ["examples"];
    let details: Vec<&str> = examples
        .as_object()
        .expect("the guidance 422 has examples")
        .values()
        .filter_map(|example| example["value"]["detail"].as_str())
        .collect();
    for refusal in [
        TaskContext,
        VerificationMismatch,
        VerificationNotWithObservation,
        OutOfOrder,
        ObservationIdReused,
        ForgedTarget,
        PrematureVerification,
        ConflictingVerification,
        LiveProbeVerification,
        ReinitializationMethodMissing,
    ]
    .map(listed)
    {
        let sentence = refusal.to_string();
        assert!(
            details.contains(&sentence.as_str()),
            "no 422 example says {sentence:?}"
        );
    }
}

fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn document_is_complete_and_self_consistent() {
    let doc: Value = serde_json::from_str(&msguide_api::openapi().to_json().unwrap()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut routes: Vec<String> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect();
    routes.sort();
    assert_eq!(
        routes,
        [
            "GET /admin/audit-log",
            "GET /health",
            "GET /v1/jobs/{jobId}",
            "POST /v1/actions/preview",
            "POST /v1/actions/{previewId}/confirm",
            "POST /v1/actions/{previewId}/execute",
            "POST /v1/assist",
            "POST /v1/guidance",
            "POST /v1/jobs/{jobId}/cancel",
            "POST /v1/sessions",
        ]
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            let secured = operation.get("security").is_some();
            assert_eq!(secured, path != "/health", "{method} {path} security");
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let (kind, name) = r
            .strip_prefix("#/components/")
            .and_then(|rest| rest.split_once('/'))
            .unwrap_or_else(|| panic!("odd ref {r}"));
        assert!(matches!(kind, "schemas" | "responses"), "odd ref {r}");
        assert!(
            doc["components"][kind].get(name).is_some(),
            "dangling $ref {r}"
        );
    }
    // Every answer the service can give is documented: the boundary's everywhere, the bearer's
    // wherever a token is needed, with their exact bodies.
    let operation_ids: Vec<&str> = paths
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .map(|op| op["operationId"].as_str().unwrap())
        .collect();
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            let mut expected = vec!["400", "403", "408", "413"];
            if path != "/health" {
                expected.extend(["401", "503"]);
            }
            for status in expected {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} does not document {status}"
                );
            }
            for response in responses.values() {
                for link in response["links"]
                    .as_object()
                    .into_iter()
                    .flat_map(|l| l.values())
                {
                    let target = link["operationId"].as_str().unwrap();
                    assert!(operation_ids.contains(&target), "link to {target}");
                }
            }
        }
    }
    let unauthorized = &doc["components"]["responses"]["Unauthorized"];
    assert_eq!(
        unauthorized["content"]["application/json"]["examples"]["unauthorized"]["value"],
        serde_json::json!({"detail": "Unauthorized"})
    );
    assert!(unauthorized["headers"]["WWW-Authenticate"].is_object());
    assert_eq!(
        doc["components"]["responses"]["BoundaryForbidden"]["content"]["application/json"]["examples"]
            ["browserOrigin"]["value"]["detail"],
        "Browser origins are not allowed"
    );
    // loc holds field names and list indexes.
    assert_eq!(
        doc["components"]["schemas"]["ValidationItem"]["properties"]["loc"]["items"]["oneOf"],
        serde_json::json!([{"type": "string"}, {"type": "integer", "minimum": 0}])
    );
    // The 422s that can carry a sentence document both shapes.
    for path in ["/v1/guidance", "/v1/assist", "/v1/actions/preview"] {
        let body = &paths[path]["post"]["responses"]["422"]["content"]["application/json"];
        assert_eq!(
            body["schema"]["$ref"], "#/components/schemas/Unprocessable",
            "{path}"
        );
        assert!(body["examples"].as_object().unwrap().len() >= 2, "{path}");
    }
    // The action flow can be walked from the document alone.
    let links = |path: &str, method: &str| -> Vec<String> {
        let mut names: Vec<String> = paths[path][method]["responses"]["200"]["links"]
            .as_object()
            .map(|l| {
                l.values()
                    .map(|v| v["operationId"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(links("/v1/sessions", "post"), ["assist", "guidance"]);
    assert_eq!(links("/v1/actions/preview", "post"), ["confirm", "execute"]);
    assert_eq!(
        links("/v1/actions/{previewId}/confirm", "post"),
        ["execute"]
    );
    assert_eq!(
        links("/v1/actions/{previewId}/execute", "post"),
        ["cancel_job", "get_job"]
    );
    let element = &doc["components"]["schemas"]["UiElement"];
    assert_eq!(
        element["additionalProperties"], false,
        "unknown fields are refused, and documented so"
    );
}

#[tokio::test]
async fn served_document_and_offline_docs() {
    let server = Server::start().await;
    let served = Req::new(server.addr, "GET", "/openapi.json").send().await;
    assert_eq!(served.status, 200);
    assert_eq!(served.json()["info"]["version"], "0.2.0");
    let ui = Req::new(server.addr, "GET", "/docs/").send().await;
    assert_eq!(ui.status, 200);
    assert!(ui.text().to_lowercase().contains("swagger"));
    let bare = Req::new(server.addr, "GET", "/docs").send().await;
    assert_eq!(
        bare.status, 200,
        "the UI answers at /docs itself, as the reference's does"
    );
    assert!(bare.text().contains("<base href=\"/docs/\">"));
    assert_eq!(
        Req::new(server.addr, "GET", "/docs/oauth2-redirect")
            .send()
            .await
            .status,
        200
    );
    assert_eq!(
        Req::new(server.addr, "GET", "/redoc").send().await.status,
        200
    );
    let bundle = Req::new(server.addr, "GET", "/docs/swagger-ui-bundle.js")
        .send()
        .await;
    assert_eq!(bundle.status, 200);
    assert!(
        bundle.body.len() > 100_000,
        "the UI is served from the binary, not a CDN"
    );
    // "Try it out" could only show 403s from a browser (it always sends an Origin): it is off,
    // and the page's description says why.
    let initializer = Req::new(server.addr, "GET", "/docs/swagger-initializer.js")
        .send()
        .await
        .text();
    assert!(
        initializer.contains("\"tryItOutEnabled\": false"),
        "{initializer}"
    );
    assert!(
        initializer.contains("\"supportedSubmitMethods\": []"),
        "{initializer}"
    );
    assert!(
        served.json()["info"]["description"]
            .as_str()
            .unwrap()
            .contains("\"Try it out\" is switched off on this page: a browser sends an Origin")
    );
    let browser = Req::new(server.addr, "GET", "/docs/")
        .header("Origin", "http://localhost")
        .send()
        .await;
    assert_eq!(browser.status, 403, "docs do not authorise browser access");
}

/// The mock tools and their tiers are documented in the document and in docs/api.md, as the
/// core's table has them.
#[test]
fn mock_tools_are_documented_with_their_tiers() {
    use msguide_api::contracts::requests::{DOCUMENTED_TOOLS, TOOL_DESCRIPTION};
    let doc = msguide_api::openapi().to_json().unwrap();
    let api_md =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md"))
            .unwrap();
    for (name, tier) in DOCUMENTED_TOOLS {
        assert_eq!(
            local_core::guide::actions::Risk::of(name).as_str(),
            tier,
            "{name}"
        );
        assert!(
            doc.contains(&format!("\"{name}\"")),
            "{name} not in the document"
        );
        assert!(
            api_md.contains(&format!("`{name}`")),
            "{name} not in docs/api.md"
        );
        if tier != "blocked" {
            assert!(TOOL_DESCRIPTION.contains(name), "{name}");
        }
    }
}
