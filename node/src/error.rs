//! [`ApiError`], the one error type of the service core: a stable [`ErrorCode`] and a message a
//! client may read. It is defined here, beneath every layer that refuses a request (`access/`,
//! `profiles/`, `service/`), so that none of them names another for it; the conversions from
//! each layer's typed errors, and the rule for what a message may hold, are in
//! [`crate::service::error`]. The edges map the code to an HTTP or gRPC status.
use leaf_api::ErrorCode;

/// A failed request, before an edge makes it a response.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Seconds for a `Retry-After` header (a rate-limited request).
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), retry_after_secs: None }
    }

    /// The same error, telling the caller to come back after `secs` seconds.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::InvalidRequest, message)
    }
}
