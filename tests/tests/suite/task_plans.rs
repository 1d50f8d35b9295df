//! `/v1/guidance` with task context and plan segments: every new field at its boundary, the
//! cross-field rules, the echo and the content-free diagnostics, the demo's plans, and plans a
//! provider gets wrong (502, never passed through).

use std::sync::{Arc, Mutex};

use local_core::guide::guidance::{
    model::{
        BoundaryKind, GuidanceResult, GuidanceStatus, Mode, PlanBoundary, PlanIntent, PlanSegment,
        PlanStep, PlanStepKind, Target, UiAction,
    },
    plan::intent_of,
};
use serde_json::{Value, json};

use super::support::{Options, Scripted, Server, button, guidance_body, observation, temp_dir};

const TASK_ID: &str = "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d";

fn history(steps: std::ops::RangeInclusive<u32>) -> Value {
    steps
        .map(|n| {
            json!({"step": n, "observationId": "obs-0", "targetId": "t1", "label": "View logs",
                   "action": "invoke", "outcome": "effect_observed"})
        })
        .collect()
}

fn plan_step(label: &str) -> Value {
    json!({"kind": "action", "instruction": format!("Select {label}."),
           "intent": {"role": "button", "label": label, "action": "invoke"},
           "controlId": null, "value": null, "scrollDirection": null, "valueHash": null})
}

fn client_plan(steps: usize, boundary: &str) -> Value {
    json!({"planId": "9b2d7c1e-0a4f-4e3b-8c6d-5f1a2b3c4d5e", "windowId": "win-1", "resourceId": null,
           "steps": (0..steps).map(|_| plan_step("View logs")).collect::<Vec<_>>(),
           "boundary": {"kind": boundary, "reason": "Stop here.", "needed": "A fresh look."}})
}

/// Sends the demo body with a task, changed by `edit`; returns (status, type, loc).
async fn send(
    server: &Server,
    session: &str,
    edit: impl FnOnce(&mut Value),
) -> (u16, String, Value) {
    let mut body = guidance_body(
        session,
        observation(server, "Build overview", vec![button("View logs")]),
    );
    body["task"] = json!({"taskId": TASK_ID, "step": 2});
    edit(&mut body);
    let res = server.guidance(&body).await;
    assert!(
        !res.text().contains("private-"),
        "input echoed: {}",
        res.text()
    );
    if res.status == 422 {
        let item = &res.json()["detail"][0];
        (422, res.validation_type(), item["loc"].clone())
    } else {
        (res.status, String::new(), Value::Null)
    }
}

