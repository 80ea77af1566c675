//! The admin endpoints (bearer token, or loopback without one; checked by
//! [`super::auth::AuthLayer`]): tags, the allocation journal, and the clock fault.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use leaf_api::profile::{validate_upper_bound, DailyFormat, DailyOptions, Profile, ProfileError, DAILY_FIRST};
use leaf_api::routes;
use leaf_api::tag::{validate_max_id, validate_step, validate_tag};
use leaf_api::types::{AllocationJournal, ClockFault, CreateTagRequest, ObfuscatedDecoded, TagInfo, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_raft_store::StoredProfile;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{check_node_id_range, ApiQuery, Caller, JsonBody, TagParam};
use super::openapi::{
    AllocationsErrors, CreateTagErrors, DecodeObfuscatedErrors, FaultErrors, ListErrors, ShowTagErrors, UpdateTagErrors,
};
use super::{tag_info, tag_not_found, App};
use crate::access::Principal;
use crate::profiles::obfuscate::ObfuscateError;
use crate::tags::ServeAs;
use leaf_api::tokens::Right;

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_tags, create_tag))
        .routes(routes!(show_tag, update_tag))
        .routes(routes!(decode_obfuscated))
        .routes(routes!(allocations))
        .routes(routes!(fault_clock))
}

/// Every tag, as stored.
#[utoipa::path(get, path = routes::ADMIN_TAGS, tag = "admin", operation_id = "list_tags",
    security(("admin_token" = [])),
    responses((status = 200, description = "Every tag.", body = Vec<TagInfo>), ListErrors))]
pub async fn list_tags(State(app): State<Arc<App>>, Caller(who): Caller) -> Json<Vec<TagInfo>> {
    // A scoped token sees the tags its patterns cover.
    Json(app.tag_list().into_iter().filter(|t| who.may_on(Right::Tags, &t.tag)).collect())
}

/// Creates a tag (Leaf's `leaf_alloc` row).
#[utoipa::path(post, path = routes::ADMIN_TAGS, tag = "admin", operation_id = "create_tag",
    security(("admin_token" = [])),
    request_body = CreateTagRequest,
    responses((status = 201, description = "Created.", body = TagInfo), CreateTagErrors))]
pub async fn create_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateTagRequest>,
) -> Result<(StatusCode, Json<TagInfo>), ApiError> {
    Ok((StatusCode::CREATED, Json(create(&app, body, &who).await?)))
}

/// Creates a tag from a request (HTTP and gRPC) by `who`: every field checked, then proposed.
pub(crate) async fn create(app: &App, body: CreateTagRequest, who: &Principal) -> Result<TagInfo, ApiError> {
    let bad = |e: leaf_api::tag::ValidationError| ApiError::new(ErrorCode::InvalidRequest, e.to_string());
    validate_tag(&body.tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
    who.require_on(Right::Tags, &body.tag)?;
    validate_step(body.step).map_err(bad)?;
    let max_id = body.max_id.unwrap_or(1);
    validate_max_id(max_id).map_err(bad)?;
    let description = body.description.unwrap_or_default();
    check_description(&description)?;
    let stored = stored_profile(body.profile.unwrap_or_default(), body.daily.as_ref(), body.max_id, body.upper_bound)?;
    let (tag, step) = (body.tag, body.step);
    let record = app
        .raft
        .create_profiled_tag(
            (tag.clone(), step, stored.start, description),
            (stored.profile, body.upper_bound),
            who.actor(),
        )
        .await?;
    Ok(tag_info(tag, record))
}

/// What a create request's profile fields become in the state.
struct NewProfile {
    profile: StoredProfile,
    /// The first counter value.
    start: i64,
}

/// Checks a create request's profile fields and builds the stored profile (an obfuscated
/// tag's key is generated here, from the OS's random source).
fn stored_profile(
    profile: Profile,
    daily: Option<&DailyOptions>,
    max_id: Option<i64>,
    upper_bound: Option<i64>,
) -> Result<NewProfile, ApiError> {
    let bad = |e: ProfileError| ApiError::new(ErrorCode::InvalidRequest, e.to_string());
    if daily.is_some() && profile != Profile::Daily {
        return Err(bad(ProfileError::OptionsWithoutDaily));
    }
    let start = max_id.unwrap_or(1);
    if let Some(b) = upper_bound {
        validate_upper_bound(b, start).map_err(bad)?;
    }
    let profile = match profile {
        Profile::Segment => StoredProfile::Segment,
        Profile::Monotonic => StoredProfile::Monotonic,
        Profile::Obfuscated => StoredProfile::Obfuscated { key: crate::profiles::new_key()? },
        Profile::Daily => {
            if upper_bound.is_some() || max_id.is_some() {
                return Err(bad(ProfileError::DailyBound));
            }
            let format = DailyFormat::from_options(daily.unwrap_or(&DailyOptions::default())).map_err(bad)?;
            return Ok(NewProfile { profile: StoredProfile::Daily { format, day: 0 }, start: DAILY_FIRST });
        }
    };
    Ok(NewProfile { profile, start })
}

/// One tag, as stored.
#[utoipa::path(get, path = routes::ADMIN_TAG, tag = "admin", operation_id = "show_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    responses((status = 200, description = "The tag.", body = TagInfo), ShowTagErrors))]
pub async fn show_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
) -> Result<Json<TagInfo>, ApiError> {
    who.require_on(Right::Tags, &tag)?;
    Ok(Json(show(&app, tag).await?))
}

