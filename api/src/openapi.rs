//! The OpenAPI document's fixed parts: title, version and the bearer scheme.

use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
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

/// The document's frame; paths and schemas come from the registered handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "MSGuide local API",
        version = "0.2.0",
        description = "Loopback-only guidance API. Clients must be loopback, Host must be local, Origin must be absent; /v1 and /admin need the launcher's bearer token."
    ),
    modifiers(&BearerScheme)
)]
pub struct ApiDoc;
