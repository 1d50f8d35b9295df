//! `/v1/guidance` with `cameraRecovery` through the real `msguide-api` binary, configured with
//! the OpenAI-compatible provider against a fake model server that counts what it is sent: the
//! fixture flow end to end with the exact `cameraRecovery` objects, every refusal, the live
//! probe and pinned flows, `tgt.` ids bound to their session and element, the record's capture
//! order and ids, and not one request to the provider.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
};

use e2e::fake_llm::{FakeLlm, Reply};
use local_core::guide::guidance::camera::fixture::{
    APP_PERMISSION_TOGGLE, BLOCK_INDICATOR, CAMERA_TOGGLE, DEVICES_CAMERA_SETTINGS, DEVICES_TAB,
    ELEMENTS, ElementSpec, MANAGED_NOTICE, OPEN_CAMERA_SETTINGS, SETTINGS_MENU_ITEM,
    SETTINGS_PAGE_TITLE,
};
use serde_json::{Value, json};

use super::{
    binary::{binary, listening},
    support::{Req, Resp, TOKEN, free_port, temp_dir},
};

const FIXTURE: &str = "teams-camera-recovery-win11-24h2-en-US-fixture-v1";
const PROBE: &str = "teams-camera-recovery-new-teams-uia-probe-20260916-v1";
const PINNED: &str = "teams-camera-recovery-pinned-20260916-v2";
const MODEL: &str = "tiny-model";

/// The real binary with the model provider, the audit and a diagnostic log.
struct Api {
    child: Child,
    addr: std::net::SocketAddr,
    dir: PathBuf,
    fake: FakeLlm,
}

