//! Every example of the OpenAPI document, one function each, named by its route and its
//! example: the routes' `utoipa::path` attributes refer to them, so a handler's file holds
//! the handler and its documentation, not kilobytes of sample bodies.

use serde_json::{Value, json};

/// Low risk: view_logs (application is optional, default MSGuide Demo).
pub(crate) fn actions_view_logs() -> Value {
    json!({
        "tool": "view_logs",
        "parameters": {
            "application": "MSGuide Demo"
        }
    })
}

/// Medium risk: create_work_item (title required, description optional).
pub(crate) fn actions_create_work_item() -> Value {
    json!({
        "tool": "create_work_item",
        "parameters": {
            "title": "Printer on floor 3 is offline",
            "description": "Reported from the demo"
        }
    })
}

/// High risk: answers 403 STEP_UP_REQUIRED.
pub(crate) fn actions_high_risk() -> Value {
    json!({
        "tool": "delete_personal_data",
        "parameters": {}
    })
}

/// Unknown or blocked: answers 403 DENIED.
pub(crate) fn actions_unknown() -> Value {
    json!({
        "tool": "deploy_production",
        "parameters": {}
    })
}

/// modify_service_config or delete_personal_data.
pub(crate) fn actions_step_up() -> Value {
    json!({
        "status": "STEP_UP_REQUIRED",
        "detail": "External actions are disabled"
    })
}

/// Any tool but the four named ones.
pub(crate) fn actions_denied() -> Value {
    json!({
        "status": "DENIED",
        "detail": "External actions are disabled"
    })
}

/// The request broke its contract.
pub(crate) fn actions_invalid() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "tool"
                ],
                "type": "string_too_long",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// create_work_item without a title, an unknown parameter, or a value out of range.
pub(crate) fn actions_parameters() -> Value {
    json!({
        "detail": "Invalid mock tool parameters"
    })
}

/// The example of actions status 422.
pub(crate) fn actions_status_422() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "grantToken"
                ],
                "type": "missing",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// The request broke its contract.
pub(crate) fn assist_invalid() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "prompt"
                ],
                "type": "missing",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// context.sessionId is not the request's sessionId.
pub(crate) fn assist_other_session() -> Value {
    json!({
        "detail": "Context session does not match request"
    })
}

/// context.timestamp is 60 s old or more, or over 5 s in the future.
pub(crate) fn assist_stale() -> Value {
    json!({
        "detail": "Observation must be at most 60 seconds old and at most 5 seconds in the future"
    })
}

/// The example of audit status 422.
pub(crate) fn audit_status_422() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "query",
                    "limit"
                ],
                "type": "less_than_equal",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// The demo's next step.
pub(crate) fn guidance_step() -> Value {
    json!({
        "instruction": "Demo: select View logs yourself, then check the screen again.",
        "status": "next_step",
        "target": {
            "label": "View logs",
            "box": [
                0.1,
                0.2,
                0.3,
                0.1
            ],
            "confidence": 0.95,
            "processId": null,
            "targetId": null,
            "automationId": null,
            "frameworkId": null,
            "isEnabled": null,
            "isOffscreen": null,
            "toggleState": null,
            "action": null
        },
        "citations": [],
        "mode": "demo",
        "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b",
        "observationId": "obs-1",
        "windowId": "win-1"
    })
}

/// The demo's plan segment for a task (planSegments: true).
pub(crate) fn guidance_plan() -> Value {
    json!({
        "instruction": "Demo plan segment; local checks are required before every action.",
        "status": "next_step",
        "target": null,
        "citations": [],
        "mode": "demo",
        "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b",
        "observationId": "obs-1",
        "windowId": "win-1",
        "plan": {
            "planId": "9b2d7c1e-0a4f-4e3b-8c6d-5f1a2b3c4d5e",
            "windowId": "win-1",
            "resourceId": null,
            "steps": [
                {
                    "kind": "action",
                    "instruction": "Demo: select Mark resolved.",
                    "intent": {
                        "role": "button",
                        "label": "Mark resolved",
                        "action": "invoke",
                        "frameworkId": "WPF"
                    },
                    "controlId": null,
                    "value": null,
                    "scrollDirection": null,
                    "valueHash": null
                }
            ],
            "boundary": {
                "kind": "completion_candidate",
                "reason": "Review the demo's Issue resolved state; goal completion is not independently verified.",
                "needed": ""
            }
        },
        "taskId": "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d",
        "step": 3
    })
}

