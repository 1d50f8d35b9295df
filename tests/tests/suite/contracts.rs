//! Strict request contracts: every limit at its boundary, strict types, no echo of input.

use serde_json::{Value, json};

use super::support::{Server, b64, button, guidance_body, observation, padded_png, png_bytes};

/// Sends a guidance request whose observation was changed by `edit`; returns (status, type).
async fn guidance_with(
    server: &Server,
    session: &str,
    edit: impl FnOnce(&mut Value),
) -> (u16, String) {
    let mut body = guidance_body(
        session,
        observation(server, "Build overview", vec![button("View logs")]),
    );
    edit(&mut body);
    let res = server.guidance(&body).await;
    let kind = if res.status == 422 {
        res.validation_type()
    } else {
        String::new()
    };
    assert!(
        !res.text().contains("private-"),
        "input echoed: {}",
        res.text()
    );
    (res.status, kind)
}

#[tokio::test]
async fn text_limits_at_their_boundaries() {
    let server = Server::start().await;
    let s = server.session().await;
    type Edit = Box<dyn Fn(&mut Value, usize)>;
    let cases: Vec<(&str, Edit, usize)> = vec![
        (
            "prompt",
            Box::new(|b, n| b["prompt"] = json!("p".repeat(n))),
            4000,
        ),
        (
            "ocrText",
            Box::new(|b, n| b["observation"]["ocrText"] = json!("o".repeat(n))),
            16000,
        ),
        (
            "application",
            Box::new(|b, n| b["observation"]["application"] = json!("a".repeat(n))),
            256,
        ),
        (
            "observation.id",
            Box::new(|b, n| b["observation"]["id"] = json!("i".repeat(n))),
            128,
        ),
        (
            "label",
            Box::new(|b, n| b["observation"]["elements"][0]["label"] = json!("l".repeat(n))),
            256,
        ),
        (
            "role",
            Box::new(|b, n| b["observation"]["elements"][0]["role"] = json!("r".repeat(n))),
            64,
        ),
    ];
    for (name, edit, max) in cases {
        assert_eq!(
            guidance_with(&server, &s, |b| edit(b, max)).await.0,
            200,
            "{name} at {max}"
        );
        let over = guidance_with(&server, &s, |b| edit(b, max + 1)).await;
        assert_eq!(
            over,
            (422, "string_too_long".to_owned()),
            "{name} at {}",
            max + 1
        );
    }
    assert_eq!(
        guidance_with(&server, &s, |b| b["prompt"] = json!("")).await,
        (422, "string_too_short".to_owned())
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["ocrText"] = json!(""))
            .await
            .0,
        200
    );
    let pattern = guidance_with(&server, &s, |b| {
        b["observation"]["windowId"] = json!("private-win dow")
    })
    .await;
    assert_eq!(pattern, (422, "string_pattern_mismatch".to_owned()));
}

#[tokio::test]
async fn element_count_and_dimensions_at_their_boundaries() {
    let server = Server::start().await;
    let s = server.session().await;
    let many = |n: usize| (0..n).map(|i| button(&format!("b{i}"))).collect::<Vec<_>>();
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["elements"] =
            json!(many(200)))
        .await
        .0,
        200
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["elements"] =
            json!(many(201)))
        .await,
        (422, "too_long".to_owned())
    );
    for (w, expected) in [
        (json!(1), 200),
        (json!(16384), 200),
        (json!(0), 422),
        (json!(16385), 422),
        (json!(20000), 422),
        (json!(10.0), 422),
        (json!("10"), 422),
    ] {
        assert_eq!(
            guidance_with(&server, &s, |b| b["observation"]["width"] = w.clone())
                .await
                .0,
            expected,
            "width {w}"
        );
    }
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["width"] = json!(10.0))
            .await
            .1,
        "int_type"
    );
}