impl Api {
    async fn start() -> Self {
        let fake = FakeLlm::openai(&[MODEL], Reply::json(r#"{"instruction":"x"}"#)).await;
        let dir = temp_dir("camera");
        let port = free_port();
        let child = Command::new(binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("MSGUIDE_LOCAL_TOKEN", TOKEN)
            .env("MSGUIDE_ENABLE_AUDIT", "true")
            .env("MSGUIDE_DIAGNOSTIC_LOG", dir.join("backend.log"))
            .env("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible")
            .env(
                "MSGUIDE_MODEL_URL",
                format!("{}/v1/chat/completions", fake.url()),
            )
            .env("MSGUIDE_MODEL_NAME", MODEL)
            .env_remove("MSGUIDE_MODE")
            .env_remove("MSGUIDE_MODEL_API_KEY")
            .env_remove("MSGUIDE_ALLOW_REMOTE_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = listening(port).await;
        Self {
            child,
            addr,
            dir,
            fake,
        }
    }

    async fn session(&self) -> String {
        let res = Req::new(self.addr, "POST", "/v1/sessions")
            .bearer(TOKEN)
            .send()
            .await;
        assert_eq!(res.status, 200, "{}", res.text());
        res.json()["sessionId"].as_str().unwrap().to_owned()
    }

    async fn guidance(&self, body: &Value) -> Resp {
        let res = Req::new(self.addr, "POST", "/v1/guidance")
            .bearer(TOKEN)
            .json(body)
            .send()
            .await;
        assert!(
            !res.text().contains("private-"),
            "input echoed: {}",
            res.text()
        );
        res
    }

    /// Chat completions the provider was asked for.
    fn provider_calls(&self) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    }

    fn diagnostics(&self) -> String {
        std::fs::read_to_string(self.dir.join("backend.log")).unwrap_or_default()
    }

    async fn audit(&self) -> Vec<String> {
        let res = Req::new(self.addr, "GET", "/admin/audit-log?limit=1000")
            .bearer(TOKEN)
            .send()
            .await;
        res.json()["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["outcome"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Now minus `age` seconds, RFC 3339 with `Z`.
fn at(age: f64) -> String {
    (time::OffsetDateTime::now_utc() - time::Duration::seconds_f64(age))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// An element as the docs/api.md table describes it.
fn el(spec: &ElementSpec, x: f64) -> Value {
    json!({"role": spec.role, "label": spec.label, "box": [x, 0.5, 0.2, 0.06], "confidence": 0.95,
           "automationId": spec.automation_id, "frameworkId": spec.framework_id,
           "isEnabled": true, "isOffscreen": false})
}

fn switch(spec: &ElementSpec, state: &str) -> Value {
    let mut e = el(spec, 0.1);
    e["toggleState"] = json!(state);
    e
}

fn obs(id: &str, application: &str, age: f64, elements: Vec<Value>) -> Value {
    json!({"id": id, "windowId": "win-1", "application": application, "capturedAt": at(age),
           "width": 800, "height": 600, "ocrText": "private-screen-text", "elements": elements})
}

fn prejoin_blocked(id: &str, age: f64) -> Value {
    obs(
        id,
        "Microsoft Teams",
        age,
        vec![
            switch(&CAMERA_TOGGLE, "off"),
            el(&BLOCK_INDICATOR, 0.3),
            el(&OPEN_CAMERA_SETTINGS, 0.5),
        ],
    )
}

fn prejoin_on(id: &str, age: f64) -> Value {
    obs(
        id,
        "Microsoft Teams",
        age,
        vec![switch(&CAMERA_TOGGLE, "on")],
    )
}

fn settings(id: &str, age: f64, state: &str) -> Value {
    obs(
        id,
        "Settings",
        age,
        vec![
            el(&SETTINGS_PAGE_TITLE, 0.1),
            switch(&APP_PERMISSION_TOGGLE, state),
        ],
    )
}

fn body(session: &str, profile: &str, observation: Value) -> Value {
    json!({"sessionId": session, "prompt": "private-prompt: my camera does not work",
           "consent": true, "observation": observation, "cameraRecovery": {"profile": profile}})
}

fn verification(session: &str, observation: &Value) -> Value {
    json!({"kind": "localCameraReady", "source": "desktopLocalCameraVerifier",
           "evidenceId": "verifier-1", "sessionId": session, "observationId": observation["id"],
           "windowId": observation["windowId"], "capturedAt": observation["capturedAt"],
           "cameraActive": true, "framesObserved": 30})
}

fn verified(session: &str, profile: &str, observation: Value) -> Value {
    let mut b = body(session, profile, observation.clone());
    b["cameraRecovery"]["verification"] = verification(session, &observation);
    b
}

/// The `cameraRecovery` object the fixture profile answers in `state`.
fn fixture_report(state: &str, evidence: &[&str], permission: &str) -> Value {
    json!({"profile": FIXTURE, "evidenceBasis": "fixture", "fixtureSupported": true,
           "settingsUiaProven": false, "rawPixelEvidenceUsed": false, "state": state,
           "evidence": evidence, "permissionState": permission,
           "verificationRequired": state != "camera_ready_verified"})
}

/// Sends and returns (status, instruction, state) of a 200, asserting the status pairing.
async fn step(api: &Api, body: &Value) -> (String, String, Value) {
    let res = api.guidance(body).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let answer = res.json();
    let status = answer["status"].as_str().unwrap().to_owned();
    let report = answer["cameraRecovery"].clone();
    assert_eq!(
        status == "completed",
        report["state"] == "camera_ready_verified",
        "{answer}"
    );
    assert_eq!(
        status == "next_step",
        answer["target"].is_object(),
        "{answer}"
    );
    assert_eq!(answer["mode"], "demo");
    assert_eq!(answer["citations"], json!([]));
    (
        status,
        answer["instruction"].as_str().unwrap().to_owned(),
        answer,
    )
}

/// A 422 with a sentence: the sentence.
async fn sentence(api: &Api, body: &Value) -> String {
    let res = api.guidance(body).await;
    assert_eq!(res.status, 422, "{}", res.text());
    res.detail()
}

#[tokio::test]
async fn the_fixture_flow_end_to_end_without_the_provider() {
    let api = Api::start().await;
    let s = api.session().await;
    let (status, instruction, a) = step(&api, &body(&s, FIXTURE, prejoin_blocked("o1", 5.0))).await;
    assert_eq!(
        (status.as_str(), instruction.as_str()),
        (
            "next_step",
            "Windows blocks the camera for Teams; select Open camera settings."
        )
    );
    assert_eq!(
        a["cameraRecovery"],
        fixture_report(
            "camera_block_confirmed",
            &[
                "cameraToggleOff",
                "cameraBlockIndicator",
                "cameraSettingsButton"
            ],
            "unknown"
        )
    );
    let target = &a["target"];
    assert_eq!(target["label"], "Open camera settings");
    assert_eq!(target["automationId"], "prejoin-open-camera-settings");
    assert_eq!(target["box"], json!([0.5, 0.5, 0.2, 0.06]));
    let tgt = target["targetId"].as_str().unwrap();
    assert!(tgt.starts_with("tgt.") && tgt.len() == 47, "{tgt}");
    assert_eq!(
        target.as_object().unwrap().len(),
        11,
        "the demo target's keys: {target}"
    );
    assert_eq!(
        (a["observationId"].as_str(), a["windowId"].as_str()),
        (Some("o1"), Some("win-1"))
    );

    let (status, instruction, a) = step(&api, &body(&s, FIXTURE, settings("o2", 4.0, "off"))).await;
    assert_eq!(
        (status.as_str(), instruction.as_str()),
        (
            "next_step",
            "Turn on the Microsoft Teams camera switch yourself."
        )
    );
    assert_eq!(
        a["cameraRecovery"],
        fixture_report(
            "user_action_required",
            &["settingsCameraPage", "permissionToggle"],
            "off"
        )
    );
    assert_eq!(
        a["target"]["automationId"],
        "camera-app-toggle-microsoft-teams"
    );
    assert_eq!(a["target"]["toggleState"], "off");

    let (status, instruction, a) = step(&api, &body(&s, FIXTURE, settings("o3", 3.0, "on"))).await;
    assert_eq!(
        (status.as_str(), instruction.as_str()),
        (
            "clarification",
            "Microsoft Teams may now use the camera; return to the Teams pre-join screen and check again."
        )
    );
    assert_eq!(
        a["cameraRecovery"],
        fixture_report(
            "applicable_permission_on",
            &["settingsCameraPage", "permissionToggle"],
            "on"
        )
    );
    assert_eq!(a["target"], Value::Null);

    let back = prejoin_on("o4", 2.0);
    let (status, instruction, a) = step(&api, &body(&s, FIXTURE, back.clone())).await;
    assert_eq!(
        (status.as_str(), instruction.as_str()),
        (
            "clarification",
            "Teams is back with the camera on; run the local camera check and send its report with this same observation."
        )
    );
    assert_eq!(
        a["cameraRecovery"],
        fixture_report("return_to_teams", &["cameraToggleOn"], "on")
    );

    let (status, instruction, a) = step(&api, &verified(&s, FIXTURE, back)).await;
    assert_eq!(
        (status.as_str(), instruction.as_str()),
        ("completed", "The camera works in Teams again.")
    );
    assert_eq!(
        a["cameraRecovery"],
        fixture_report(
            "camera_ready_verified",
            &["cameraToggleOn", "localVerifier"],
            "on"
        )
    );
    assert_eq!(
        a.as_object().unwrap().len(),
        9,
        "the 8 keys and cameraRecovery: {a}"
    );

    assert_eq!(
        api.provider_calls(),
        0,
        "the provider was called on the camera path"
    );
    let audit = api.audit().await;
    assert_eq!(
        audit[audit.len() - 5..],
        [
            "guidance_next_step",
            "guidance_next_step",
            "guidance_clarification",
            "guidance_clarification",
            "guidance_completed"
        ]
    );
    let log = api.diagnostics();
    assert_eq!(log.matches("\"guidance_completed\"").count(), 5, "{log}");
    for private in [
        "private-",
        "Open camera settings",
        "Microsoft Teams",
        "prejoin-",
    ] {
        assert!(!log.contains(private), "{private} in the diagnostic log");
    }
    // The counter does count: a request without cameraRecovery reaches the provider.
    let mut plain = body(&s, FIXTURE, prejoin_on("o5", 1.0));
    plain.as_object_mut().unwrap().remove("cameraRecovery");
    let _ = api.guidance(&plain).await;
    assert_eq!(api.provider_calls(), 1);
}

#[tokio::test]
async fn each_refusal_with_its_sentence_or_validation_item() {
    let api = Api::start().await;
    let s = api.session().await;
    let edit = |f: &dyn Fn(&mut Value)| {
        let observation = prejoin_blocked("r1", 1.0);
        let mut b = verified(&s, FIXTURE, observation);
        f(&mut b);
        b
    };
    let validation = |res: Resp| -> (String, Value) {
        let item = res.json()["detail"][0].clone();
        (res.validation_type(), item["loc"].clone())
    };
    let v = ["body", "cameraRecovery", "verification"];
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str, Vec<&str>)> = vec![
        (
            "unknown profile",
            Box::new(|b| b["cameraRecovery"]["profile"] = json!("teams-camera-recovery-v0")),
            "enum",
            vec!["body", "cameraRecovery", "profile"],
        ),
        (
            "profile missing",
            Box::new(|b| {
                b["cameraRecovery"]
                    .as_object_mut()
                    .unwrap()
                    .remove("profile");
            }),
            "missing",
            vec!["body", "cameraRecovery", "profile"],
        ),
        (
            "extra key",
            Box::new(|b| b["cameraRecovery"]["extra"] = json!(1)),
            "extra_forbidden",
            vec!["body", "cameraRecovery", "extra"],
        ),
        (
            "not an object",
            Box::new(|b| b["cameraRecovery"] = json!("fixture")),
            "model_type",
            vec!["body", "cameraRecovery"],
        ),
        (
            "verification extra key",
            Box::new(|b| b["cameraRecovery"]["verification"]["extra"] = json!(1)),
            "extra_forbidden",
            [&v[..], &["extra"]].concat(),
        ),
        (
            "kind",
            Box::new(|b| b["cameraRecovery"]["verification"]["kind"] = json!("cameraReady")),
            "enum",
            [&v[..], &["kind"]].concat(),
        ),
        (
            "source",
            Box::new(|b| b["cameraRecovery"]["verification"]["source"] = json!("webcam")),
            "enum",
            [&v[..], &["source"]].concat(),
        ),
        (
            "cameraActive false",
            Box::new(|b| b["cameraRecovery"]["verification"]["cameraActive"] = json!(false)),
            "value_error",
            [&v[..], &["cameraActive"]].concat(),
        ),
        (
            "cameraActive string",
            Box::new(|b| b["cameraRecovery"]["verification"]["cameraActive"] = json!("true")),
            "bool_type",
            [&v[..], &["cameraActive"]].concat(),
        ),
        (
            "cameraActive 1",
            Box::new(|b| b["cameraRecovery"]["verification"]["cameraActive"] = json!(1)),
            "bool_type",
            [&v[..], &["cameraActive"]].concat(),
        ),
        (
            "framesObserved 1",
            Box::new(|b| b["cameraRecovery"]["verification"]["framesObserved"] = json!(1)),
            "greater_than_equal",
            [&v[..], &["framesObserved"]].concat(),
        ),
        (
            "framesObserved 121",
            Box::new(|b| b["cameraRecovery"]["verification"]["framesObserved"] = json!(121)),
            "less_than_equal",
            [&v[..], &["framesObserved"]].concat(),
        ),
        (
            "framesObserved 30.0",
            Box::new(|b| b["cameraRecovery"]["verification"]["framesObserved"] = json!(30.0)),
            "int_type",
            [&v[..], &["framesObserved"]].concat(),
        ),
        (
            "framesObserved string",
            Box::new(|b| b["cameraRecovery"]["verification"]["framesObserved"] = json!("30")),
            "int_type",
            [&v[..], &["framesObserved"]].concat(),
        ),
        (
            "framesObserved true",
            Box::new(|b| b["cameraRecovery"]["verification"]["framesObserved"] = json!(true)),
            "int_type",
            [&v[..], &["framesObserved"]].concat(),
        ),
        (
            "evidenceId 129",
            Box::new(|b| {
                b["cameraRecovery"]["verification"]["evidenceId"] = json!("e".repeat(129))
            }),
            "string_too_long",
            [&v[..], &["evidenceId"]].concat(),
        ),
        (
            "evidenceId empty",
            Box::new(|b| b["cameraRecovery"]["verification"]["evidenceId"] = json!("")),
            "string_too_short",
            [&v[..], &["evidenceId"]].concat(),
        ),
        (
            "evidenceId pattern",
            Box::new(|b| b["cameraRecovery"]["verification"]["evidenceId"] = json!("a b")),
            "string_pattern_mismatch",
            [&v[..], &["evidenceId"]].concat(),
        ),
        (
            "evidenceId number",
            Box::new(|b| b["cameraRecovery"]["verification"]["evidenceId"] = json!(7)),
            "string_type",
            [&v[..], &["evidenceId"]].concat(),
        ),
        (
            "capturedAt naive",
            Box::new(|b| {
                b["cameraRecovery"]["verification"]["capturedAt"] = json!("2026-12-03T10:00:00")
            }),
            "value_error",
            [&v[..], &["capturedAt"]].concat(),
        ),
        (
            "reinitializationMethod",
            Box::new(|b| {
                b["cameraRecovery"]["verification"]["reinitializationMethod"] = json!("rebooted")
            }),
            "enum",
            [&v[..], &["reinitializationMethod"]].concat(),
        ),
        (
            "sessionId missing",
            Box::new(|b| {
                b["cameraRecovery"]["verification"]
                    .as_object_mut()
                    .unwrap()
                    .remove("sessionId");
            }),
            "missing",
            [&v[..], &["sessionId"]].concat(),
        ),
    ];
    for (name, f, kind, loc) in cases {
        let (got, got_loc) = validation(api.guidance(&edit(&*f)).await);
        assert_eq!((got.as_str(), got_loc), (kind, json!(loc)), "{name}");
    }
    // Valid edges pass the contract and reach the engine, which finds the verification early.
    let premature = "Camera verification is premature: send it only with the Teams observation that was answered return_to_teams";
    for (name, f) in [
        (
            "framesObserved 2",
            Box::new(|b: &mut Value| {
                b["cameraRecovery"]["verification"]["framesObserved"] = json!(2)
            }) as Box<dyn Fn(&mut Value)>,
        ),
        (
            "framesObserved 120",
            Box::new(|b: &mut Value| {
                b["cameraRecovery"]["verification"]["framesObserved"] = json!(120)
            }),
        ),
        (
            "evidenceId 128",
            Box::new(|b: &mut Value| {
                b["cameraRecovery"]["verification"]["evidenceId"] = json!("e".repeat(128))
            }),
        ),
        (
            "each method",
            Box::new(|b: &mut Value| {
                b["cameraRecovery"]["verification"]["reinitializationMethod"] =
                    json!("cameraDeviceReinitialized")
            }),
        ),
        (
            "verification null",
            Box::new(|b: &mut Value| b["cameraRecovery"]["verification"] = Value::Null),
        ),
        (
            "planSegments false",
            Box::new(|b: &mut Value| {
                b["cameraRecovery"]
                    .as_object_mut()
                    .unwrap()
                    .remove("verification");
                b["planSegments"] = json!(false);
            }),
        ),
    ] {
        let mut b = edit(&*f);
        // A fresh capture per request keeps the record's rules out of the way.
        let id = format!("edge-{}", name.replace(' ', "-"));
        b["observation"]["id"] = json!(id);
        if b["cameraRecovery"]["verification"].is_object() {
            b["cameraRecovery"]["verification"]["observationId"] = json!(id);
            b["observation"] = prejoin_on(&id, 0.5);
            b["cameraRecovery"]["verification"]["capturedAt"] =
                b["observation"]["capturedAt"].clone();
            assert_eq!(sentence(&api, &b).await, premature, "{name}");
        } else {
            b["observation"] = prejoin_blocked(&id, 0.0);
            assert_eq!(api.guidance(&b).await.status, 200, "{name}");
        }
    }

    // Cross-field refusals, with the reference's sentence.
    let task = json!({"taskId": "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d", "step": 1});
    let generic = "Generic task context cannot authorize camera recovery";
    assert_eq!(
        sentence(&api, &edit(&|b| b["task"] = task.clone())).await,
        generic
    );
    assert_eq!(
        sentence(&api, &edit(&|b| b["planSegments"] = json!(true))).await,
        generic
    );
    let mismatch = "Camera verification must name this request's session, observation and window; send the verifier's report for this capture";
    for field in ["sessionId", "observationId", "windowId"] {
        let b = edit(&|b| b["cameraRecovery"]["verification"][field] = json!("other-1"));
        assert_eq!(sentence(&api, &b).await, mismatch, "{field}");
    }
    // Checked before the session: an unknown session still answers the 422.
    let mut unknown = edit(&|b| b["task"] = task.clone());
    unknown["sessionId"] = json!("00000000-0000-4000-8000-000000000000");
    assert_eq!(sentence(&api, &unknown).await, generic);

    // The verification's own freshness, and its closeness to the capture.
    let stale = edit(&|b| b["cameraRecovery"]["verification"]["capturedAt"] = json!(at(61.0)));
    assert_eq!(
        sentence(&api, &stale).await,
        "Observation must be at most 60 seconds old and at most 5 seconds in the future"
    );
    let mut far = edit(&|_| {});
    far["observation"] = prejoin_blocked("r1", 7.0);
    far["cameraRecovery"]["verification"]["capturedAt"] = json!(at(1.0));
    assert_eq!(
        sentence(&api, &far).await,
        "Camera verification must be captured with the same observation"
    );
    // Conflicting: Teams shows the camera off.
    let conflicting = edit(&|b| {
        b["observation"] = prejoin_blocked("r9", 0.0);
        b["cameraRecovery"]["verification"] = verification(&s, &b["observation"]);
    });
    assert_eq!(
        sentence(&api, &conflicting).await,
        "Camera verification conflicts with the observation: Teams shows the camera off; turn the camera on in Teams and capture again"
    );
    let log = api.diagnostics();
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"guidance_failed\""))
        .collect();
    assert!(
        failed
            .iter()
            .any(|l| l.contains("\"stage\":\"camera_recovery\"")
                && l.contains("\"errorCode\":\"camera-recovery\"")
                && l.contains("\"status\":422")),
        "{log}"
    );
    assert!(!log.contains("private-") && !log.contains("Open camera settings"));
    assert_eq!(api.provider_calls(), 0);
}

#[tokio::test]
async fn live_probe_navigates_teams_and_never_completes() {
    let api = Api::start().await;
    let s = api.session().await;
    let probe = |state: &str, evidence: &[&str]| {
        json!({"profile": PROBE, "evidenceBasis": "liveProbe", "fixtureSupported": false,
               "settingsUiaProven": false, "rawPixelEvidenceUsed": false, "state": state,
               "evidence": evidence, "permissionState": "unknown", "verificationRequired": true})
    };
    let teams = |id: &str, age, elements| obs(id, "Microsoft Teams", age, elements);
    let (st, _, a) = step(
        &api,
        &body(
            &s,
            PROBE,
            teams("p1", 9.0, vec![el(&SETTINGS_MENU_ITEM, 0.7)]),
        ),
    )
    .await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]),
        (
            "next_step",
            &probe("teams_settings_menu_open", &["teamsSettingsMenuItem"])
        )
    );
    assert_eq!(a["target"]["label"], "Settings");
    let (st, _, a) = step(
        &api,
        &body(&s, PROBE, teams("p2", 8.0, vec![el(&DEVICES_TAB, 0.1)])),
    )
    .await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]),
        (
            "next_step",
            &probe("teams_settings_menu_open", &["teamsDevicesTab"])
        )
    );
    assert_eq!(a["target"]["label"], "Devices");
    let mut tab = el(&DEVICES_TAB, 0.1);
    tab["isSelected"] = json!(true);
    let (st, _, a) = step(
        &api,
        &body(
            &s,
            PROBE,
            teams("p3", 7.0, vec![tab, el(&DEVICES_CAMERA_SETTINGS, 0.4)]),
        ),
    )
    .await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]),
        (
            "next_step",
            &probe("teams_devices_open", &["teamsDevicesPage"])
        )
    );
    assert_eq!(a["target"]["label"], "Camera privacy settings");
    // Settings is never trusted by the probe: untargeted, then uninspectable.
    let (st, i, a) = step(&api, &body(&s, PROBE, settings("p4", 6.0, "off"))).await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]),
        (
            "clarification",
            &probe("system_camera_settings_unverified", &[])
        )
    );
    assert_eq!(
        i,
        "This profile cannot verify the Settings page; check yourself that Microsoft Teams may use the camera, then return to Teams."
    );
    let (st, _, a) = step(
        &api,
        &body(&s, PROBE, obs("p5", "Windows Settings", 5.0, vec![])),
    )
    .await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]),
        (
            "clarification",
            &probe("system_camera_settings_uninspectable", &[])
        )
    );
    // Back in Teams with the camera on: no permission change was seen, so nothing completes.
    let on = prejoin_on("p6", 4.0);
    let (st, _, a) = step(&api, &body(&s, PROBE, on.clone())).await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]["state"]),
        ("clarification", &json!("teams_prejoin_observed"))
    );
    assert_eq!(
        sentence(&api, &verified(&s, PROBE, on)).await,
        "The live probe profile never completes camera recovery; send no verification with it"
    );
    assert_eq!(api.provider_calls(), 0);
}