/// The camera fixture's first step: Windows blocks the camera for Teams.
pub(crate) fn guidance_camera() -> Value {
    json!({
        "instruction": "Windows blocks the camera for Teams; select Open camera settings.",
        "status": "next_step",
        "target": {
            "label": "Open camera settings",
            "box": [
                0.4,
                0.7,
                0.2,
                0.06
            ],
            "confidence": 0.95,
            "processId": null,
            "targetId": "tgt.q3V0m4m3Yx2p8b0kU5l1f0nQJj3dJ0e2xwz9mVQk3aA",
            "automationId": "prejoin-open-camera-settings",
            "frameworkId": "Chrome",
            "isEnabled": true,
            "isOffscreen": false,
            "toggleState": null,
            "action": null
        },
        "citations": [],
        "mode": "demo",
        "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b",
        "observationId": "obs-1",
        "windowId": "win-teams",
        "cameraRecovery": {
            "profile": "teams-camera-recovery-win11-24h2-en-US-fixture-v1",
            "evidenceBasis": "fixture",
            "fixtureSupported": true,
            "settingsUiaProven": false,
            "rawPixelEvidenceUsed": false,
            "state": "camera_block_confirmed",
            "evidence": [
                "cameraToggleOff",
                "cameraBlockIndicator",
                "cameraSettingsButton"
            ],
            "permissionState": "unknown",
            "verificationRequired": true
        }
    })
}

/// The request broke its contract.
pub(crate) fn guidance_invalid() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "observation",
                    "elements",
                    1,
                    "valueLength"
                ],
                "type": "int_type",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// capturedAt is 60 s old or more, or over 5 s in the future.
pub(crate) fn guidance_stale() -> Value {
    json!({
        "detail": "Observation must be at most 60 seconds old and at most 5 seconds in the future"
    })
}

/// 17 history entries (at most 16).
pub(crate) fn guidance_history() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "task",
                    "history"
                ],
                "type": "too_long",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// History steps not strictly increasing or not all below step, or planCursor past the plan.
pub(crate) fn guidance_task() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "task"
                ],
                "type": "value_error",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// The task's plan breaks a segment rule (32 steps ending in completion_candidate, a manual step not last, ...).
pub(crate) fn guidance_task_plan() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "task",
                    "plan"
                ],
                "type": "value_error",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// planSegments must be a JSON boolean.
pub(crate) fn guidance_plan_segments() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "planSegments"
                ],
                "type": "bool_type",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// cameraRecovery together with task or planSegments: true.
pub(crate) fn guidance_camera_task() -> Value {
    json!({
        "detail": "Generic task context cannot authorize camera recovery"
    })
}

/// The verification names another session, observation or window.
pub(crate) fn guidance_camera_verification_ids() -> Value {
    json!({
        "detail": "Camera verification must name this request's session, observation and window; send the verifier's report for this capture"
    })
}

/// The verification is over 5 s away from observation.capturedAt (a stale one answers the freshness sentence).
pub(crate) fn guidance_camera_verification_time() -> Value {
    json!({
        "detail": "Camera verification must be captured with the same observation"
    })
}

/// Captured before an observation this session already sent.
pub(crate) fn guidance_camera_order() -> Value {
    json!({
        "detail": "Camera recovery observations must arrive in capture order: this one was captured before the last one; send a fresh capture"
    })
}

/// An observation id reused for other content.
pub(crate) fn guidance_camera_reuse() -> Value {
    json!({
        "detail": "This observation id was already used for a different capture in this session; give every capture a new id"
    })
}

/// A verification before Teams is back with the permission on.
pub(crate) fn guidance_camera_premature() -> Value {
    json!({
        "detail": "Camera verification is premature: send it only with the Teams observation that was answered return_to_teams"
    })
}

/// An element carries a tgt. target id not issued for it.
pub(crate) fn guidance_camera_target() -> Value {
    json!({
        "detail": "An element carries a tgt. target id that was not issued for it in this observation and session; send the element without that id"
    })
}

/// A verification while Teams shows the camera off.
pub(crate) fn guidance_camera_conflict() -> Value {
    json!({
        "detail": "Camera verification conflicts with the observation: Teams shows the camera off; turn the camera on in Teams and capture again"
    })
}

/// A verification with the live probe profile.
pub(crate) fn guidance_camera_live_probe() -> Value {
    json!({
        "detail": "The live probe profile never completes camera recovery; send no verification with it"
    })
}

/// A pinned-profile verification without reinitializationMethod.
pub(crate) fn guidance_camera_pinned_method() -> Value {
    json!({
        "detail": "Camera verification for the pinned profile must say how the camera was reinitialized (reinitializationMethod)"
    })
}

/// cameraActive must be true.
pub(crate) fn guidance_camera_active() -> Value {
    json!({
        "detail": [
            {
                "loc": [
                    "body",
                    "cameraRecovery",
                    "verification",
                    "cameraActive"
                ],
                "type": "value_error",
                "msg": "Invalid request value"
            }
        ]
    })
}

/// Invalid result, target or plan.
pub(crate) fn guidance_invalid_2() -> Value {
    json!({
        "detail": "Invalid guidance result"
    })
}

/// The provider failed.
pub(crate) fn guidance_failed() -> Value {
    json!({
        "detail": "Guidance provider failed"
    })
}
