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
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("odd ref {r}"));
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "dangling $ref {r}"
        );
    }
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
    let browser = Req::new(server.addr, "GET", "/docs/")
        .header("Origin", "http://localhost")
        .send()
        .await;
    assert_eq!(browser.status, 403, "docs do not authorise browser access");
}