#[tokio::test]
async fn pinned_profile_proves_the_page_and_needs_reinitialisation() {
    let api = Api::start().await;
    let s = api.session().await;
    let mut tab = el(&DEVICES_TAB, 0.1);
    tab["isSelected"] = json!(true);
    let page = obs(
        "q1",
        "Microsoft Teams",
        9.0,
        vec![tab, el(&DEVICES_CAMERA_SETTINGS, 0.4)],
    );
    let (st, _, a) = step(&api, &body(&s, PINNED, page)).await;
    assert_eq!(st, "next_step");
    assert_eq!(
        a["cameraRecovery"],
        json!({"profile": PINNED, "evidenceBasis": "liveProbe", "fixtureSupported": false,
               "settingsUiaProven": true, "rawPixelEvidenceUsed": false,
               "settingsLaunchUri": "ms-settings:privacy-webcam", "state": "teams_devices_open",
               "evidence": ["teamsDevicesPage"], "permissionState": "unknown",
               "verificationRequired": true})
    );
    let (_, _, a) = step(&api, &body(&s, PINNED, prejoin_blocked("q2", 8.0))).await;
    assert_eq!(a["cameraRecovery"]["state"], "camera_block_confirmed");
    assert!(a["cameraRecovery"].get("settingsLaunchUri").is_none());
    // Without the page title the page is not proven.
    let unproven = obs(
        "q3",
        "Windows Settings",
        7.0,
        vec![switch(&APP_PERMISSION_TOGGLE, "off")],
    );
    let (st, _, a) = step(&api, &body(&s, PINNED, unproven)).await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]["state"]),
        ("clarification", &json!("system_camera_settings_unverified"))
    );
    let (_, _, a) = step(&api, &body(&s, PINNED, settings("q4", 6.0, "off"))).await;
    assert_eq!(a["cameraRecovery"]["state"], "user_action_required");
    let (_, _, a) = step(&api, &body(&s, PINNED, settings("q5", 5.0, "on"))).await;
    assert_eq!(
        (
            &a["cameraRecovery"]["state"],
            &a["cameraRecovery"]["permissionState"]
        ),
        (&json!("applicable_permission_on"), &json!("on"))
    );
    let (st, i, a) = step(&api, &body(&s, PINNED, prejoin_on("q6", 4.0))).await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]["state"]),
        ("clarification", &json!("camera_reinitialization_required"))
    );
    assert_eq!(
        i,
        "Teams has not restarted its camera since the permission changed; reopen the pre-join screen or restart Teams, then check again."
    );
    let mut back = prejoin_on("q7", 3.0);
    back["teamsCameraSessionState"] = json!("reinitialized");
    let (_, _, a) = step(&api, &body(&s, PINNED, back.clone())).await;
    assert_eq!(a["cameraRecovery"]["state"], "return_to_teams");
    assert_eq!(
        a["cameraRecovery"]["evidence"],
        json!(["cameraToggleOn", "cameraReinitialized"])
    );
    assert_eq!(
        sentence(&api, &verified(&s, PINNED, back.clone())).await,
        "Camera verification for the pinned profile must say how the camera was reinitialized (reinitializationMethod)"
    );
    let mut done = verified(&s, PINNED, back);
    done["cameraRecovery"]["verification"]["reinitializationMethod"] = json!("prejoinReopened");
    let (st, _, a) = step(&api, &done).await;
    assert_eq!(
        (st.as_str(), &a["cameraRecovery"]["verificationRequired"]),
        ("completed", &json!(false))
    );
    assert_eq!(api.provider_calls(), 0);
}

