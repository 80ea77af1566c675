//! The one place where errors become HTTP statuses: the core's [`ApiError`] as a response
//! ([`status_of`] its code), axum's extractor rejections as `ApiError`s, and the JSON form of
//! the responses the router and the tower layers produce themselves (404, 405, 413, timeouts).
use axum::extract::rejection::{BytesRejection, QueryRejection, RawPathParamsRejection};
use axum::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use leaf_api::{ErrorBody, ErrorCode};

use crate::service::recent::ErrorNote;
use crate::service::ApiError;

/// The HTTP status of each error code.
pub fn status_of(code: ErrorCode) -> StatusCode {
    use ErrorCode::*;
    match code {
        InvalidTag | InvalidCount | InvalidRequest => StatusCode::BAD_REQUEST,
        PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Unauthorized => StatusCode::UNAUTHORIZED,
        Forbidden => StatusCode::FORBIDDEN,
        TagNotFound | NotFound | TokenNotFound | TemplateNotFound | NumberNotFound => StatusCode::NOT_FOUND,
        RateLimited => StatusCode::TOO_MANY_REQUESTS,
        MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        TagExists | TagExhausted | MemberExists | NodeIdRetired | TemplateConflict | WrongProfile | NumberConflict
        | FeatureNotActive | MembershipConflict | TokenExists | RegionConflict => StatusCode::CONFLICT,
        MemberNotFound => StatusCode::NOT_FOUND,
        SegmentsNotReady | NotReady | Unavailable | ShuttingDown | SnowflakeUnavailable | ClockMovedBackwards
        | WorkerIdsExhausted => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Serializes an error body; `ErrorBody` holds only strings, numbers and a unit enum, so this
/// cannot fail.
fn error_json(code: ErrorCode, message: String) -> Vec<u8> {
    serde_json::to_vec(&ErrorBody::new(code, message)).unwrap_or_default()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let note = ErrorNote { code: self.code, message: std::sync::Arc::from(self.message.as_str()) };
        let mut r = (status_of(self.code), error_json(self.code, self.message)).into_response();
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after_secs {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        // Read by the finishing layer, which counts errors per code, and by the connection,
        // which keeps the recent ones for the dashboard.
        r.extensions_mut().insert(self.code);
        r.extensions_mut().insert(note);
        r
    }
}

/// The code of a bodiless error response made by the router or a tower layer (no handler
/// ran): 404 unknown path, 405 wrong method, 413 body over the limit, 503 timeout.
pub fn framework_code(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        s if s.is_client_error() => ErrorCode::InvalidRequest,
        _ => ErrorCode::Unavailable,
    }
}

/// The message of a framework error, for people.
pub fn framework_message(code: ErrorCode, allow: Option<&str>, max_body: usize) -> String {
    match code {
        ErrorCode::NotFound => "no such endpoint".to_string(),
        ErrorCode::MethodNotAllowed => format!("allowed: {}", allow.unwrap_or("")),
        ErrorCode::PayloadTooLarge => format!("request body exceeds {max_body} bytes"),
        ErrorCode::InvalidRequest => "malformed request".to_string(),
        _ => "the request did not complete in time".to_string(),
    }
}

/// A body that could not be read: over the limit (413) or broken off (400).
impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(ErrorCode::PayloadTooLarge, "request body exceeds the limit")
        } else {
            ApiError::new(ErrorCode::InvalidRequest, format!("reading body: {}", r.body_text()))
        }
    }
}

/// A query string that does not fit the endpoint's parameters.
impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::new(ErrorCode::InvalidRequest, r.body_text())
    }
}

/// A path parameter that is not UTF-8 once percent-decoded (the router matched, so it is there).
impl From<RawPathParamsRejection> for ApiError {
    fn from(r: RawPathParamsRejection) -> Self {
        ApiError::new(ErrorCode::InvalidRequest, r.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_4xx_or_503_status() {
        for code in ErrorCode::ALL {
            let s = status_of(code);
            assert!(s.is_client_error() || s == StatusCode::SERVICE_UNAVAILABLE, "{code}: {s}");
        }
    }

    #[test]
    fn framework_statuses_keep_their_status() {
        for s in [404, 405, 413, 400, 415, 503] {
            let status = StatusCode::from_u16(s).unwrap();
            assert_eq!(status_of(framework_code(status)), if s == 415 { StatusCode::BAD_REQUEST } else { status });
        }
    }

    #[test]
    fn an_api_error_is_json_with_its_status() {
        let r = ApiError::new(ErrorCode::TagNotFound, "no tag x").into_response();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(r.extensions().get::<ErrorCode>(), Some(&ErrorCode::TagNotFound));
    }
}
