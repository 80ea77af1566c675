//! Request extractors that validate as they extract and fail with the project's
//! [`ApiError`] (never axum's plain-text rejections): path parameters (tag, snowflake key,
//! node ID, raw), the `count` and `format` query parameters, typed query strings and JSON bodies.
//!
//! JSON bodies must say `Content-Type: application/json`: a web page can send a cross-site
//! request with a body only as `text/plain` or a form without asking the node first (a CORS
//! preflight, which the node never grants), so refusing those keeps other sites' pages from
//! driving JSON endpoints. Their size is bounded by the body-limit layer.
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use leaf_api::ranges::IdFormat;
use leaf_api::tag::{parse_count, MAX_RANGE_BATCH};
use leaf_api::ErrorCode;
use serde::de::DeserializeOwned;

use crate::service::{validate, ApiError, App};

/// The caller of an admin request, as [`super::auth::AuthLayer`] found it (403 if it did not
/// run: never a 500).
pub struct Caller(pub crate::access::Principal);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<crate::access::Principal>() {
            Some(p) => Ok(Caller(p.clone())),
            None => Err(ApiError::new(ErrorCode::Forbidden, "the caller of this request is unknown")),
        }
    }
}

/// Who makes an ID request: its `Authorization` header, if any (checked by the handler), and
/// the client's address, as [`super::auth::AuthLayer`] found it (403 if it did not run).
pub struct IdCaller {
    pub authorization: Option<axum::http::HeaderValue>,
    pub addr: std::net::IpAddr,
}

impl<S: Send + Sync> FromRequestParts<S> for IdCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(crate::access::credentials::ClientAddr(addr)) = parts.extensions.get().copied() else {
            return Err(ApiError::new(ErrorCode::Forbidden, "the caller of this request is unknown"));
        };
        Ok(IdCaller { authorization: parts.headers.get(axum::http::header::AUTHORIZATION).cloned(), addr })
    }
}

/// The route's single path parameter, percent-decoded, as given.
pub struct RawParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RawParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state).await?;
        match params.iter().next() {
            Some((_, value)) => Ok(RawParam(value.to_string())),
            None => Err(ApiError::new(ErrorCode::InvalidRequest, "missing path parameter")),
        }
    }
}

/// The route's two path parameters, in the order of its template, percent-decoded, as given.
pub struct RawParamPair(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for RawParamPair {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state).await?;
        let mut values = params.iter().map(|(_, value)| value.to_string());
        match (values.next(), values.next()) {
            (Some(first), Some(second)) => Ok(RawParamPair(first, second)),
            _ => Err(ApiError::new(ErrorCode::InvalidRequest, "missing path parameter")),
        }
    }
}

/// A `{tag}` path parameter that passed [`validate::tag`].
pub struct TagParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TagParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let RawParam(tag) = RawParam::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.message))?;
        validate::tag(&tag)?;
        Ok(TagParam(tag))
    }
}

/// A snowflake `{key}` path parameter: validated like a tag (it becomes a metrics label).
pub struct KeyParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for KeyParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let TagParam(key) = TagParam::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(e.code, format!("snowflake key: {}", e.message)))?;
        Ok(KeyParam(key))
    }
}

/// A `{id}` path parameter naming a Raft node: an integer from 1 to `i64::MAX`.
pub struct NodeIdParam(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for NodeIdParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let RawParam(raw) = RawParam::from_request_parts(parts, state).await?;
        match raw.parse::<u64>() {
            Ok(id) if id > 0 => validate::node_id_range(id).map(|()| NodeIdParam(id)),
            _ => Err(ApiError::new(ErrorCode::InvalidRequest, format!("{raw:?} is not a node ID"))),
        }
    }
}

/// The query parameters of the ID endpoints: `count` (1–1,000,000, as text or as ranges) and
/// `format` (`text`, the default, or `ranges`). Read straight from the query
/// string: no allocation when it holds no percent-escapes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Batch {
    /// `None`: one ID (a bare decimal body as text).
    pub count: Option<u32>,
    pub format: IdFormat,
}

impl<S: Send + Sync> FromRequestParts<S> for Batch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        batch_of(parts.uri.query())
    }
}

