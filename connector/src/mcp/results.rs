//! A capability's reply as an MCP tool result: the success payload as JSON (text and
//! structured content), a screenshot as image content, and an ERROR as `isError: true`
//! carrying the connector's code and message unchanged.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::budget::{self, Plan};
use crate::protocol::Message;

/// The screenshot reply's field whose pixels travel once, as the image content.
pub(super) const IMAGE_FIELD: &str = "image_base64";

/// The field a scaled screenshot's result adds: physical screen pixels per image pixel.
pub(super) const SCALE_FIELD: &str = "screen_pixels_per_image_pixel";

/// The tool result for a reply message, its text within `max_chars` characters.
pub(super) fn result(reply: Message, plan: Plan, max_chars: usize) -> CallToolResult {
    match reply {
        Message::Error(error) => {
            let code = serde_json::to_value(&error.code).unwrap_or(Value::Null);
            let code_text = code.as_str().unwrap_or("INTERNAL_ERROR").to_owned();
            let structured = json!({
                "code": code,
                "message": error.message,
                "details": error.details,
            });
            let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
                "{code_text}: {}",
                error.message
            ))]);
            result.structured_content = Some(structured);
            result
        }
        Message::ScreenshotResponse(shot) => {
            let mime = shot.mime_type.clone();
            let mut meta = serde_json::to_value(&shot).unwrap_or(Value::Null);
            if let Some(fields) = meta.as_object_mut() {
                // The pixels travel once, as the image.
                fields.remove(IMAGE_FIELD);
                // A capture scaled to the longest side allowed: how its pixels map back.
                let captured = f64::from(shot.logical_size[0]) * shot.display_scale;
                let factor = captured / f64::from(shot.width.max(1));
                // The logical size is rounded: less than a scale's worth of pixels is no scaling.
                if captured - f64::from(shot.width) > shot.display_scale.max(1.0) {
                    let rounded = (factor * 10_000.0).round() / 10_000.0;
                    fields.insert(SCALE_FIELD.to_owned(), rounded.into());
                    fields.insert(
                        "note".to_owned(),
                        format!("The image is scaled down: a point in it times {rounded}, plus origin, is the point on the screen.").into(),
                    );
                }
            }
            let mut result = CallToolResult::success(vec![
                ContentBlock::image(shot.image_base64, mime),
                ContentBlock::text(meta.to_string()),
            ]);
            result.structured_content = Some(meta);
            result
        }
        other => {
            let mut payload = serde_json::to_value(&other).unwrap_or(Value::Null);
            budget::bound(&mut payload, plan, max_chars);
            let mut result = CallToolResult::success(vec![ContentBlock::text(payload.to_string())]);
            result.structured_content = Some(payload);
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::reply;
    use crate::protocol::{AckPayload, ErrorCode};

    #[test]
    fn an_error_keeps_the_connectors_code_and_message() {
        let message = "Path is outside the allowed root.";
        let result = result(
            reply(ErrorCode::PathOutsideAllowedRoot, message, None),
            Plan::Plain,
            crate::cli::DEFAULT_MAX_ANSWER_CHARS,
        );
        assert_eq!(result.is_error, Some(true));
        let text = result.content[0].as_text().unwrap().text.clone();
        assert_eq!(text, format!("PATH_OUTSIDE_ALLOWED_ROOT: {message}"));
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["code"], "PATH_OUTSIDE_ALLOWED_ROOT");
        assert_eq!(structured["message"], message);
    }

    #[test]
    fn a_call_beyond_max_concurrent_is_the_connectors_shim_overloaded() {
        let max = std::num::NonZeroU32::new(2).unwrap();
        let result = result(
            crate::error::overloaded(max),
            Plan::Plain,
            crate::cli::DEFAULT_MAX_ANSWER_CHARS,
        );
        assert_eq!(result.is_error, Some(true));
        let text = result.content[0].as_text().unwrap().text.clone();
        assert_eq!(
            text,
            "SHIM_OVERLOADED: The local executor is at its concurrent request limit."
        );
        assert_eq!(
            result.structured_content.unwrap()["details"],
            json!({"max_concurrent": 2})
        );
    }

    #[test]
    fn a_success_is_its_payload() {
        let result = result(
            Message::Ack(AckPayload::OK),
            Plan::Plain,
            crate::cli::DEFAULT_MAX_ANSWER_CHARS,
        );
        assert_ne!(result.is_error, Some(true));
        assert_eq!(result.structured_content.unwrap()["ok"], true);
    }
}
