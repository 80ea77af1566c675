//! One HTTP attempt against one node: the connector (the one place a TLS connector will go),
//! the keep-alive pool, the per-attempt timeout and the bounded read of the answer.
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;

use crate::error::ClientError;

/// Largest answer read (a batch of 100,000 IDs is about 2 MB).
pub(crate) const MAX_ANSWER_BYTES: usize = 16 << 20;

/// An answer of any status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawReply {
    pub status: StatusCode,
    pub body: Bytes,
}

/// The connection pool shared by every clone of a client.
#[derive(Clone, Debug)]
pub(crate) struct Transport {
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

impl Transport {
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Transport { http: HyperClient::builder(TokioExecutor::new()).build(connector) }
    }

    /// Sends one request to `base` (`http://host:port`) and reads the whole answer, within
    /// `timeout`.
    pub async fn send(
        &self,
        base: &str,
        method: Method,
        path: &str,
        auth: Option<&HeaderValue>,
        body: Option<&Bytes>,
        timeout: Duration,
    ) -> Result<RawReply, ClientError> {
        let mut b = Request::builder().method(method).uri(format!("{base}{path}"));
        if let Some(auth) = auth {
            b = b.header(AUTHORIZATION, auth.clone());
        }
        if body.is_some() {
            b = b.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let req = b
            .body(Full::new(body.cloned().unwrap_or_default()))
            .map_err(|e| ClientError::Request(format!("{path:?}: {e}")))?;
        let node = || base.to_string();
        let attempt = async {
            let resp = self.http.request(req).await.map_err(|e| ClientError::Transport {
                node: node(),
                message: error_chain(&e),
                connect: e.is_connect(),
            })?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES).collect().await.map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    ClientError::Decode { node: node(), status, message: format!("more than {MAX_ANSWER_BYTES} bytes") }
                } else {
                    ClientError::Transport { node: node(), message: format!("reading the answer: {e}"), connect: false }
                }
            })?;
            Ok(RawReply { status, body: body.to_bytes() })
        };
        tokio::time::timeout(timeout, attempt).await.map_err(|_| ClientError::Timeout { node: node(), timeout })?
    }
}

/// An error and its sources, `a: b: c` (hyper's top-level text alone is rarely useful).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