#[tokio::test]
async fn task_and_plan_segment_fields_at_their_boundaries() {
    let server = Server::start().await;
    let s = server.session().await;
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let t = |f: fn(&mut Value)| -> Edit { Box::new(f) };
    let ok = (200, "");
    let cases: Vec<(&str, Edit, (u16, &str))> = vec![
        ("taskId lower-case uuid", t(|_| {}), ok),
        (
            "taskId upper-case",
            t(|b| b["task"]["taskId"] = json!(TASK_ID.to_uppercase())),
            (422, "string_pattern_mismatch"),
        ),
        (
            "taskId one short",
            t(|b| b["task"]["taskId"] = json!(&TASK_ID[1..])),
            (422, "string_too_short"),
        ),
        (
            "taskId one long",
            t(|b| b["task"]["taskId"] = json!(format!("{TASK_ID}0"))),
            (422, "string_too_long"),
        ),
        (
            "taskId number",
            t(|b| b["task"]["taskId"] = json!(7)),
            (422, "string_type"),
        ),
        (
            "taskId missing",
            t(|b| {
                b["task"].as_object_mut().unwrap().remove("taskId");
            }),
            (422, "missing"),
        ),
        ("step 1", t(|b| b["task"]["step"] = json!(1)), ok),
        ("step 10000", t(|b| b["task"]["step"] = json!(10_000)), ok),
        (
            "step 0",
            t(|b| b["task"]["step"] = json!(0)),
            (422, "greater_than_equal"),
        ),
        (
            "step 10001",
            t(|b| b["task"]["step"] = json!(10_001)),
            (422, "less_than_equal"),
        ),
        (
            "step 2.0",
            t(|b| b["task"]["step"] = json!(2.0)),
            (422, "int_type"),
        ),
        (
            "step true",
            t(|b| b["task"]["step"] = json!(true)),
            (422, "int_type"),
        ),
        (
            "step string",
            t(|b| b["task"]["step"] = json!("2")),
            (422, "int_type"),
        ),
        (
            "status review_required",
            t(|b| b["task"]["status"] = json!("review_required")),
            ok,
        ),
        (
            "status failed",
            t(|b| b["task"]["status"] = json!("failed")),
            ok,
        ),
        (
            "status unknown word",
            t(|b| b["task"]["status"] = json!("done")),
            (422, "enum"),
        ),
        (
            "history of 16",
            t(|b| {
                b["task"]["step"] = json!(17);
                b["task"]["history"] = history(1..=16);
            }),
            ok,
        ),
        (
            "history of 17",
            t(|b| {
                b["task"]["step"] = json!(18);
                b["task"]["history"] = history(1..=17);
            }),
            (422, "too_long"),
        ),
        (
            "history reaching step",
            t(|b| b["task"]["history"] = history(1..=2)),
            (422, "value_error"),
        ),
        (
            "history repeating a step",
            t(|b| {
                b["task"]["step"] = json!(5);
                b["task"]["history"] = json!([history(1..=1)[0], history(1..=1)[0]]);
            }),
            (422, "value_error"),
        ),
        (
            "history step 0",
            t(|b| {
                b["task"]["history"] = history(0..=0);
            }),
            (422, "greater_than_equal"),
        ),
        (
            "history outcome",
            t(|b| {
                b["task"]["history"] = history(1..=1);
                b["task"]["history"][0]["outcome"] = json!("done");
            }),
            (422, "enum"),
        ),
        (
            "history extra key",
            t(|b| {
                b["task"]["history"] = history(1..=1);
                b["task"]["history"][0]["extra"] = json!(1);
            }),
            (422, "extra_forbidden"),
        ),
        (
            "remainingWork 1000",
            t(|b| b["task"]["remainingWork"] = json!("r".repeat(1000))),
            ok,
        ),
        (
            "remainingWork 1001",
            t(|b| b["task"]["remainingWork"] = json!("r".repeat(1001))),
            (422, "string_too_long"),
        ),
        (
            "remainingWork null",
            t(|b| b["task"]["remainingWork"] = Value::Null),
            (422, "string_type"),
        ),
        (
            "userInput 1000",
            t(|b| b["task"]["userInput"] = json!("u".repeat(1000))),
            ok,
        ),
        (
            "userInput 1001",
            t(|b| b["task"]["userInput"] = json!("u".repeat(1001))),
            (422, "string_too_long"),
        ),
        (
            "replanReason 500",
            t(|b| b["task"]["replanReason"] = json!("r".repeat(500))),
            ok,
        ),
        (
            "replanReason 501",
            t(|b| b["task"]["replanReason"] = json!("r".repeat(501))),
            (422, "string_too_long"),
        ),
        (
            "planCursor 0 without plan",
            t(|b| b["task"]["planCursor"] = json!(0)),
            ok,
        ),
        (
            "planCursor 1 without plan",
            t(|b| b["task"]["planCursor"] = json!(1)),
            (422, "value_error"),
        ),
        (
            "planCursor at the plan's end",
            t(|b| {
                b["task"]["plan"] = client_plan(1, "observation");
                b["task"]["planCursor"] = json!(1);
            }),
            ok,
        ),
        (
            "planCursor past the plan",
            t(|b| {
                b["task"]["plan"] = client_plan(1, "observation");
                b["task"]["planCursor"] = json!(2);
            }),
            (422, "value_error"),
        ),
        (
            "planCursor 32 of 32",
            t(|b| {
                b["task"]["plan"] = client_plan(32, "plan_limit");
                b["task"]["planCursor"] = json!(32);
            }),
            ok,
        ),
        (
            "planCursor 33",
            t(|b| b["task"]["planCursor"] = json!(33)),
            (422, "less_than_equal"),
        ),
        (
            "planCursor 1.0",
            t(|b| b["task"]["planCursor"] = json!(1.0)),
            (422, "int_type"),
        ),
        (
            "plan of 33 steps",
            t(|b| b["task"]["plan"] = client_plan(33, "plan_limit")),
            (422, "too_long"),
        ),
        (
            "plan of 32 ending in completion",
            t(|b| b["task"]["plan"] = client_plan(32, "completion_candidate")),
            (422, "value_error"),
        ),
        (
            "plan boundary kind",
            t(|b| b["task"]["plan"] = client_plan(0, "finished")),
            (422, "enum"),
        ),
        (
            "plan id upper-case",
            t(|b| {
                b["task"]["plan"] = client_plan(0, "observation");
                b["task"]["plan"]["planId"] = json!(TASK_ID.to_uppercase());
            }),
            (422, "string_pattern_mismatch"),
        ),
        (
            "plan step instruction 501",
            t(|b| {
                b["task"]["plan"] = client_plan(1, "observation");
                b["task"]["plan"]["steps"][0]["instruction"] = json!("i".repeat(501));
            }),
            (422, "string_too_long"),
        ),
        (
            "plan manual step first",
            t(|b| {
                let mut p = client_plan(2, "needs_input");
                p["steps"][0] = json!({"kind": "manual", "instruction": "Do it by hand."});
                b["task"]["plan"] = p;
            }),
            (422, "value_error"),
        ),
        (
            "task extra key",
            t(|b| b["task"]["extra"] = json!(1)),
            (422, "extra_forbidden"),
        ),
        ("task null", t(|b| b["task"] = Value::Null), ok),
        (
            "planSegments true",
            t(|b| b["planSegments"] = json!(true)),
            ok,
        ),
        (
            "planSegments false",
            t(|b| b["planSegments"] = json!(false)),
            ok,
        ),
        (
            "planSegments string",
            t(|b| b["planSegments"] = json!("true")),
            (422, "bool_type"),
        ),
        (
            "planSegments 1",
            t(|b| b["planSegments"] = json!(1)),
            (422, "bool_type"),
        ),
        (
            "planSegments null",
            t(|b| b["planSegments"] = Value::Null),
            (422, "bool_type"),
        ),
        (
            "cameraRecovery with an unknown profile",
            t(|b| b["cameraRecovery"] = json!({"profile": "x"})),
            (422, "enum"),
        ),
    ];
    for (name, edit, (status, kind)) in cases {
        let (got_status, got_kind, _) = send(&server, &s, edit).await;
        assert_eq!((got_status, got_kind.as_str()), (status, kind), "{name}");
    }
    // Cross-field refusals name the task (or its plan), never the input.
    let (_, _, loc) = send(&server, &s, |b| b["task"]["history"] = history(1..=2)).await;
    assert_eq!(loc, json!(["body", "task"]));
    let (_, _, loc) = send(&server, &s, |b| {
        b["task"]["plan"] = client_plan(32, "completion_candidate");
    })
    .await;
    assert_eq!(loc, json!(["body", "task", "plan"]));
}

