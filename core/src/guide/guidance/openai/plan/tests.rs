//! Plan mode of the OpenAI-compatible provider: the request it sends, its deadline, and the
//! plans it accepts and refuses.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::super::{MAX_PLAN_CONTENT_BYTES, parse_response, plan_call_deadline, request_body};
use crate::{
    guide::guidance::{
        model::{
            BoundaryKind, Bounds, Element, GuidanceStatus, Observation, PlanStepKind, StepOutcome,
            TaskProgress, TaskStatus, TaskStep, UiAction,
        },
        plan::{EMPTY_VALUE_HASH, is_task_id},
        provider::{ProviderError, ProviderRequest},
    },
    llm::RawResponse,
};

fn element(label: &str, control: Option<&str>) -> Element {
    Element {
        role: "button".to_owned(),
        label: label.to_owned(),
        bounds: Bounds {
            x: 0.1,
            y: 0.2,
            width: 0.3,
            height: 0.1,
        },
        confidence: 0.95,
        target_id: Some(format!("t-{label}")),
        control_id: control.map(str::to_owned),
        framework_id: Some("WPF".to_owned()),
        is_enabled: Some(true),
        is_offscreen: Some(false),
        targetable: Some(true),
        action: Some(UiAction::Invoke),
        ..Element::default()
    }
}

fn observation() -> Observation {
    Observation {
        id: "obs-1".to_owned(),
        window_id: "win-1".to_owned(),
        application: "MSGuide Demo".to_owned(),
        captured_at: OffsetDateTime::now_utc(),
        width: 4,
        height: 2,
        ocr_text: "Build overview".to_owned(),
        elements: vec![
            element("View logs", Some("c1")),
            element("No control", None),
            Element {
                is_enabled: Some(false),
                ..element("Disabled", Some("c3"))
            },
        ],
        image: None,
        automation_complete: true,
        resource_id: Some("build-42".to_owned()),
    }
}

fn answer(output: &Value) -> RawResponse {
    let content = output.to_string();
    let body = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": content}}]});
    RawResponse {
        status: 200,
        content_encoding: None,
        body: body.to_string().into_bytes(),
    }
}

fn intent_step(label: &str) -> Value {
    json!({"kind": "action", "instruction": format!("Then select {label}."),
           "intent": {"role": "button", "label": label, "action": "invoke"}})
}

fn output(steps: Vec<Value>, boundary: &str) -> Value {
    let steps = Value::Array(steps);
    json!({"instruction": "Follow these steps.", "status": "next_step", "targetIndex": null,
           "value": null, "scrollDirection": null, "remainingWork": null,
           "plan": {"steps": steps, "boundary": {"kind": boundary, "reason": "Look again after these.",
                    "needed": "A fresh observation."}}})
}

fn planned(output: &Value) -> Result<crate::guide::guidance::model::GuidanceResult, ProviderError> {
    parse_response(&answer(output), &observation(), true)
}