#[tokio::test]
async fn fail_closed_clarifications_and_revocation() {
    let api = Api::start().await;
    let s = api.session().await;
    let state = |a: &Value| {
        (
            a["status"].clone(),
            a["cameraRecovery"]["state"].clone(),
            a["cameraRecovery"]["permissionState"].clone(),
        )
    };
    let cases = [
        (
            "unsupported app",
            obs("f1", "Notepad", 9.0, vec![el(&OPEN_CAMERA_SETTINGS, 0.1)]),
            "unsupported",
            "unknown",
        ),
        (
            "wrong cause",
            obs(
                "f2",
                "Microsoft Teams",
                8.9,
                vec![switch(&CAMERA_TOGGLE, "off")],
            ),
            "teams_prejoin_observed",
            "unknown",
        ),
        (
            "already on",
            prejoin_on("f3", 8.8),
            "teams_prejoin_observed",
            "unknown",
        ),
        (
            "nothing known",
            obs("f4", "Microsoft Teams", 8.7, vec![]),
            "start",
            "unknown",
        ),
        (
            "ambiguous",
            obs(
                "f5",
                "Microsoft Teams",
                8.6,
                vec![switch(&CAMERA_TOGGLE, "off"), switch(&CAMERA_TOGGLE, "off")],
            ),
            "ambiguous",
            "unknown",
        ),
        (
            "off before any block",
            settings("f6", 8.5, "off"),
            "applicable_permission_off",
            "off",
        ),
        (
            "managed",
            obs(
                "f7",
                "Settings",
                8.4,
                vec![
                    el(&MANAGED_NOTICE, 0.1),
                    switch(&APP_PERMISSION_TOGGLE, "off"),
                ],
            ),
            "admin_managed",
            "managed",
        ),
        (
            "app switch missing",
            obs("f8", "Settings", 8.3, vec![el(&SETTINGS_PAGE_TITLE, 0.1)]),
            "camera_settings_open",
            "managed",
        ),
    ];
    for (name, observation, expected, permission) in cases {
        let (_, _, a) = step(&api, &body(&s, FIXTURE, observation)).await;
        assert_eq!(
            state(&a),
            (json!("clarification"), json!(expected), json!(permission)),
            "{name}"
        );
    }
    // A label is no fallback for a wrong automation id.
    let mut wrong = prejoin_blocked("f9", 8.2);
    wrong["elements"][2]["automationId"] = json!("prejoin-other-button");
    let (_, i, a) = step(&api, &body(&s, FIXTURE, wrong)).await;
    assert_eq!(a["cameraRecovery"]["state"], "teams_prejoin_observed");
    assert!(
        i.contains("Open camera settings button is not available"),
        "{i}"
    );
    // Revocation: on, then off again, voids the flow; the verification is then premature.
    step(&api, &body(&s, FIXTURE, prejoin_blocked("g1", 6.0))).await;
    step(&api, &body(&s, FIXTURE, settings("g2", 5.0, "off"))).await;
    step(&api, &body(&s, FIXTURE, settings("g3", 4.0, "on"))).await;
    let (_, i, a) = step(&api, &body(&s, FIXTURE, settings("g4", 3.0, "off"))).await;
    assert_eq!(
        state(&a),
        (
            json!("clarification"),
            json!("applicable_permission_off"),
            json!("off")
        )
    );
    assert_eq!(
        i,
        "The camera permission for Microsoft Teams was turned off again after it was on; start over from the Teams pre-join screen."
    );
    let back = prejoin_on("g5", 2.0);
    let (_, _, a) = step(&api, &body(&s, FIXTURE, back.clone())).await;
    assert_eq!(a["cameraRecovery"]["state"], "teams_prejoin_observed");
    assert_eq!(
        sentence(&api, &verified(&s, FIXTURE, back)).await,
        "Camera verification is premature: send it only with the Teams observation that was answered return_to_teams"
    );
}