/// The [`Batch`] of a query string; other parameters are ignored, the first of a repeated one
/// counts.
pub fn batch_of(query: Option<&str>) -> Result<Batch, ApiError> {
    let Some(query) = query else { return Ok(Batch::default()) };
    let (mut count, mut format) = (None, None);
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "count" if count.is_none() => count = Some(v),
            "format" if format.is_none() => format = Some(v),
            _ => {}
        }
    }
    let format = match format {
        None => IdFormat::Text,
        Some(raw) => IdFormat::parse(&raw).ok_or_else(|| {
            let raw: String = raw.chars().take(32).collect();
            ApiError::new(ErrorCode::InvalidRequest, format!("format must be text or ranges, got {raw:?}"))
        })?,
    };
    // Text is written as it is sent (`ids::id_lines`), so it takes as many as ranges.
    let max = MAX_RANGE_BATCH;
    let count = match count {
        None => None,
        Some(raw) => Some(parse_count(&raw, max).map_err(|e| ApiError::new(ErrorCode::InvalidCount, e.to_string()))?),
    };
    Ok(Batch { count, format })
}

/// A query string deserialized into `T`; unknown parameters are ignored.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(value) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

/// The body limit of the route at `path`: `http.max_batch_body_bytes` for a batch,
/// `http.max_body_bytes` for the rest.
pub fn body_limit(app: &App, path: &str) -> usize {
    if path == leaf_api::routes::ADMIN_TAGS_BATCH {
        app.config().http.max_batch_body_bytes
    } else {
        app.config().http.max_body_bytes
    }
}

/// A JSON request body of at most [`body_limit`] bytes.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Arc<App>> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<App>) -> Result<Self, ApiError> {
        let content_type = req.headers().get(axum::http::header::CONTENT_TYPE).map(|v| v.as_bytes());
        if !is_json(content_type) {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "the request body must be JSON with 'Content-Type: application/json'",
            ));
        }
        let path = req.uri().path().to_string();
        let body = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                let max = body_limit(state, &path);
                ApiError::new(ErrorCode::PayloadTooLarge, format!("request body exceeds {max} bytes"))
            } else {
                ApiError::from(r)
            }
        })?;
        // Every body of this API is an object; serde would also read a struct from an array.
        if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::new(ErrorCode::InvalidRequest, "the request body must be a JSON object"));
        }
        serde_json::from_slice(&body)
            .map(JsonBody)
            .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, format!("invalid JSON body: {e}")))
    }
}

/// Whether a `Content-Type` is JSON: `application/json` (any case, parameters allowed, such as
/// `; charset=utf-8`) or a `+json` type of `application/`.
fn is_json(content_type: Option<&[u8]>) -> bool {
    let Some(Ok(value)) = content_type.map(std::str::from_utf8) else { return false };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_content_types_carry_json_bodies() {
        for ok in
            ["application/json", "Application/JSON", "application/json; charset=utf-8", "application/merge-patch+json"]
        {
            assert!(is_json(Some(ok.as_bytes())), "{ok}");
        }
        // What a page of another site can send without a preflight, and the rest.
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            "json",
            "text/json",
        ] {
            assert!(!is_json(Some(bad.as_bytes())), "{bad}");
        }
        assert!(!is_json(None));
        assert!(!is_json(Some(&[0xff, 0xfe])));
    }

    #[test]
    fn batches_read_count_and_format_up_to_the_limit() {
        let ok = |q: Option<&str>| batch_of(q).unwrap();
        assert_eq!(ok(None), Batch::default());
        assert_eq!(ok(Some("count=5")), Batch { count: Some(5), format: IdFormat::Text });
        assert_eq!(ok(Some("format=ranges")), Batch { count: None, format: IdFormat::Ranges });
        assert_eq!(ok(Some("x=1&format=ranges&count=1000000")).count, Some(1_000_000));
        assert_eq!(ok(Some("count=7&count=9")).count, Some(7));
        let code = |q: &str| batch_of(Some(q)).unwrap_err().code;
        assert_eq!(ok(Some("count=1000000")).count, Some(1_000_000));
        assert_eq!(code("count=1000001"), ErrorCode::InvalidCount);
        assert_eq!(code("count=1000001&format=text"), ErrorCode::InvalidCount);
        assert_eq!(code("format=ranges&count=1000001"), ErrorCode::InvalidCount);
        assert_eq!(code("format=ranges&count=0"), ErrorCode::InvalidCount);
        assert_eq!(code("format=json"), ErrorCode::InvalidRequest);
        assert_eq!(code("format="), ErrorCode::InvalidRequest);
    }
}