#[test]
fn a_plan_request_carries_the_task_schema_and_token_budget() {
    let obs = observation();
    let task = TaskProgress {
        task_id: "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d".to_owned(),
        step: 2,
        status: TaskStatus::Running,
        history: vec![TaskStep {
            step: 1,
            observation_id: "obs-0".to_owned(),
            after_observation_id: None,
            target_id: "t1".to_owned(),
            label: "View logs".to_owned(),
            action: UiAction::Invoke,
            outcome: StepOutcome::ScreenChanged,
        }],
        remaining_work: String::new(),
        user_input: "the build".to_owned(),
        plan: None,
        plan_cursor: 0,
        replan_reason: None,
    };
    let request = ProviderRequest {
        prompt: "Fix the build",
        observation: &obs,
        budget: Duration::from_secs(52),
        task: Some(&task),
        plan: true,
    };
    let body = request_body("gpt-test", &request).unwrap();
    assert_eq!(body["max_tokens"], 8000);
    let parts = body["messages"][1]["content"].as_array().unwrap();
    let text: Value = serde_json::from_str(parts[0]["text"].as_str().unwrap()).unwrap();
    let keys: Vec<&str> = text
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // serde_json's Value sorts keys; on the wire they follow the struct's order.
    assert_eq!(
        keys,
        [
            "planRequested",
            "planSchema",
            "request",
            "untrustedObservation",
            "untrustedTask"
        ]
    );
    assert_eq!(text["planRequested"], true);
    assert_eq!(text["untrustedTask"]["taskId"], task.task_id);
    assert_eq!(
        text["untrustedTask"]["history"][0]["outcome"],
        "screen_changed"
    );
    assert_eq!(text["untrustedTask"]["userInput"], "the build");
    assert_eq!(text["planSchema"]["properties"]["steps"]["maxItems"], 32);
    assert!(body.get("tools").is_none());
    let legacy = request_body(
        "gpt-test",
        &ProviderRequest {
            plan: false,
            task: None,
            ..request
        },
    )
    .unwrap();
    assert_eq!(legacy["max_tokens"], 1200);
    let parts = legacy["messages"][1]["content"].as_array().unwrap();
    let text: Value = serde_json::from_str(parts[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (text.get("planSchema"), &text["untrustedTask"]),
        (None, &Value::Null)
    );
}

#[test]
fn the_plan_deadline_is_fifty_seconds_within_the_window() {
    let now = OffsetDateTime::now_utc();
    let s = time::Duration::seconds;
    let deadline = |age: time::Duration| plan_call_deadline(now - age, now);
    assert_eq!(deadline(s(0)), Some(Duration::from_secs(50)));
    assert_eq!(deadline(s(-5)), Some(Duration::from_secs(50)));
    assert_eq!(deadline(s(5)), Some(Duration::from_secs(45)));
    assert_eq!(
        deadline(time::Duration::milliseconds(49_500)),
        Some(Duration::from_millis(500))
    );
    assert_eq!(deadline(s(50)), None);
}

#[test]
fn good_plans_become_canonical_segments() {
    let first = json!({"kind": "action", "instruction": "Select View logs.", "targetIndex": 0});
    for count in [3, 17, 32] {
        let mut steps = vec![first.clone()];
        steps.extend((1..count).map(|i| intent_step(&format!("Step {i}"))));
        let boundary = if count == 32 {
            "plan_limit"
        } else {
            "completion_candidate"
        };
        let result = planned(&output(steps, boundary)).unwrap_or_else(|e| panic!("{count}: {e:?}"));
        assert_eq!(
            (result.status, &result.target),
            (GuidanceStatus::NextStep, &None)
        );
        let plan = result.plan.unwrap();
        assert!(is_task_id(&plan.plan_id));
        assert_eq!(
            (plan.window_id.as_str(), plan.resource_id.as_deref()),
            ("win-1", Some("build-42"))
        );
        assert_eq!(plan.steps.len(), count);
        let bound = &plan.steps[0];
        assert_eq!(
            bound.control_id.as_deref(),
            Some("c1"),
            "the indexed element's control id"
        );
        let intent = bound.intent.as_ref().unwrap();
        assert_eq!(
            (intent.label.as_str(), intent.framework_id.as_deref()),
            ("View logs", Some("WPF"))
        );
        assert!(
            plan.steps[1..]
                .iter()
                .all(|s| s.control_id.is_none() && s.intent.is_some())
        );
    }
    let deferred = json!({"kind": "action", "instruction": "Type the name.", "value": "Ada",
        "intent": {"role": "edit", "label": "Name", "action": "set_value"}});
    let manual = json!({"kind": "manual", "instruction": "Sign in yourself."});
    let plan = planned(&output(vec![deferred, manual], "needs_input"))
        .unwrap()
        .plan
        .unwrap();
    assert_eq!(plan.steps[0].value_hash.as_deref(), Some(EMPTY_VALUE_HASH));
    assert_eq!(plan.steps[1].kind, PlanStepKind::Manual);
    for boundary in [
        "resource",
        "needs_input",
        "permission",
        "observation",
        "unsupported",
        "plan_limit",
    ] {
        let plan = planned(&output(vec![], boundary)).unwrap().plan.unwrap();
        assert!(plan.steps.is_empty(), "{boundary}");
        assert_ne!(plan.boundary.kind, BoundaryKind::CompletionCandidate);
    }
    let a = planned(&output(vec![], "observation"))
        .unwrap()
        .plan
        .unwrap()
        .plan_id;
    let b = planned(&output(vec![], "observation"))
        .unwrap()
        .plan
        .unwrap()
        .plan_id;
    assert_ne!(a, b, "a fresh plan id per answer");
}

type Break = fn(&mut Value);

#[test]
fn a_plan_that_breaks_any_rule_fails_the_whole_answer() {
    let cases: Vec<(&str, Break)> = vec![
        ("root targetIndex", |o| o["targetIndex"] = json!(0)),
        ("root value", |o| o["value"] = json!("x")),
        ("root scrollDirection", |o| {
            o["scrollDirection"] = json!("down")
        }),
        ("status clarification", |o| {
            o["status"] = json!("clarification")
        }),
        ("no plan", |o| {
            o.as_object_mut().unwrap().remove("plan");
        }),
        ("null plan", |o| o["plan"] = Value::Null),
        ("plan id from the model", |o| {
            o["plan"]["planId"] = json!("3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d")
        }),
        ("step extra key", |o| {
            o["plan"]["steps"][1]["controlId"] = json!("c1")
        }),
        ("index and intent", |o| {
            o["plan"]["steps"][1]["targetIndex"] = json!(0)
        }),
        ("neither index nor intent", |o| {
            o["plan"]["steps"][1]
                .as_object_mut()
                .unwrap()
                .remove("intent");
        }),
        ("index 0.0", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(0.0)
        }),
        ("index string", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!("0")
        }),
        ("index boolean", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(false)
        }),
        ("index -1", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(-1)
        }),
        ("index past the elements", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(3)
        }),
        ("element without control id", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(1)
        }),
        ("element not executable", |o| {
            o["plan"]["steps"][0]["targetIndex"] = json!(2)
        }),
        ("manual step first", |o| {
            o["plan"]["steps"][0] = json!({"kind": "manual", "instruction": "By hand."})
        }),
        (
            "manual step with intent",
            |o| o["plan"]["steps"][1] = json!({"kind": "manual", "instruction": "By hand.", "intent": {"role": "button", "label": "X", "action": "invoke"}}),
        ),
        ("unknown step kind", |o| {
            o["plan"]["steps"][1]["kind"] = json!("wait")
        }),
        ("33 steps", |o| {
            o["plan"]["steps"] = json!(vec![intent_step("X"); 33]);
            o["plan"]["boundary"]["kind"] = json!("plan_limit");
        }),
        ("32 steps ending in completion", |o| {
            o["plan"]["steps"] = json!(vec![intent_step("X"); 32]);
            o["plan"]["boundary"]["kind"] = json!("completion_candidate");
        }),
        ("URL in a step", |o| {
            o["plan"]["steps"][1]["instruction"] = json!("Open https://example.com now.")
        }),
        ("blank step instruction", |o| {
            o["plan"]["steps"][1]["instruction"] = json!("  ")
        }),
        ("step instruction of 501", |o| {
            o["plan"]["steps"][1]["instruction"] = json!("i".repeat(501))
        }),
        ("blank reason", |o| {
            o["plan"]["boundary"]["reason"] = json!(" ")
        }),
        ("blank need", |o| {
            o["plan"]["boundary"]["needed"] = json!("")
        }),
        ("unknown boundary", |o| {
            o["plan"]["boundary"]["kind"] = json!("done")
        }),
        ("toggle without state", |o| {
            o["plan"]["steps"][1]["intent"]["action"] = json!("toggle")
        }),
        ("select of a selected element", |o| {
            o["plan"]["steps"][1]["intent"]["action"] = json!("select");
            o["plan"]["steps"][1]["intent"]["isSelected"] = json!(true);
        }),
        ("set_value without value", |o| {
            o["plan"]["steps"][1]["intent"]["action"] = json!("set_value")
        }),
        ("scroll without direction", |o| {
            o["plan"]["steps"][1]["intent"]["action"] = json!("scroll")
        }),
        ("value on invoke", |o| {
            o["plan"]["steps"][1]["value"] = json!("x")
        }),
        ("intent extra key", |o| {
            o["plan"]["steps"][1]["intent"]["controlId"] = json!("c1")
        }),
    ];
    let good = output(
        vec![
            json!({"kind": "action", "instruction": "Select View logs.", "targetIndex": 0}),
            intent_step("Next"),
        ],
        "observation",
    );
    assert!(planned(&good).is_ok());
    for (name, breaks) in cases {
        let mut bad = good.clone();
        breaks(&mut bad);
        assert_eq!(
            planned(&bad).map(|_| ()),
            Err(ProviderError::InvalidResult),
            "{name}"
        );
    }
    let mut incomplete = observation();
    incomplete.automation_complete = false;
    assert_eq!(
        parse_response(&answer(&good), &incomplete, true).map(|_| ()),
        Err(ProviderError::InvalidResult),
        "an indexed element needs a complete observation"
    );
    assert_eq!(
        parse_response(&answer(&good), &observation(), false).map(|_| ()),
        Err(ProviderError::InvalidResult),
        "a plan outside plan mode"
    );
}

#[test]
fn plan_content_may_reach_64_kib() {
    // Whitespace before the JSON object raises the content's size without changing it.
    let sized = |extra: usize| {
        let content = format!(
            "{}{}",
            " ".repeat(extra),
            output(vec![intent_step("Next")], "observation")
        );
        let body = json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}]});
        RawResponse {
            status: 200,
            content_encoding: None,
            body: body.to_string().into_bytes(),
        }
    };
    let base = output(vec![intent_step("Next")], "observation")
        .to_string()
        .len();
    let fits = sized(MAX_PLAN_CONTENT_BYTES - base);
    assert!(
        parse_response(&fits, &observation(), true).is_ok(),
        "64 KiB exactly"
    );
    let over = sized(MAX_PLAN_CONTENT_BYTES - base + 1);
    assert_eq!(
        parse_response(&over, &observation(), true).map(|_| ()),
        Err(ProviderError::InvalidResult)
    );
}