#[tokio::test]
async fn target_ids_are_bound_and_the_record_keeps_order_and_ids() {
    let api = Api::start().await;
    let (a, b) = (api.session().await, api.session().await);
    let capture = prejoin_blocked("t1", 5.0);
    let (_, _, first) = step(&api, &body(&a, FIXTURE, capture.clone())).await;
    let (_, _, other) = step(&api, &body(&b, FIXTURE, capture.clone())).await;
    let id = first["target"]["targetId"].as_str().unwrap().to_owned();
    assert_ne!(
        Some(id.as_str()),
        other["target"]["targetId"].as_str(),
        "one id per session"
    );
    // The same capture resent with the issued id is the same capture.
    let mut resent = capture.clone();
    resent["elements"][2]["targetId"] = json!(id);
    let (_, _, again) = step(&api, &body(&a, FIXTURE, resent.clone())).await;
    assert_eq!(again["target"]["targetId"], json!(id));
    let forged = "An element carries a tgt. target id that was not issued for it in this observation and session; send the element without that id";
    // Another session, a moved element, a new capture: the id does not hold.
    assert_eq!(
        sentence(&api, &body(&b, FIXTURE, resent.clone())).await,
        forged
    );
    let mut moved = resent.clone();
    moved["elements"][2]["box"] = json!([0.6, 0.5, 0.2, 0.06]);
    assert_eq!(sentence(&api, &body(&a, FIXTURE, moved)).await, forged);
    let mut later = resent;
    later["id"] = json!("t2");
    later["capturedAt"] = json!(at(4.0));
    assert_eq!(sentence(&api, &body(&a, FIXTURE, later)).await, forged);
    // An element's own target id is used as it is.
    let mut own = prejoin_blocked("t3", 4.0);
    own["elements"][2]["targetId"] = json!("camera-button");
    let (_, _, answer) = step(&api, &body(&a, FIXTURE, own)).await;
    assert_eq!(answer["target"]["targetId"], "camera-button");
    // Capture order and one content per id.
    assert_eq!(
        sentence(&api, &body(&a, FIXTURE, prejoin_blocked("t4", 20.0))).await,
        "Camera recovery observations must arrive in capture order: this one was captured before the last one; send a fresh capture"
    );
    let mut changed = capture;
    changed["capturedAt"] = json!(at(1.0));
    assert_eq!(
        sentence(&api, &body(&a, FIXTURE, changed)).await,
        "This observation id was already used for a different capture in this session; give every capture a new id"
    );
    assert_eq!(api.provider_calls(), 0);
}

#[test]
fn docs_list_every_fixture_element() {
    let docs =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md"))
            .unwrap();
    for spec in ELEMENTS {
        let row = format!(
            "| `{}` | `{}` | `{}` | `{}` | `{}` |",
            spec.window, spec.role, spec.framework_id, spec.automation_id, spec.label
        );
        assert!(docs.contains(&row), "docs/api.md lacks the row {row}");
    }
}
