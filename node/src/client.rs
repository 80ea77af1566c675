//! A small HTTP client for the CLI (and tests) over the node's public API.
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;

/// Why a request failed before an HTTP response arrived.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid URL {0:?}")]
    Url(String),
    #[error("request to {url} failed: {message}")]
    Transport { url: String, message: String },
    #[error("request to {0} timed out")]
    Timeout(String),
}

/// A keep-alive client bound to one node's base URL.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: HyperClient<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl Client {
    /// `base` like `http://127.0.0.1:8080`; `token` is sent as a bearer token.
    pub fn new(base: &str, token: Option<String>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
            timeout: Duration::from_secs(30),
        }
    }

    /// Replaces the per-request timeout (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends a request; returns the status and body (any status).
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let url = format!("{}{}", self.base, path);
        let mut b = Request::builder().method(method).uri(&url);
        if let Some(t) = &self.token {
            b = b.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        let body = match body {
            Some(v) => {
                b = b.header(CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(v.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        let req = b.body(body).map_err(|_| ClientError::Url(url.clone()))?;
        let fut = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| ClientError::Transport { url: url.clone(), message: format!("{e:?}") })?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| ClientError::Transport { url: url.clone(), message: e.to_string() })?
                .to_bytes();
            Ok((status, bytes))
        };
        tokio::time::timeout(self.timeout, fut).await.map_err(|_| ClientError::Timeout(url.clone()))?
    }

    pub async fn get(&self, path: &str) -> Result<(StatusCode, Bytes), ClientError> {
        self.request(Method::GET, path, None).await
    }
}