#[tokio::test]
async fn boxes_and_confidences() {
    let server = Server::start().await;
    let s = server.session().await;
    let cases = [
        (json!([0, 0, 1, 1]), 200),
        (json!([0.8, 0.8, 0.2, 0.2]), 200),
        (json!([-0.1, 0, 0.5, 0.5]), 422),
        (json!([0.9, 0, 0.2, 0.5]), 422),
        (json!([0, 0.9, 0.5, 0.2]), 422),
        (json!([0, 0, 0, 0.5]), 422),
        (json!([0, 0, 0.5]), 422),
        (json!([0, 0, 0.5, 0.5, 0.1]), 422),
        (json!([true, 0, 0.5, 0.5]), 422),
        (json!(["NaN", 0, 0.5, 0.5]), 422),
        (json!("0,0,1,1"), 422),
    ];
    for (bounds, expected) in cases {
        let got = guidance_with(&server, &s, |b| {
            b["observation"]["elements"][0]["box"] = bounds.clone()
        })
        .await
        .0;
        assert_eq!(got, expected, "box {bounds}");
    }
    for (confidence, expected) in [
        (json!(1), 200),
        (json!(0), 200),
        (json!(1.01), 422),
        (json!(true), 422),
        (json!("0.9"), 422),
    ] {
        let got = guidance_with(&server, &s, |b| {
            b["observation"]["elements"][0]["confidence"] = confidence.clone()
        })
        .await
        .0;
        assert_eq!(got, expected, "confidence {confidence}");
    }
    let nan = format!(r#"{{"sessionId":"{s}","prompt":NaN,"consent":true}}"#);
    let res = server
        .post("/v1/guidance")
        .header("Content-Type", "application/json")
        .body(nan.into_bytes())
        .send()
        .await;
    assert_eq!(res.validation_type(), "json_invalid");
}

#[tokio::test]
async fn strict_types_unknown_fields_and_timestamps() {
    let server = Server::start().await;
    let s = server.session().await;
    assert_eq!(
        guidance_with(&server, &s, |b| b["consent"] = json!("true")).await,
        (422, "bool_type".to_owned())
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["extra"] = json!("private-extra")).await,
        (422, "extra_forbidden".to_owned())
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["elements"][0]["x"] =
            json!("private-x"))
        .await
        .1,
        "extra_forbidden"
    );
    assert_eq!(
        guidance_with(&server, &s, |b| {
            b.as_object_mut().unwrap().remove("sessionId");
        })
        .await,
        (422, "missing".to_owned())
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["capturedAt"] =
            json!("2026-12-02T10:19:00"))
        .await,
        (422, "value_error".to_owned())
    );
    assert_eq!(
        guidance_with(&server, &s, |b| b["observation"]["capturedAt"] =
            json!("private-yesterday"))
        .await
        .0,
        422
    );
    let dup = guidance_with(&server, &s, |b| {
        b["observation"]["elements"] = json!([
            {"role": "button", "label": "A", "box": [0, 0, 0.1, 0.1], "confidence": 0.9, "targetId": "t1"},
            {"role": "button", "label": "B", "box": [0, 0, 0.1, 0.1], "confidence": 0.9, "targetId": "t1"}
        ]);
    }).await;
    assert_eq!(dup, (422, "value_error".to_owned()));
    let all_fields = guidance_with(&server, &s, |b| {
        b["observation"]["elements"][0] = json!({
            "role": "button", "label": "View logs", "box": [0.1, 0.2, 0.3, 0.1], "confidence": 0.95,
            "processId": 4_294_967_295_u64, "targetId": "t.1", "controlId": "c:1", "automationId": "", "frameworkId": "WPF",
            "isEnabled": true, "isOffscreen": false, "targetable": true, "isPassword": false, "isReadOnly": true,
            "isSelected": false, "toggleState": "off", "helpText": "", "itemStatus": "", "action": null,
            "valueHash": null, "valueLength": 1000, "scrollDirections": ["up", "down", "left", "right"],
            "horizontalScrollPercent": -1, "verticalScrollPercent": 100
        });
        b["observation"]["rootProcessId"] = json!(1);
        b["observation"]["resourceId"] = json!("res-1");
        b["observation"]["automationComplete"] = json!(true);
        b["observation"]["teamsCameraSessionState"] = json!("unknown");
    }).await;
    assert_eq!(
        all_fields.0, 502,
        "every documented field is accepted; the empty automationId then fails route validation"
    );
    assert_eq!(
        guidance_with(
            &server,
            &s,
            |b| b["observation"]["elements"][0]["scrollDirections"] =
                json!(["up", "up", "up", "up", "up"])
        )
        .await
        .0,
        422
    );
    for (field, value) in [
        ("processId", json!(4_294_967_296_u64)),
        ("processId", json!(0)),
        ("valueLength", json!(1001)),
        ("helpText", json!("h".repeat(257))),
        ("itemStatus", json!("i".repeat(129))),
        ("automationId", json!("a".repeat(257))),
        ("verticalScrollPercent", json!(100.5)),
        ("horizontalScrollPercent", json!(-1.5)),
        ("valueHash", json!("A".repeat(64))),
        ("toggleState", json!("maybe")),
        ("action", json!("click")),
        ("isEnabled", json!("true")),
    ] {
        let got = guidance_with(&server, &s, |b| {
            b["observation"]["elements"][0][field] = value.clone()
        })
        .await
        .0;
        assert_eq!(got, 422, "{field} = {value}");
    }
    for (field, value) in [
        ("helpText", json!("h".repeat(256))),
        ("itemStatus", json!("i".repeat(128))),
        ("valueLength", json!(0)),
    ] {
        let got = guidance_with(&server, &s, |b| {
            b["observation"]["elements"][0][field] = value.clone()
        })
        .await
        .0;
        assert_eq!(got, 200, "{field} at its limit");
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_objects() {
    let server = Server::start().await;
    let plain = server
        .post("/v1/guidance")
        .header("Content-Type", "text/plain")
        .body(b"private-hello".to_vec())
        .send()
        .await;
    assert_eq!(plain.validation_type(), "model_attributes_type");
    let broken = server
        .post("/v1/guidance")
        .header("Content-Type", "application/json")
        .body(b"{\"private-".to_vec())
        .send()
        .await;
    assert_eq!(broken.validation_type(), "json_invalid");
    assert_eq!(broken.json()["detail"][0]["loc"][0], "body");
    let empty = server.post("/v1/guidance").send().await;
    assert_eq!(empty.validation_type(), "missing");
    assert!(!plain.text().contains("private-") && !broken.text().contains("private-"));
}

#[tokio::test]
async fn images_are_sanitised_or_refused() {
    let server = Server::start().await;
    let s = server.session().await;
    let with_image = |image: Value, w: u32, h: u32| {
        move |b: &mut Value| {
            b["observation"]["imageBase64"] = image;
            b["observation"]["width"] = json!(w);
            b["observation"]["height"] = json!(h);
        }
    };
    let good = b64(&png_bytes(1600, 1600, Some("private-exif")));
    assert_eq!(
        guidance_with(&server, &s, with_image(json!(good), 1600, 1600))
            .await
            .0,
        200
    );
    assert_eq!(
        guidance_with(&server, &s, with_image(json!(null), 1600, 1600))
            .await
            .0,
        200
    );
    let refused = [
        (json!("bad"), 10, 10),
        (json!(""), 10, 10),
        (
            json!(format!("{}\n", b64(&png_bytes(10, 10, None)))),
            10,
            10,
        ),
        (
            json!(format!(
                "data:image/png;base64,{}",
                b64(&png_bytes(10, 10, None))
            )),
            10,
            10,
        ),
        (json!(b64(&png_bytes(10, 10, None))), 11, 10),
        (json!(b64(&png_bytes(1601, 10, None))), 1601, 10),
        (json!(b64(&png_bytes(10, 1601, None))), 10, 1601),
        (json!(b64(b"\xff\xd8\xff\xe0private-jpeg")), 10, 10),
        (json!(b64(&png_bytes(10, 10, None)[..40])), 10, 10),
        (json!("A".repeat(2_666_669)), 10, 10),
    ];
    for (image, w, h) in refused {
        let shown = image
            .as_str()
            .map(|s| s.chars().take(30).collect::<String>());
        assert_eq!(
            guidance_with(&server, &s, with_image(image, w, h)).await.0,
            422,
            "{shown:?}"
        );
    }
    // Without an image, the declared size may be as large as 16384 × 16384.
    assert_eq!(
        guidance_with(&server, &s, |b| {
            b["observation"]["width"] = json!(16384);
            b["observation"]["height"] = json!(16384);
        })
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn a_screenshot_at_the_byte_limit_fits_the_body_limit() {
    let server = Server::start().await;
    let s = server.session().await;
    let exact = b64(&padded_png(64, 48, 2_000_000, "private-padding"));
    assert_eq!(exact.len(), 2_666_668);
    let mut body = guidance_body(
        &s,
        observation(&server, "Build overview", vec![button("View logs")]),
    );
    body["observation"]["imageBase64"] = json!(exact);
    body["observation"]["width"] = json!(64);
    body["observation"]["height"] = json!(48);
    let bytes = serde_json::to_vec(&body).unwrap();
    assert!(
        bytes.len() > 2 * 1024 * 1024,
        "the body is over any 2 MiB default limit"
    );
    let res = server.guidance(&body).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let over = b64(&padded_png(64, 48, 2_000_001, "private-padding"));
    body["observation"]["imageBase64"] = json!(over);
    let res = server.guidance(&body).await;
    assert_eq!(res.status, 422);
    assert!(!res.text().contains("private-"));
}