#[tokio::test]
async fn task_reaches_the_provider_is_echoed_and_stays_out_of_the_log() {
    let seen: Arc<Mutex<Vec<(usize, String, bool)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let provider = Scripted::answering(move |request| {
        if let Some(task) = request.task {
            record.lock().unwrap().push((
                task.history.len(),
                task.user_input.clone(),
                request.plan,
            ));
        }
        GuidanceResult {
            instruction: "Look again".to_owned(),
            status: GuidanceStatus::Clarification,
            target: None,
            citations: vec![],
            mode: Mode::Model,
            remaining_work: None,
            plan: None,
        }
    });
    let dir = temp_dir("task-log");
    let log = dir.join("backend.log");
    let server = Server::with(Options {
        provider,
        diagnostic_log: Some(log.clone()),
        ..Options::default()
    })
    .await;
    let s = server.session().await;
    let mut body = guidance_body(
        &s,
        observation(&server, "private-ocr", vec![button("private-label")]),
    );
    let mut steps = history(1..=3);
    steps[1]["label"] = json!("private-history-label");
    body["task"] = json!({"taskId": TASK_ID, "step": 4, "history": steps,
        "userInput": "private-user-input", "remainingWork": "private-remaining"});
    let res = server.guidance(&body).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let answer = res.json();
    assert_eq!(
        (answer["taskId"].as_str(), answer["step"].as_u64()),
        (Some(TASK_ID), Some(4))
    );
    assert_eq!(answer.get("plan"), None);
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![(3, "private-user-input".to_owned(), false)]
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("private-"), "task text reached the log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let request_lines: Vec<&Value> = lines
        .iter()
        .filter(|l| l["correlationId"].is_string())
        .collect();
    assert!(request_lines.len() >= 2, "{lines:?}");
    for line in request_lines {
        assert_eq!(
            (line["taskId"].as_str(), line["step"].as_u64()),
            (Some(TASK_ID), Some(4)),
            "{line}"
        );
    }
    // Without a task, neither the answer nor the log names one.
    let plain = server
        .guidance(&guidance_body(&s, observation(&server, "", vec![])))
        .await
        .json();
    assert_eq!((plain.get("taskId"), plain.get("step")), (None, None));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn demo_plans_for_each_stage_and_another_application() {
    let server = Server::start().await;
    let s = server.session().await;
    let all = ["View logs", "Open troubleshooting", "Mark resolved"];
    let stages: [(&str, &[&str]); 4] = [
        ("Build overview", &all),
        ("Build failed: exit code 1", &all[1..]),
        ("Check compiler errors and missing dependencies", &all[2..]),
        ("Issue resolved", &[]),
    ];
    let mut plan_ids = std::collections::HashSet::new();
    for (ocr, labels) in stages {
        let mut obs = observation(&server, ocr, all.iter().map(|l| button(l)).collect());
        obs["resourceId"] = json!("build-42");
        let mut body = guidance_body(&s, obs);
        body["planSegments"] = json!(true);
        body["task"] = json!({"taskId": TASK_ID, "step": 1});
        let res = server.guidance(&body).await;
        assert_eq!(res.status, 200, "{}", res.text());
        let mut answer = res.json();
        assert_eq!(
            (
                answer["status"].as_str(),
                answer["instruction"].as_str(),
                &answer["target"]
            ),
            (
                Some("next_step"),
                Some("Demo plan segment; local checks are required before every action."),
                &Value::Null
            )
        );
        assert_eq!(
            (answer["taskId"].as_str(), answer["step"].as_u64()),
            (Some(TASK_ID), Some(1))
        );
        let plan = answer["plan"].take();
        let id = plan["planId"].as_str().unwrap();
        assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 4);
        assert_eq!(id, id.to_lowercase());
        assert!(plan_ids.insert(id.to_owned()), "plan ids are fresh");
        let steps: Vec<Value> = labels
            .iter()
            .map(|label| json!({"kind": "action", "instruction": format!("Demo: select {label}."),
                "intent": {"role": "button", "label": label, "action": "invoke", "frameworkId": "WPF"},
                "controlId": null, "value": null, "scrollDirection": null, "valueHash": null}))
            .collect();
        assert_eq!(
            plan,
            json!({"planId": id, "windowId": "win-1", "resourceId": "build-42", "steps": steps,
                "boundary": {"kind": "completion_candidate",
                    "reason": "Review the demo's Issue resolved state; goal completion is not independently verified.",
                    "needed": ""}}),
            "{ocr}"
        );
    }
    let mut other = observation(&server, "Build overview", vec![button("View logs")]);
    other["application"] = json!("Other app");
    let mut body = guidance_body(&s, other);
    body["planSegments"] = json!(true);
    let answer = server.guidance(&body).await.json();
    let plan = &answer["plan"];
    assert_eq!(
        (&plan["steps"], &plan["resourceId"], &plan["boundary"]),
        (
            &json!([]),
            &Value::Null,
            &json!({"kind": "observation",
            "reason": "The deterministic demo needs its supported local resource.",
            "needed": "Select and approve the MSGuide Demo window."})
        )
    );
    assert!(plan_ids.insert(plan["planId"].as_str().unwrap().to_owned()));
    assert_eq!(answer.get("taskId"), None);
}