/// One tag as stored, confirming an unknown one with the leader first (HTTP and gRPC).
pub(crate) async fn show(app: &App, tag: String) -> Result<TagInfo, ApiError> {
    if app.raft.state().tag(&tag).is_none() {
        app.confirm_tags(&tag).await?;
    }
    match app.raft.state().tag(&tag) {
        Some(r) => Ok(tag_info(tag, r)),
        None => Err(tag_not_found(&tag)),
    }
}

/// An obfuscated tag's ID back to the sequence number it was made from (the key never leaves
/// the cluster; this is how an operator reads it).
#[utoipa::path(get, path = routes::ADMIN_TAG_DECODE, tag = "admin", operation_id = "decode_obfuscated",
    security(("admin_token" = [])),
    params(
        ("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices"),
        ("id" = i64, Path, description = "An ID the tag served.", minimum = 0, example = 2499986683200342791_i64),
    ),
    responses((status = 200, description = "The sequence number.", body = ObfuscatedDecoded), DecodeObfuscatedErrors))]
pub async fn decode_obfuscated(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    params: DecodeParams,
) -> Result<Json<ObfuscatedDecoded>, ApiError> {
    let DecodeParams { tag, id } = params;
    who.require_on(Right::Tags, &tag)?;
    let h = match app.tags.get(&tag) {
        Some(h) => h,
        None => {
            app.confirm_tags(&tag).await?;
            app.tags.get(&tag).ok_or_else(|| tag_not_found(&tag))?
        }
    };
    let ServeAs::Obfuscated(o) = h.serve() else {
        return Err(ApiError::new(ErrorCode::InvalidRequest, format!("tag {tag:?} is not obfuscated")));
    };
    let bad = |e: ObfuscateError| ApiError::new(ErrorCode::InvalidRequest, e.to_string());
    let sequence = o.decode(id).map_err(bad)?;
    Ok(Json(ObfuscatedDecoded { tag, id: id as i64, sequence: sequence as i64 }))
}

/// The `{tag}` and `{id}` of [`decode_obfuscated`]: a valid tag and a non-negative `i64`.
pub struct DecodeParams {
    tag: String,
    id: u64,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for DecodeParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state).await?;
        let (mut tag, mut id) = (None, None);
        for (name, value) in params.iter() {
            match name {
                "tag" => tag = Some(value.to_string()),
                "id" => id = Some(value.to_string()),
                _ => {}
            }
        }
        let tag = tag.ok_or_else(|| ApiError::new(ErrorCode::InvalidTag, "missing tag"))?;
        validate_tag(&tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
        let raw = id.unwrap_or_default();
        let id = raw.parse::<i64>().ok().and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("{:?} is not a non-negative 64-bit ID", raw.chars().take(32).collect::<String>()),
            )
        })?;
        Ok(DecodeParams { tag, id })
    }
}

