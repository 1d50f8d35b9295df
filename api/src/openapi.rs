//! The OpenAPI document's fixed parts: title, version, the bearer scheme, and the answers of the
//! local boundary, which every operation can give before its handler runs.
//!
//! The boundary's answers are documented once, as response components built from the same
//! constants `boundary` answers with, and referenced from every operation they can occur on.

use utoipa::{
    Modify, OpenApi,
    openapi::{
        ContentBuilder, Ref, RefOr, ResponseBuilder,
        example::ExampleBuilder,
        header::HeaderBuilder,
        path::Operation,
        response::Response,
        schema::{ObjectBuilder, Type},
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};

use crate::boundary::{
    AUTH_NOT_CONFIGURED, BODY_INCOMPLETE, BODY_TIMED_OUT, BODY_TOO_LARGE, BearerFault,
    INVALID_CONTENT_LENGTH, LOCAL_HOST_REQUIRED, LOOPBACK_REQUIRED, ORIGIN_REFUSED, UNAUTHORIZED,
    challenge,
};

/// Declares the launcher's bearer token as the `bearer` security scheme.
#[derive(Debug)]
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The ephemeral token the launcher passes in MSGUIDE_LOCAL_TOKEN",
                    ))
                    .build(),
            ),
        );
    }
}

/// A `{"detail": ...}` body with one named example per fixed sentence.
fn detail_content(examples: &[(&str, &str)]) -> utoipa::openapi::Content {
    ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorDetail")))
        .examples_from_iter(examples.iter().map(|(name, sentence)| {
            (
                *name,
                ExampleBuilder::new()
                    .value(Some(serde_json::json!({ "detail": sentence })))
                    .build(),
            )
        }))
        .build()
}

fn detail_response(description: &str, examples: &[(&str, &str)]) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", detail_content(examples))
        .build()
}

/// The boundary's 403s, which operations with a 403 of their own also document.
const FORBIDDEN_EXAMPLES: [(&str, &str); 2] = [
    ("notLoopback", LOOPBACK_REQUIRED),
    ("browserOrigin", ORIGIN_REFUSED),
];

/// Every status the boundary answers on its own: (status, component name, response).
fn boundary_responses() -> Vec<(&'static str, &'static str, Response)> {
    vec![
        (
            "400",
            "BoundaryBadRequest",
            detail_response(
                "Refused by the local boundary: the Host header is missing, repeated or not \
                 local (localhost, 127.0.0.1 or [::1]), the Content-Length is invalid, or the \
                 body ended early",
                &[
                    ("notLocalHost", LOCAL_HOST_REQUIRED),
                    ("invalidContentLength", INVALID_CONTENT_LENGTH),
                    ("incompleteBody", BODY_INCOMPLETE),
                ],
            ),
        ),
        (
            "403",
            "BoundaryForbidden",
            detail_response(
                "Refused by the local boundary: the client is not on a loopback address, or the \
                 request carries an Origin header (every browser request does)",
                &FORBIDDEN_EXAMPLES,
            ),
        ),
        (
            "408",
            "BoundaryRequestTimeout",
            detail_response(
                "The body was not received within 30 seconds",
                &[("bodyTimedOut", BODY_TIMED_OUT)],
            ),
        ),
        (
            "413",
            "BoundaryPayloadTooLarge",
            detail_response(
                "The body is over 3,000,000 bytes (by Content-Length or as sent)",
                &[("bodyTooLarge", BODY_TOO_LARGE)],
            ),
        ),
    ]
}

/// The bearer's answers on /v1 and /admin: (status, component name, response).
fn bearer_responses() -> Vec<(&'static str, &'static str, Response)> {
    let challenge = HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(
            "RFC 6750 challenge; its error_description says whether the token was missing, \
             malformed or wrong (the presented value is never echoed)",
        ))
        .example(Some(challenge(BearerFault::Wrong).into()))
        .build();
    let unauthorized = ResponseBuilder::new()
        .description(
            "The bearer token is missing, malformed (not exactly one `Authorization: Bearer \
             <token>` header) or not the launcher's",
        )
        .header("WWW-Authenticate", challenge)
        .content(
            "application/json",
            detail_content(&[("unauthorized", UNAUTHORIZED)]),
        )
        .build();
    vec![
        ("401", "Unauthorized", unauthorized),
        (
            "503",
            "AuthenticationNotConfigured",
            detail_response(
                "The service was started without a valid MSGUIDE_LOCAL_TOKEN, so no protected \
                 route can be used",
                &[("notConfigured", AUTH_NOT_CONFIGURED)],
            ),
        ),
    ]
}

/// Adds a boundary answer to one operation: a reference to the component, or, where the
/// operation documents that status itself, the boundary's examples and reason beside its own.
fn add_answer(operation: &mut Operation, status: &str, component: &str, shared: &Response) {
    match operation.responses.responses.get_mut(status) {
        None => {
            operation.responses.responses.insert(
                status.to_owned(),
                RefOr::Ref(Ref::new(format!("#/components/responses/{component}"))),
            );
        }
        Some(RefOr::T(own)) => {
            own.description = format!("{}; or: {}", own.description, shared.description);
            let examples = shared
                .content
                .get("application/json")
                .and_then(|c| match c {
                    RefOr::T(content) => Some(content.examples.clone()),
                    RefOr::Ref(_) => None,
                })
                .unwrap_or_default();
            if let Some(RefOr::T(content)) = own.content.get_mut("application/json") {
                content.examples.extend(examples);
            }
        }
        Some(RefOr::Ref(_)) => {}
    }
}

/// Documents the boundary's answers once and references them from every operation they can
/// occur on. Runs on the finished document, since the paths are added after the frame is built.
pub fn add_boundary_answers(openapi: &mut utoipa::openapi::OpenApi) {
    {
        let everywhere = boundary_responses();
        let protected = bearer_responses();
        for item in openapi.paths.paths.values_mut() {
            for operation in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let secured = operation.security.as_ref().is_some_and(|s| !s.is_empty());
                let answers = everywhere
                    .iter()
                    .chain(protected.iter().filter(|_| secured));
                for (status, component, response) in answers {
                    add_answer(operation, status, component, response);
                }
            }
        }
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, component, response) in everywhere.into_iter().chain(protected) {
            components
                .responses
                .insert(component.to_owned(), RefOr::T(response));
        }
    }
}

/// The document's frame; paths and schemas come from the registered handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "MSGuide local API",
        version = "0.2.0",
        description = "Loopback-only guidance API. Clients must be loopback, Host must be local, Origin must be absent; /v1 and /admin need the launcher's bearer token.\n\n\"Try it out\" is switched off on this page: a browser sends an Origin header with every request it makes, and the service refuses any request with an Origin (403). Call the API from a terminal instead, e.g. `curl -sf -X POST -H \"Authorization: Bearer $MSGUIDE_LOCAL_TOKEN\" http://127.0.0.1:8765/v1/sessions`.\n\nAction flow: `POST /v1/sessions` gives the `sessionId` that guidance and assist take; `POST /v1/actions/preview` gives a `previewId` to confirm, which gives the single-use `grantToken` that execute takes, which gives the `jobId` to read or cancel. The responses' `links` name each hand-over."
    ),
    modifiers(&BearerScheme)
)]
pub struct ApiDoc;
