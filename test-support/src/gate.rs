//! A TCP gate in front of one address, which a test closes to cut whatever dials through it off
//! (a region from its global tier, say) and opens again to heal the link.
//!
//! Closed, it accepts a connection and drops it at once, and it drops every connection open
//! when it closed, so a pooled keep-alive connection is cut too.
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The gate; dropping it stops it.
pub struct Gate {
    addr: SocketAddr,
    open: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    /// An open gate on a loopback port of its own, in front of `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Gate> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (open, watch) = watch::channel(true);
        let task = tokio::spawn(accept(listener, target, watch));
        Ok(Gate { addr, open, task })
    }

    /// The address to dial instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts every connection through the gate, and every new one until [`Gate::open`].
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// Lets connections through again.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, open: watch::Receiver<bool>) {
    while let Ok((inbound, _)) = listener.accept().await {
        if !*open.borrow() {
            continue; // dropped: the dialer sees its connection closed
        }
        tokio::spawn(forward(inbound, target, open.clone()));
    }
}

/// Copies both ways until either side ends or the gate closes.
async fn forward(mut inbound: TcpStream, target: SocketAddr, mut open: watch::Receiver<bool>) {
    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = open.wait_for(|open| !*open) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Open, bytes pass both ways; closed, an open connection is cut and a new one gets nothing.
    #[tokio::test]
    async fn a_closed_gate_cuts_open_and_new_connections() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let gate = Gate::start(target).await.unwrap();
        let mut conn = TcpStream::connect(gate.addr()).await.unwrap();
        conn.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        gate.close();
        let mut rest = Vec::new();
        assert_eq!(conn.read_to_end(&mut rest).await.unwrap(), 0, "the open connection is cut");
        let mut fresh = TcpStream::connect(gate.addr()).await.unwrap();
        let _ = fresh.write_all(b"ping").await;
        assert!(matches!(fresh.read(&mut buf).await, Ok(0) | Err(_)), "a new connection gets nothing");

        gate.open();
        let mut healed = TcpStream::connect(gate.addr()).await.unwrap();
        healed.write_all(b"pong").await.unwrap();
        healed.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