/// Changes a tag's stored step and/or description.
#[utoipa::path(patch, path = routes::ADMIN_TAG, tag = "admin", operation_id = "update_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    request_body = UpdateTagRequest,
    responses((status = 200, description = "The tag as updated.", body = TagInfo), UpdateTagErrors))]
pub async fn update_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<UpdateTagRequest>,
) -> Result<Json<TagInfo>, ApiError> {
    who.require_on(Right::Tags, &tag)?;
    if body.step.is_none() && body.description.is_none() {
        return Err(ApiError::new(ErrorCode::InvalidRequest, "nothing to update: give step and/or description"));
    }
    if let Some(step) = body.step {
        validate_step(step).map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.to_string()))?;
    }
    if let Some(d) = &body.description {
        check_description(d)?;
    }
    let record = app.raft.update_tag(tag.clone(), body.step, body.description, who.actor()).await?;
    Ok(Json(tag_info(tag, record)))
}

#[derive(Deserialize)]
pub struct AllocationsQuery {
    tag: Option<String>,
    node: Option<u64>,
}

/// The journal of committed segments and the node each went to.
#[utoipa::path(get, path = routes::ADMIN_ALLOCATIONS, tag = "admin", operation_id = "allocations",
    security(("admin_token" = [])),
    params(
        ("tag" = Option<String>, Query, description = "Only this tag.", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
        ("node" = Option<u64>, Query, description = "Only allocations to this node.", example = 1),
    ),
    responses((status = 200, description = "The journal.", body = AllocationJournal), AllocationsErrors))]
pub async fn allocations(
    State(app): State<Arc<App>>,
    ApiQuery(q): ApiQuery<AllocationsQuery>,
) -> Result<Json<AllocationJournal>, ApiError> {
    if let Some(t) = &q.tag {
        validate_tag(t).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
    }
    if let Some(node) = q.node {
        check_node_id_range(node)?;
    }
    let journal = app
        .raft
        .allocations(q.tag.as_deref(), q.node)
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("allocation journal unreadable: {e}")))?;
    Ok(Json(journal))
}

/// Skews this node's clock (only with fault injection enabled; 404 `not_found` otherwise).
#[utoipa::path(post, path = routes::ADMIN_FAULT_CLOCK, tag = "admin", operation_id = "fault_clock",
    security(("admin_token" = [])),
    request_body = ClockFault,
    responses((status = 200, description = "The offset now in force.", body = ClockFault), FaultErrors))]
pub async fn fault_clock(
    State(app): State<Arc<App>>,
    body: Result<JsonBody<ClockFault>, ApiError>,
) -> Result<Json<ClockFault>, ApiError> {
    // Disabled first: a node without fault injection says so whatever the body.
    if !app.config.fault.enabled {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "fault injection is disabled (start the node with --enable-fault-injection)",
        ));
    }
    let JsonBody(body) = body?;
    if body.offset_ms.unsigned_abs() > MAX_CLOCK_OFFSET_MS {
        return Err(ApiError::new(ErrorCode::InvalidRequest, "offset_ms must be within a year"));
    }
    let before = app.clock.offset_ms();
    app.clock.set_offset_ms(body.offset_ms);
    tracing::warn!(before, offset_ms = body.offset_ms, "FAULT INJECTED: clock offset changed");
    Ok(Json(body))
}

/// The largest clock skew the fault endpoint accepts: a year.
pub const MAX_CLOCK_OFFSET_MS: u64 = 365 * 24 * 3_600_000;

/// Descriptions are free text for people, bounded so the replicated state stays small:
/// 1,024 characters (so at most 4 KiB), counted as the OpenAPI `maxLength` counts them.
fn check_description(d: &str) -> Result<(), ApiError> {
    if d.chars().count() > 1024 {
        return Err(ApiError::new(ErrorCode::InvalidRequest, "description is longer than 1024 characters"));
    }
    Ok(())
}
