//! The router: every route registered once, producing both the handlers and the OpenAPI paths,
//! plus the framework behaviours the reference has (404/405 bodies, 307 on a trailing slash).

pub mod actions;
pub mod assist;
pub mod audit;
pub mod guidance;
pub mod health;
pub mod jobs;
pub mod sessions;

use std::sync::Arc;

use axum::{
    Router,
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use tower::ServiceExt as _;
use utoipa::{OpenApi, openapi::OpenApi as OpenApiDoc};
use utoipa_axum::{router::OpenApiRouter, routes};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::{AppState, error::detail, openapi::ApiDoc};

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::health))
        .routes(routes!(sessions::create_session))
        .routes(routes!(guidance::guidance))
        .routes(routes!(assist::assist))
        .routes(routes!(actions::preview))
        .routes(routes!(actions::confirm))
        .routes(routes!(actions::execute))
        .routes(routes!(jobs::get_job))
        .routes(routes!(jobs::cancel_job))
        .routes(routes!(audit::audit_log))
}

/// The router and the finished OpenAPI document of the registered handlers.
fn documented() -> (Router<AppState>, OpenApiDoc) {
    let (router, mut doc) = api_routes().split_for_parts();
    crate::openapi::add_boundary_answers(&mut doc);
    (router, doc)
}

/// The OpenAPI document, generated from the registered handlers.
#[must_use]
pub fn openapi() -> OpenApiDoc {
    documented().1
}

/// The methods each documented path template accepts, for 405 and 307 answers.
///
/// Matched with axum's own matcher: every request passes here, and comparing the path with each
/// template in turn was about 0.5 µs of a guidance request's 15 (perf, issue 21).
#[derive(Debug)]
struct RouteTable(matchit::Router<Vec<Method>>);

impl RouteTable {
    fn new(doc: &OpenApiDoc) -> Self {
        let mut table = matchit::Router::new();
        for (path, item) in &doc.paths.paths {
            let methods = [
                (Method::GET, item.get.is_some()),
                (Method::POST, item.post.is_some()),
                (Method::PUT, item.put.is_some()),
                (Method::DELETE, item.delete.is_some()),
                (Method::PATCH, item.patch.is_some()),
            ];
            let methods = methods
                .into_iter()
                .filter_map(|(m, on)| on.then_some(m))
                .collect();
            // The router already accepted these templates with the same matcher, so a
            // conflict here cannot happen; were it to, that path would answer 404.
            let _ = table.insert(path.as_str(), methods);
        }
        Self(table)
    }

    fn methods(&self, path: &str) -> Option<&[Method]> {
        self.0.at(path).ok().map(|found| found.value.as_slice())
    }
}

/// Served by the documentation routes rather than the table.
fn is_docs_path(path: &str) -> bool {
    path == "/openapi.json" || path == "/redoc" || path == "/docs" || path.starts_with("/docs/")
}

/// The reference serves its docs UI at `/docs` itself (200, not a redirect) and its OAuth2
/// redirect page at `/docs/oauth2-redirect`; the bundled UI lives under `/docs/`, so both are
/// answered from there, the index with a base URL that keeps its relative asset links working.
async fn docs_alias(mut request: Request, routed: &Router) -> Response {
    let index = request.uri().path() == "/docs";
    let target = if index {
        "/docs/"
    } else {
        "/docs/oauth2-redirect.html"
    };
    if let Ok(uri) = target.parse() {
        *request.uri_mut() = uri;
    }
    let response = route(routed, request).await;
    if !index || response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return detail(StatusCode::NOT_FOUND, "Not Found");
    };
    let html =
        String::from_utf8_lossy(&bytes).replacen("<head>", "<head><base href=\"/docs/\">", 1);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(html))
}

async fn route(routed: &Router, request: Request) -> Response {
    match routed.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// The application: documented routes and docs, behind the framework rules the reference has
/// (404/405 bodies, 307 on a trailing slash), which run before a route is picked.
#[derive(Debug, Clone)]
pub struct Application {
    table: Arc<RouteTable>,
    routed: Router,
}

impl Application {
    /// The routes over `state`.
    #[must_use]
    pub fn new(state: AppState) -> Self {
        let (router, doc) = documented();
        let table = Arc::new(RouteTable::new(&doc));
        let routed = router
            .merge(
                SwaggerUi::new("/docs").url("/openapi.json", doc).config(
                    // A browser sends an Origin with every request, which the boundary refuses,
                    // so "Try it out" could only ever show 403s; the document's description says
                    // so.
                    Config::default()
                        .try_it_out_enabled(false)
                        .supported_submit_methods(Vec::<String>::new()),
                ),
            )
            .route("/redoc", get(redoc))
            .fallback(not_found)
            .with_state(state);
        Self { table, routed }
    }

    /// The framework rules, then the route. Called directly rather than as a middleware
    /// layer, which would box the rest of the chain for every request.
    pub async fn answer(&self, request: Request) -> Response {
        let path = request.uri().path();
        if path == "/docs" || path == "/docs/oauth2-redirect" {
            return docs_alias(request, &self.routed).await;
        }
        if is_docs_path(path) {
            return route(&self.routed, request).await;
        }
        if let Some(methods) = self.table.methods(path) {
            if methods.contains(request.method()) {
                return route(&self.routed, request).await;
            }
            return method_not_allowed(methods);
        }
        trailing_slash_redirect(&self.table, &request)
            .unwrap_or_else(|| detail(StatusCode::NOT_FOUND, "Not Found"))
    }
}

fn method_not_allowed(methods: &[Method]) -> Response {
    let allow = methods
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    if let Ok(allow) = HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// 307 to the path without its trailing slash, when that path is a route.
fn trailing_slash_redirect(table: &RouteTable, request: &Request) -> Option<Response> {
    let trimmed = request
        .uri()
        .path()
        .strip_suffix('/')
        .filter(|p| !p.is_empty() && table.methods(p).is_some())?;
    let location = match request.uri().query() {
        Some(query) => format!("{trimmed}?{query}"),
        None => trimmed.to_owned(),
    };
    let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Some(response)
}

async fn not_found() -> Response {
    detail(StatusCode::NOT_FOUND, "Not Found")
}

async fn redoc() -> Html<&'static str> {
    // ReDoc needs a CDN; offline, point people at the bundled Swagger UI instead.
    Html(
        "<!doctype html><title>MSGuide local API</title><p>The API documentation is served offline at <a href=\"/docs/\">/docs/</a>; the document itself is <a href=\"/openapi.json\">/openapi.json</a>.</p>",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_templates_exactly() {
        let table = RouteTable::new(&openapi());
        assert_eq!(table.methods("/health"), Some(&[Method::GET][..]));
        assert_eq!(
            table.methods("/v1/jobs/abc/cancel"),
            Some(&[Method::POST][..])
        );
        assert_eq!(table.methods("/v1/jobs/abc"), Some(&[Method::GET][..]));
        assert_eq!(table.methods("/v1/jobs/"), None);
        assert_eq!(table.methods("/v1/sessions/"), None);
        assert_eq!(table.methods("/nope"), None);
        assert_eq!(table.methods("/health/x"), None);
        // Every documented path is in the table, so none is answered 404 by mistake.
        for path in openapi().paths.paths.keys() {
            let concrete: String = path
                .split('/')
                .map(|segment| {
                    if segment.starts_with('{') {
                        "abc"
                    } else {
                        segment
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            assert!(table.methods(&concrete).is_some(), "{path}");
        }
    }
}
