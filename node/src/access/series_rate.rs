//! Each caller's rate of gapless issues and reservations per series on this node
//! ([`leaf_api::gapless::SeriesLimits::issues_per_sec`]): one GCRA bucket per (series, caller),
//! a caller being a scoped token, the admin token, or a client address for a caller without a
//! token (an IPv6 address by its /64). Repeats count too: a flood of repeats costs the leader
//! a Raft round each.
//!
//! Gapless issues are not the per-ID path (each is a Raft commit), so one mutex guards the
//! table. It holds at most [`MAX_BUCKETS`]: when full, the buckets of callers that waited long
//! enough to be full again are dropped (dropping one forgives nothing), and if none is, the
//! whole table is, which a caller with many addresses could only use to reset its own rates.
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use leaf_api::tokens::TokenId;

use super::quota::Gcra;

/// Most (series, caller) buckets kept.
pub const MAX_BUCKETS: usize = 65_536;

/// Who a bucket is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateCaller {
    Token(TokenId),
    Admin,
    /// A caller without a token, by address (an IPv6 address by its /64).
    Addr(IpAddr),
}

impl RateCaller {
    /// A caller without a token at `addr`.
    pub fn addr(addr: IpAddr) -> RateCaller {
        match addr {
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => RateCaller::Addr(IpAddr::V4(v4)),
                None => {
                    let mut o = a.octets();
                    o[8..].fill(0);
                    RateCaller::Addr(IpAddr::V6(o.into()))
                }
            },
            v4 => RateCaller::Addr(v4),
        }
    }
}

struct Bucket {
    per_sec: u32,
    gcra: Gcra,
}

/// The buckets of one node.
#[derive(Default)]
pub struct SeriesRates {
    buckets: Mutex<HashMap<(String, RateCaller), Bucket>>,
}

impl SeriesRates {
    /// Takes one issue of `tag` for `who` at `per_sec` (a burst of as many), at `now_ns`
    /// (monotonic nanoseconds); refused with the wait.
    pub fn take(&self, tag: &str, who: RateCaller, per_sec: u32, now_ns: u64) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let key = (tag.to_string(), who);
        if !buckets.contains_key(&key) && buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, b| !b.gcra.is_full_at(now_ns));
            if buckets.len() >= MAX_BUCKETS {
                buckets.clear();
            }
        }
        let bucket = buckets.entry(key).or_insert_with(|| Bucket { per_sec, gcra: Gcra::per_sec(per_sec, per_sec) });
        // The series' rate changed: a fresh bucket at the new rate.
        if bucket.per_sec != per_sec {
            *bucket = Bucket { per_sec, gcra: Gcra::per_sec(per_sec, per_sec) };
        }
        bucket.gcra.take_n_by(|| now_ns, 1)
    }

    /// Buckets kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn each_caller_of_each_series_has_its_own_rate() {
        let r = SeriesRates::default();
        let a = RateCaller::addr("10.0.0.1".parse().unwrap());
        for _ in 0..3 {
            r.take("inv", a, 3, SEC).unwrap();
        }
        assert!(r.take("inv", a, 3, SEC).is_err(), "past the burst");
        r.take("other", a, 3, SEC).unwrap();
        r.take("inv", RateCaller::Token(TokenId(1)), 3, SEC).unwrap();
        r.take("inv", RateCaller::addr("10.0.0.2".parse().unwrap()), 3, SEC).unwrap();
        assert!(r.take("inv", a, 3, SEC + SEC / 3 + 1).is_ok(), "a third of a second later, one more");
        // One /64 is one caller.
        let v6 = |s: &str| RateCaller::addr(s.parse().unwrap());
        assert_eq!(v6("2001:db8::1"), v6("2001:db8::ffff:1"));
        assert_ne!(v6("2001:db8::1"), v6("2001:db8:0:1::1"));
    }

    #[test]
    fn the_table_stays_bounded() {
        let r = SeriesRates::default();
        for i in 0..MAX_BUCKETS as u32 + 10 {
            let who = RateCaller::Addr(std::net::Ipv4Addr::from(i).into());
            r.take("inv", who, 1, SEC).unwrap();
        }
        assert!(r.len() <= MAX_BUCKETS);
    }
}