fn executable(label: &str, control: &str) -> Value {
    json!({"role": "button", "label": label, "box": [0.1, 0.2, 0.3, 0.1], "confidence": 0.95,
           "targetId": format!("t-{control}"), "controlId": control, "isEnabled": true, "isOffscreen": false,
           "targetable": true, "action": "invoke"})
}

fn provider_plan(observation: &local_core::guide::guidance::model::Observation) -> PlanSegment {
    let element = &observation.elements[0];
    PlanSegment {
        plan_id: "5c8f3b2a-1d4e-4f6a-8b9c-0d1e2f3a4b5c".to_owned(),
        window_id: observation.window_id.clone(),
        resource_id: observation.resource_id.clone(),
        steps: vec![
            PlanStep {
                kind: PlanStepKind::Action,
                instruction: "Select View logs.".to_owned(),
                intent: intent_of(element),
                control_id: element.control_id.clone(),
                value: None,
                scroll_direction: None,
                value_hash: None,
            },
            PlanStep {
                kind: PlanStepKind::Action,
                instruction: "Then open troubleshooting.".to_owned(),
                intent: Some(PlanIntent {
                    role: "button".to_owned(),
                    label: "Open troubleshooting".to_owned(),
                    action: UiAction::Invoke,
                    automation_id: None,
                    framework_id: None,
                    toggle_state: None,
                    is_selected: None,
                }),
                control_id: None,
                value: None,
                scroll_direction: None,
                value_hash: None,
            },
        ],
        boundary: PlanBoundary {
            kind: BoundaryKind::Observation,
            reason: "Check the screen after these steps.".to_owned(),
            needed: "A fresh observation.".to_owned(),
        },
    }
}

