//! The server side of one TLS connection. A client speaking plaintext HTTP to the TLS port
//! gets a complete plaintext `400` with a JSON error saying to use `https://` (not a stalled
//! or silently reset connection); everything else gets the handshake, bounded in time, and
//! the verified identity of the certificate it presented, if any.
use std::sync::LazyLock;
use std::time::Duration;

use leaf_api::identity::CertIdentity;
use leaf_api::{ErrorBody, ErrorCode};
use rustls::HandshakeKind;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::Tls;

/// First byte of a TLS record carrying a handshake message (a ClientHello).
const TLS_HANDSHAKE: u8 = 0x16;

/// A connection through the handshake.
pub struct Accepted {
    pub stream: TlsStream<TcpStream>,
    /// The verified identity of the client's certificate (none presented, or one that names
    /// nobody: `None`).
    pub identity: Option<CertIdentity>,
}

/// Why a connection never got to HTTP.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    #[error("closed before the handshake")]
    Closed,
    #[error("plaintext on the TLS port (answered 400: use https://)")]
    Plaintext,
    #[error("no complete handshake within {0:?}")]
    Timeout(Duration),
    #[error("handshake failed: {0}")]
    Handshake(std::io::Error),
}

/// The answer to plaintext on the TLS port.
static PLAINTEXT_ANSWER: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = ErrorBody::new(
        ErrorCode::InvalidRequest,
        "this port speaks TLS: use https:// (and the cluster's CA, e.g. --ca / LEAF_CA)",
    );
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
});

/// Handshakes `stream` with the current configs, all within `timeout`.
pub async fn accept(tls: &Tls, stream: TcpStream, timeout: Duration) -> Result<Accepted, AcceptError> {
    let counters = tls.counters().clone();
    let work = async {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(0) | Err(_) => return Err(AcceptError::Closed),
            Ok(_) => {}
        }
        if first[0] != TLS_HANDSHAKE {
            counters.plaintext_refused.inc();
            let mut stream = stream;
            let _ = stream.write_all(&PLAINTEXT_ANSWER).await;
            let _ = stream.shutdown().await;
            return Err(AcceptError::Plaintext);
        }
        let loaded = tls.current();
        let stream = TlsAcceptor::from(loaded.server.clone()).accept(stream).await.map_err(AcceptError::Handshake)?;
        match stream.get_ref().1.handshake_kind() {
            Some(HandshakeKind::Resumed) => counters.resumed_handshakes.inc(),
            _ => counters.full_handshakes.inc(),
        };
        // A resumed session carries the chain of its full handshake; it is verified again here.
        let identity =
            stream.get_ref().1.peer_certificates().and_then(|chain| super::identity::identify(&loaded, chain));
        Ok(Accepted { stream, identity })
    };
    let result = match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(AcceptError::Timeout(timeout)),
    };
    if matches!(result, Err(AcceptError::Handshake(_) | AcceptError::Timeout(_))) {
        counters.handshake_failures.inc();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plaintext_answer_is_a_complete_400_with_a_json_error() {
        let text = std::str::from_utf8(&PLAINTEXT_ANSWER).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 "));
        let len: usize = head.split("content-length: ").nth(1).unwrap().parse().unwrap();
        assert_eq!(len, body.len());
        let e: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.contains("https://"), "{}", e.message);
    }
}
