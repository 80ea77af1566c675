//! The quota of ID requests that carry no token, per client address and counted in IDs: one
//! request for a million IDs costs a million. Without it a single anonymous request could
//! take a bounded or daily tag's whole remaining range.
//!
//! The buckets ([`Gcra`]) sit in a fixed table indexed by a keyed hash of the address (an IPv6
//! address by its /64, which one host usually holds whole), so the per-ID path takes no lock
//! and the memory is the same for ten clients or ten million. Addresses that land in the same
//! cell share its quota: with the table's 4,096 cells and a generous default that costs a
//! well-behaved client nothing, and the key is random per node, so no client can aim at
//! another's cell. Each thread remembers the last address it hashed and its cell (a
//! connection's requests come one after another from one address).
use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::quota::Gcra;

/// Cells in the table.
const CELLS: usize = 4096;

/// The anonymous buckets of one node.
pub struct AnonymousQuota {
    cells: Box<[Gcra]>,
    key: std::collections::hash_map::RandomState,
    /// This table among every one of the process, for [`LAST`].
    id: u64,
}

thread_local! {
    /// The last address this thread found a cell for, and the table and cell: a connection's
    /// requests come from one address, and the keyed hash costs more than the rest of the
    /// check.
    static LAST: Cell<Option<(u64, IpAddr, usize)>> = const { Cell::new(None) };
}

impl AnonymousQuota {
    /// `ids_per_sec` IDs a second per address, at most `burst_ids` at once (both at least 1).
    pub fn new(ids_per_sec: u32, burst_ids: u32) -> Self {
        static TABLES: AtomicU64 = AtomicU64::new(0);
        let cells = (0..CELLS).map(|_| Gcra::per_sec(ids_per_sec, burst_ids)).collect();
        AnonymousQuota { cells, key: Default::default(), id: TABLES.fetch_add(1, Ordering::Relaxed) }
    }

    /// Takes `n` IDs for a request from `addr` at the time `clock` reads (monotonic
    /// nanoseconds); refused with the wait.
    pub fn take(&self, addr: IpAddr, n: u64, clock: impl Fn() -> u64) -> Result<(), Duration> {
        self.cells[self.cell(addr)].take_n_by(clock, n)
    }

    fn cell(&self, addr: IpAddr) -> usize {
        LAST.with(|last| match last.get() {
            Some((id, a, cell)) if id == self.id && a == addr => cell,
            _ => {
                let cell = self.hash_cell(addr);
                last.set(Some((self.id, addr, cell)));
                cell
            }
        })
    }

    fn hash_cell(&self, addr: IpAddr) -> usize {
        let mut h = self.key.build_hasher();
        match addr {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => h.write(&v4.octets()),
                None => h.write(&a.octets()[..8]),
            },
        }
        (h.finish() as usize) % CELLS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn each_address_has_its_own_ids_per_second() {
        let q = AnonymousQuota::new(10, 1_000);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = 100 * SEC;
        assert!(q.take(a, 1_000, || t0).is_ok(), "one request for the whole burst");
        let wait = q.take(a, 1, || t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100), "then one ID every 100 ms");
        if q.cell(a) != q.cell(b) {
            assert!(q.take(b, 1_000, || t0).is_ok(), "another address is not charged for it");
        }
        assert!(q.take(a, 10, || t0 + SEC).is_ok(), "ten a second come back");
        assert!(q.take(a, 1, || t0 + SEC).is_err());
    }

    /// The thread's remembered cell is its table's and its address's only.
    #[test]
    fn the_remembered_cell_is_per_table_and_address() {
        let (q1, q2) = (AnonymousQuota::new(1, 1), AnonymousQuota::new(1, 1));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..2 {
            for addr in [a, a, b, a] {
                assert_eq!(q1.cell(addr), q1.hash_cell(addr));
                assert_eq!(q2.cell(addr), q2.hash_cell(addr));
            }
        }
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_a_mapped_ipv4_its_ipv4() {
        let q = AnonymousQuota::new(1, 1);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other_in_64: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert_eq!(q.cell(one), q.cell(other_in_64));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(q.cell(v4), q.cell(mapped));
    }
}
