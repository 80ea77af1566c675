//! Tag templates (`/admin/templates*`: the admin token or an admin certificate only, checked
//! by [`super::auth`]): list, put (create or replace) and delete.
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::routes;
use leaf_api::template::{PutTemplateRequest, TemplateInfo, TemplateList};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{Caller, JsonBody, RawParam};
use super::openapi::{DeleteTemplateErrors, ListTemplatesErrors, PutTemplateErrors};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(list_templates)).routes(routes!(put_template, delete_template))
}

/// Every tag template, by name.
#[utoipa::path(get, path = routes::ADMIN_TEMPLATES, tag = "templates", operation_id = "list_templates",
    security(("admin_token" = [])),
    responses((status = 200, description = "Every template, by name.", body = TemplateList), ListTemplatesErrors))]
pub async fn list_templates(State(app): State<Arc<App>>, Caller(who): Caller) -> Result<Json<TemplateList>, ApiError> {
    Ok(Json(app.list_templates(&who)?))
}

/// Creates a tag template, or replaces its pattern and settings (the tags it made keep
/// theirs). A tag that does not exist and matches the pattern is created with these settings
/// on its first ID request by a token with the `tags` right on it.
#[utoipa::path(put, path = routes::ADMIN_TEMPLATE, tag = "templates", operation_id = "put_template",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The template's name.", max_length = 64, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    request_body = PutTemplateRequest,
    responses((status = 200, description = "The template as stored.", body = TemplateInfo), PutTemplateErrors))]
pub async fn put_template(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
    JsonBody(body): JsonBody<PutTemplateRequest>,
) -> Result<Json<TemplateInfo>, ApiError> {
    Ok(Json(app.put_template(raw.0, body, &who).await?))
}

/// Deletes a tag template; the tags it made stay.
#[utoipa::path(delete, path = routes::ADMIN_TEMPLATE, tag = "templates", operation_id = "delete_template",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The template's name.", max_length = 64, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    responses((status = 200, description = "The template as it was.", body = TemplateInfo), DeleteTemplateErrors))]
pub async fn delete_template(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
) -> Result<Json<TemplateInfo>, ApiError> {
    Ok(Json(app.delete_template(raw.0, &who).await?))
}
