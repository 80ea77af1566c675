//! One HTTP attempt against one node: the connector (plain TCP for `http://`, `rustls` for
//! `https://`), the keep-alive pool, the per-attempt timeout, the bounded read of the answer
//! and the classification of what went wrong.
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;

use crate::error::{ClientError, TlsFailure};

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
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Whether a client certificate is configured (for the words of a refused connection).
    client_cert: bool,
}

impl Transport {
    /// A pool that speaks `http://` as plain TCP and `https://` with `tls`.
    pub fn new(tls: rustls::ClientConfig) -> Self {
        let client_cert = tls.client_auth_cert_resolver.has_certs();
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        // `https://` URLs pass through to the TLS layer.
        tcp.enforce_http(false);
        let connector =
            HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().wrap_connector(tcp);
        Transport { http: HyperClient::builder(TokioExecutor::new()).build(connector), client_cert }
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
            let resp = self.http.request(req).await.map_err(|e| request_error(base, &e, self.client_cert))?;
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

impl Transport {
    /// Sends a `GET` of `path` to `base` and writes a 2xx answer's body to `out` as it comes,
    /// each part within `idle` of the last (no bound on the whole: a backup may be large);
    /// returns the bytes written. Another status is read (bounded) as an API error.
    pub async fn download(
        &self,
        base: &str,
        path: &str,
        auth: Option<&HeaderValue>,
        out: &mut (impl tokio::io::AsyncWrite + Unpin),
        idle: Duration,
    ) -> Result<u64, ClientError> {
        use tokio::io::AsyncWriteExt;
        let mut b = Request::builder().method(Method::GET).uri(format!("{base}{path}"));
        if let Some(auth) = auth {
            b = b.header(AUTHORIZATION, auth.clone());
        }
        let req = b.body(Full::new(Bytes::new())).map_err(|e| ClientError::Request(format!("{path:?}: {e}")))?;
        let node = || base.to_string();
        let timeout = |_| ClientError::Timeout { node: node(), timeout: idle };
        let resp = tokio::time::timeout(idle, self.http.request(req))
            .await
            .map_err(timeout)?
            .map_err(|e| request_error(base, &e, self.client_cert))?;
        let status = resp.status();
        let mut body = resp.into_body();
        if !status.is_success() {
            let bytes =
                tokio::time::timeout(idle, Limited::new(body, MAX_ANSWER_BYTES).collect()).await.map_err(timeout)?;
            let bytes = bytes.map(|b| b.to_bytes()).unwrap_or_default();
            return Err(crate::client::api_error(base, status, &bytes));
        }
        let mut written = 0u64;
        let broken = |message: String| ClientError::Transport { node: node(), message, connect: false };
        while let Some(frame) = tokio::time::timeout(idle, body.frame()).await.map_err(timeout)? {
            let frame = frame.map_err(|e| broken(format!("reading the answer: {e}")))?;
            if let Ok(data) = frame.into_data() {
                out.write_all(&data).await.map_err(|e| ClientError::Request(format!("writing the download: {e}")))?;
                written += data.len() as u64;
            }
        }
        out.flush().await.map_err(|e| ClientError::Request(format!("writing the download: {e}")))?;
        Ok(written)
    }
}

/// The error of a request that got no answer: a TLS failure when the chain holds one (the
/// node processed no request), otherwise a transport error.
fn request_error(base: &str, e: &hyper_util::client::legacy::Error, client_cert: bool) -> ClientError {
    match crate::tls::diagnose(e) {
        // A handshake failure, or a certificate a node refused: the request was never processed.
        Some((failure, message)) if failure != TlsFailure::Handshake || e.is_connect() => {
            ClientError::Tls { node: base.to_string(), failure, message }
        }
        _ => {
            let mut message = error_chain(e);
            let not_sent = is_canceled(e);
            if base.starts_with("http://") && is_parse_error(e) {
                message.push_str(" (the answer is not HTTP: if the node serves TLS, use https://)");
            } else if base.starts_with("https://") && not_sent && !client_cert {
                // With TLS 1.3 a client learns that its (absent) certificate was refused only
                // when it next reads; the node's alert may close the connection before the
                // request is written, and then the alert is not in this error's chain.
                message.push_str(
                    " (the node closed the connection right after the TLS handshake: if it requires a client \
                     certificate, pass --client-cert and --client-key / LEAF_CLIENT_CERT and LEAF_CLIENT_KEY)",
                );
            }
            ClientError::Transport { node: base.to_string(), message, connect: e.is_connect() || not_sent }
        }
    }
}

/// Whether the request was given up before it was written: the connection closed first.
fn is_canceled(e: &(dyn std::error::Error + 'static)) -> bool {
    find_hyper(e).is_some_and(hyper::Error::is_canceled)
}

/// Whether hyper could not parse the answer as HTTP.
fn is_parse_error(e: &(dyn std::error::Error + 'static)) -> bool {
    find_hyper(e).is_some_and(hyper::Error::is_parse)
}

/// The first `hyper::Error` in the chain of `e`.
fn find_hyper<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a hyper::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            return Some(h);
        }
        next = e.source();
    }
    None
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
