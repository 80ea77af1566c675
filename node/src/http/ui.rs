//! The built-in dashboard: `GET /ui` (the page), `/ui/app.js` and `/ui/app.css`, embedded in the
//! binary (`node/src/ui/assets/`: plain HTML, CSS and JavaScript, no build step, nothing from
//! another origin). The page is public and holds no data; it polls `GET /admin/dashboard` from
//! the browser with the token the user gives it (kept in the tab's session storage), so it works
//! wherever the API does, behind TLS and tokens. Every answer carries a strict
//! Content-Security-Policy: scripts, styles and requests only from this origin, no inline code,
//! no framing.
use std::sync::Arc;

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use leaf_api::routes;
use leaf_api::ErrorCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::{MonitorErrors, UiAssetErrors};
use crate::service::{ApiError, App};

const INDEX: &str = include_str!("../ui/assets/index.html");
const APP_JS: &str = include_str!("../ui/assets/app.js");
const APP_CSS: &str = include_str!("../ui/assets/app.css");

/// What the page may load and do.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(page)).routes(routes!(asset))
}

/// An embedded file with the page's security headers. Not cached across releases: a
/// revalidation is cheap, and a new binary's page must not run an old script.
fn embedded(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The dashboard page. Its data comes from `GET /admin/dashboard` (the `cluster` right); give
/// the token in the page's form, or once as `/ui#token=<bearer>` (the fragment never reaches
/// a server; the page moves it into the tab's session storage and clears it from the URL).
#[utoipa::path(get, path = routes::UI, tag = "ui", operation_id = "ui",
    responses((status = 200, description = "The dashboard page.", body = String, content_type = "text/html; charset=utf-8"),
        MonitorErrors))]
pub async fn page() -> Response {
    embedded("text/html; charset=utf-8", INDEX)
}

/// The page's script (`app.js`) or style sheet (`app.css`).
#[utoipa::path(get, path = routes::UI_ASSET, tag = "ui", operation_id = "ui_asset",
    params(("asset" = String, Path, description = "`app.js` or `app.css`.", pattern = r"^app\.(js|css)$")),
    responses((status = 200, description = "The asset: the script or the style sheet.",
            content((String = "text/javascript; charset=utf-8"), (String = "text/css; charset=utf-8"))),
        UiAssetErrors))]
pub async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    match name.as_str() {
        "app.js" => Ok(embedded("text/javascript; charset=utf-8", APP_JS)),
        "app.css" => Ok(embedded("text/css; charset=utf-8", APP_CSS)),
        _ => Err(ApiError::new(ErrorCode::NotFound, format!("no dashboard asset {name:?}: app.js or app.css"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX.contains("/ui/app.js") && INDEX.contains("/ui/app.css"), "the page must load both assets");
        for text in [INDEX, APP_JS, APP_CSS] {
            // The SVG namespace is a name, not a request.
            let text = text.replace("http://www.w3.org/2000/svg", "");
            for foreign in ["http://", "https://", "//cdn", "fonts.googleapis"] {
                assert!(!text.contains(foreign), "an asset refers to another origin ({foreign})");
            }
        }
        // The CSP forbids inline code; the page must not need it.
        assert!(!INDEX.contains("<script>") && !INDEX.contains(" onclick=") && !INDEX.contains(" style="));
        assert!(APP_JS.contains("/admin/dashboard"));
    }
}
