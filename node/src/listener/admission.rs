//! Who gets a connection: the caps that keep a flood of connections from shutting out the
//! cluster's own traffic.
//!
//! - `http.max_connections` client slots for everyone;
//! - at most `http.max_connections_per_address` of them held by one address (an IPv6 address
//!   counts by its /64), so one host cannot take them all;
//! - `http.reserved_peer_connections` slots beyond those, for member nodes only: with TLS, a
//!   connection that finds no client slot may handshake on a reserved one, and keeps it only if
//!   its certificate speaks for a current member ([`Ticket::keep_if_member`]). The handshake
//!   on probation is short ([`PROBATION`]) and one address holds at most
//!   [`RESERVED_PER_ADDRESS`] reserved slots, so a flooding host cannot sit on the reserve.
//!   Without TLS nothing proves a peer before its first request, so the reserve is not used
//!   there; the per-address cap still keeps a single flooding host from filling the node.
//!
//! A connection refused here gets the complete 503 of [`super::refuse_connection`].
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Longest TLS handshake on a reserved slot: a peer's takes milliseconds.
pub const PROBATION: std::time::Duration = std::time::Duration::from_secs(2);
/// Most reserved slots one address holds at once.
pub const RESERVED_PER_ADDRESS: usize = 8;

/// The connection caps of one listener.
pub struct Admission {
    clients: Arc<Semaphore>,
    peers: Arc<Semaphore>,
    per_address: usize,
    open: Arc<Mutex<HashMap<AddrKey, Held>>>,
}

/// The connections one address holds, and how many of them on reserved slots.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    all: usize,
    reserved: usize,
}

/// An address as the per-address cap counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum AddrKey {
    V4([u8; 4]),
    /// The /64 of an IPv6 address.
    V6([u8; 8]),
}

impl AddrKey {
    fn of(addr: IpAddr) -> AddrKey {
        match addr {
            IpAddr::V4(a) => AddrKey::V4(a.octets()),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => AddrKey::V4(v4.octets()),
                None => {
                    let mut prefix = [0u8; 8];
                    prefix.copy_from_slice(&a.octets()[..8]);
                    AddrKey::V6(prefix)
                }
            },
        }
    }
}

/// An admitted connection's slot; dropping it frees the slot and the address's count.
pub struct Ticket {
    _slot: OwnedSemaphorePermit,
    /// On a reserved slot: kept only by a member's certificate.
    pub reserved: bool,
    key: AddrKey,
    open: Arc<Mutex<HashMap<AddrKey, Held>>>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = open.get_mut(&self.key) {
            held.all -= 1;
            held.reserved -= usize::from(self.reserved);
            if held.all == 0 {
                open.remove(&self.key);
            }
        }
    }
}

impl Ticket {
    /// Whether a connection holding this ticket may go on, given whom its certificate speaks
    /// for: on a reserved slot only a current member may.
    pub fn keep_if_member(&self, member: bool) -> bool {
        !self.reserved || member
    }
}

impl Admission {
    pub fn new(max_connections: usize, per_address: usize, reserved_for_peers: usize) -> Self {
        Admission {
            clients: Arc::new(Semaphore::new(max_connections)),
            peers: Arc::new(Semaphore::new(reserved_for_peers)),
            per_address,
            open: Arc::default(),
        }
    }

    /// A slot for a connection from `addr`, or `None` (refuse it). `tls`: whether the
    /// connection will present a certificate before any request, so a reserved slot can be
    /// tried.
    pub fn admit(&self, addr: IpAddr, tls: bool) -> Option<Ticket> {
        let key = AddrKey::of(addr);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let held = open.get(&key).copied().unwrap_or_default();
        let client = (held.all < self.per_address).then(|| self.clients.clone().try_acquire_owned().ok()).flatten();
        let (slot, reserved) = match client {
            Some(slot) => (slot, false),
            None if tls && held.reserved < RESERVED_PER_ADDRESS => (self.peers.clone().try_acquire_owned().ok()?, true),
            None => return None,
        };
        let entry = open.entry(key).or_default();
        entry.all += 1;
        entry.reserved += usize::from(reserved);
        Some(Ticket { _slot: slot, reserved, key, open: self.open.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_the_reserve_is_for_tls() {
        let a = Admission::new(10, 3, 2);
        let held: Vec<Ticket> = (0..3).map(|_| a.admit(ip("10.0.0.1"), false).unwrap()).collect();
        assert!(a.admit(ip("10.0.0.1"), false).is_none(), "a fourth from the same address");
        assert!(held.iter().all(|t| !t.reserved));
        // With TLS, over the cap, a reserved slot on probation.
        let probation = a.admit(ip("10.0.0.1"), true).unwrap();
        assert!(probation.reserved && probation.keep_if_member(true) && !probation.keep_if_member(false));
        // Others still get client slots; the same /64 counts as one address.
        let v6: Vec<Ticket> = (0..3).map(|i| a.admit(ip(&format!("2001:db8::{i}")), false).unwrap()).collect();
        assert!(a.admit(ip("2001:db8::ffff:1"), false).is_none());
        assert!(a.admit(ip("::ffff:10.0.0.1"), false).is_none(), "a mapped IPv4 is that IPv4");
        drop(held);
        drop(probation);
        assert!(a.open.lock().unwrap().get(&AddrKey::of(ip("10.0.0.1"))).is_none(), "counts go with the tickets");
        assert!(a.admit(ip("10.0.0.1"), false).is_some());
        drop(v6);
    }

    #[test]
    fn when_every_client_slot_is_taken_only_the_reserve_is_left() {
        let a = Admission::new(2, 10, 1);
        let _x = a.admit(ip("10.0.0.1"), false).unwrap();
        let _y = a.admit(ip("10.0.0.2"), false).unwrap();
        assert!(a.admit(ip("10.0.0.3"), false).is_none(), "plaintext: refused");
        let r = a.admit(ip("10.0.0.3"), true).unwrap();
        assert!(r.reserved);
        assert!(a.admit(ip("10.0.0.4"), true).is_none(), "the reserve is full too");
    }

    #[test]
    fn one_address_holds_few_reserved_slots() {
        let a = Admission::new(1, 1, 100);
        let _client = a.admit(ip("10.0.0.1"), true).unwrap();
        let reserved: Vec<Ticket> = (0..RESERVED_PER_ADDRESS).map(|_| a.admit(ip("10.0.0.1"), true).unwrap()).collect();
        assert!(reserved.iter().all(|t| t.reserved));
        assert!(a.admit(ip("10.0.0.1"), true).is_none());
        assert!(a.admit(ip("10.0.0.2"), true).is_some(), "another address still finds the reserve");
    }
}
