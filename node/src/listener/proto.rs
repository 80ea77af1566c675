//! Which HTTP version a connection speaks, decided once per connection before hyper serves
//! it, so each connection gets a builder of one version ([`Protocols`]) and HTTP/1.1 keeps
//! its header-read timeout from the first byte on.
//!
//! - Plaintext: the first bytes are peeked (not consumed): the HTTP/2 connection preface
//!   (h2c with prior knowledge, what gRPC clients send) means HTTP/2, anything else HTTP/1.1.
//!   A connection that sends nothing within `http.header_read_timeout_ms`, or closes, is
//!   dropped, as hyper's header timeout did before.
//! - TLS: ALPN decides: `h2` means HTTP/2; `http/1.1` or none means HTTP/1.1.
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The HTTP version of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

/// One connection builder per version, configured once.
#[derive(Clone)]
pub struct Protocols {
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

impl Protocols {
    /// HTTP/1.1 with keep-alive and the header-read timeout. HTTP/2: a connection may stay
    /// open while idle (a gRPC channel is long-lived; it holds one `http.max_connections`
    /// slot like a keep-alive HTTP/1.1 connection), but a peer that stops answering the
    /// keep-alive ping sent after `header_read_timeout` of silence within the same time is
    /// dropped; at most 256 concurrent streams and 16 KiB of headers per request (hyper's
    /// reset-flood limit stays on).
    pub fn new(header_read_timeout: Duration) -> Self {
        let mut b = auto::Builder::new(TokioExecutor::new());
        b.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout).keep_alive(true);
        b.http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(header_read_timeout))
            .keep_alive_timeout(header_read_timeout)
            .max_concurrent_streams(256)
            .max_header_list_size(16 * 1024);
        Protocols { h1: b.clone().http1_only(), h2: b.http2_only() }
    }

    /// The builder for connections of version `p`.
    pub fn builder(&self, p: Proto) -> &auto::Builder<TokioExecutor> {
        match p {
            Proto::Http1 => &self.h1,
            Proto::Http2 => &self.h2,
        }
    }
}

/// The version a plaintext connection speaks, from its first bytes, within `limit`; `None`
/// when it closed or sent nothing in time.
pub async fn sniff(stream: &TcpStream, limit: Duration) -> Option<Proto> {
    let work = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = stream.peek(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            if buf[..n] != H2_PREFACE[..n] {
                return Some(Proto::Http1);
            }
            if n == H2_PREFACE.len() {
                return Some(Proto::Http2);
            }
            // A prefix of the preface (or an HTTP/1 method starting with P): peeking again at
            // once would spin, as the bytes already there keep the socket readable.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(limit, work).await.ok().flatten()
}

/// The version a TLS connection negotiated through ALPN.
pub fn of_alpn(alpn: Option<&[u8]>) -> Proto {
    match alpn {
        Some(b"h2") => Proto::Http2,
        _ => Proto::Http1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn sniffed(first: &[u8]) -> Option<Proto> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let first = first.to_vec();
        let client = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(&first).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(c);
        });
        let (s, _) = listener.accept().await.unwrap();
        let p = sniff(&s, Duration::from_millis(150)).await;
        client.await.unwrap();
        p
    }

    #[tokio::test]
    async fn the_preface_means_http2_and_anything_else_http1() {
        assert_eq!(sniffed(H2_PREFACE).await, Some(Proto::Http2));
        assert_eq!(sniffed(b"GET / HTTP/1.1\r\n").await, Some(Proto::Http1));
        assert_eq!(sniffed(b"POST /x HTTP/1.1\r\n").await, Some(Proto::Http1));
        assert_eq!(sniffed(b"PRI * HTTP/1.1\r\n").await, Some(Proto::Http1));
        // Silence, or half a preface that never completes: dropped when the time is up.
        assert_eq!(sniffed(b"").await, None);
        assert_eq!(sniffed(b"PRI * HT").await, None);
        assert_eq!(of_alpn(Some(b"h2")), Proto::Http2);
        assert_eq!(of_alpn(Some(b"http/1.1")), Proto::Http1);
        assert_eq!(of_alpn(None), Proto::Http1);
    }
}