type Forge = fn(&mut GuidanceResult);

#[tokio::test]
async fn provider_plans_are_validated_and_bad_ones_are_502() {
    let cases: Vec<(&str, Forge, u16)> = vec![
        ("a good plan", |_| {}, 200),
        ("no plan", |r| r.plan = None, 502),
        (
            "another window",
            |r| r.plan.as_mut().unwrap().window_id = "win-2".to_owned(),
            502,
        ),
        (
            "another resource",
            |r| r.plan.as_mut().unwrap().resource_id = Some("doc-2".to_owned()),
            502,
        ),
        (
            "an unknown control",
            |r| r.plan.as_mut().unwrap().steps[0].control_id = Some("c-9".to_owned()),
            502,
        ),
        (
            "a forged intent",
            |r| {
                r.plan.as_mut().unwrap().steps[0]
                    .intent
                    .as_mut()
                    .unwrap()
                    .label = "Format disk".to_owned()
            },
            502,
        ),
        (
            "a plan beside a target",
            |r| r.target = Some(Target::default()),
            502,
        ),
        (
            "a plan with clarification",
            |r| r.status = GuidanceStatus::Clarification,
            502,
        ),
        (
            "33 steps",
            |r| {
                let p = r.plan.as_mut().unwrap();
                p.steps = vec![p.steps[1].clone(); 33];
                p.boundary.kind = BoundaryKind::PlanLimit;
            },
            502,
        ),
        (
            "a manual step first",
            |r| {
                r.plan.as_mut().unwrap().steps[0] = PlanStep {
                    kind: PlanStepKind::Manual,
                    instruction: "By hand.".to_owned(),
                    intent: None,
                    control_id: None,
                    value: None,
                    scroll_direction: None,
                    value_hash: None,
                }
            },
            502,
        ),
        (
            "a blank boundary need",
            |r| r.plan.as_mut().unwrap().boundary.needed = " ".to_owned(),
            502,
        ),
        (
            "a plan id not a uuid",
            |r| r.plan.as_mut().unwrap().plan_id = "plan-1".to_owned(),
            502,
        ),
    ];
    for (name, forge, status) in cases {
        let dir = temp_dir("plan-502");
        let log = dir.join("backend.log");
        let provider = Scripted::answering(move |request| {
            let mut result = GuidanceResult {
                instruction: "Follow the plan.".to_owned(),
                status: GuidanceStatus::NextStep,
                target: None,
                citations: vec![],
                mode: Mode::Model,
                remaining_work: None,
                plan: Some(provider_plan(request.observation)),
            };
            assert!(request.plan, "the provider is asked for a plan");
            forge(&mut result);
            result
        });
        let server = Server::with(Options {
            provider,
            diagnostic_log: Some(log.clone()),
            ..Options::default()
        })
        .await;
        let s = server.session().await;
        let mut obs = observation(&server, "private-ocr", vec![executable("View logs", "c-1")]);
        obs["resourceId"] = json!("doc-1");
        let mut body = guidance_body(&s, obs);
        body["planSegments"] = json!(true);
        let res = server.guidance(&body).await;
        assert_eq!(res.status, status, "{name}: {}", res.text());
        if status == 502 {
            assert_eq!(res.detail(), "Invalid guidance result", "{name}");
            assert_eq!(
                res.header("x-msguide-error-code"),
                Some("guidance-invalid-result"),
                "{name}"
            );
            assert!(res.header("x-msguide-correlation-id").is_some(), "{name}");
        } else {
            let plan = &res.json()["plan"];
            assert_eq!(plan["steps"][0]["controlId"], "c-1");
            assert_eq!(
                plan["steps"][0]["intent"],
                json!({"role": "button", "label": "View logs", "action": "invoke"})
            );
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains(r#""planSteps":2,"boundary":"observation""#),
                "{text}"
            );
        }
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains("private-"));
        if ["another window", "33 steps", "a manual step first"].contains(&name) {
            assert!(text.contains(r#""stage":"plan_validation""#), "{text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
