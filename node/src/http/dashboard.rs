//! `GET /admin/dashboard`: everything the `/ui` page shows, as this node sees it (the
//! `monitor` right); the data is [`crate::service::App::dashboard`]'s.
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::dashboard::{Dashboard, DashboardQuery};
use leaf_api::routes;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller};
use super::openapi::DashboardErrors;
use crate::service::{validate, ApiError, App};

pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(dashboard))
}

/// Everything the built-in dashboard (`/ui`) shows: the cluster as this node has applied it,
/// every member's health as it answered just now (with its round trip and clock offset), the
/// tags with this node's buffers and served counts, its totals and its recent error answers.
#[utoipa::path(get, path = routes::ADMIN_DASHBOARD, tag = "cluster", operation_id = "dashboard",
    security(("admin_token" = [])),
    params(DashboardQuery),
    responses((status = 200, description = "The dashboard's data.", body = Dashboard), DashboardErrors))]
pub async fn dashboard(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<DashboardQuery>,
) -> Result<Json<Dashboard>, ApiError> {
    let page = validate::page(leaf_api::types::ListQuery { prefix: q.prefix, ..Default::default() })?;
    Ok(Json(app.dashboard(&who, &page.prefix).await))
}
