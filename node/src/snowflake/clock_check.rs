//! The startup peer clock check's arithmetic: one sample per peer, `(local ms before the call,
//! the peer's ms, local ms after it)`, turned into an RTT-compensated offset.
//!
//! A peer's answer is untrusted input (a broken or malicious peer can answer `i64::MIN` or
//! `i64::MAX`) and the local clock can jump during the call, so every step is checked: a sample
//! with a negative round trip, one longer than the call's timeout, or an offset of more than a
//! year is discarded (the caller logs and counts it), and nothing here can overflow or panic.
//! [`verdict`] turns the average offset into the check's outcome.
use std::time::Duration;

/// Offsets beyond this are not a clock that drifted but a broken answer (or a broken clock).
pub const MAX_SANE_OFFSET_MS: i64 = 366 * 24 * 3600 * 1000;

/// One usable sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The peer's clock minus this node's (positive: the peer is ahead).
    pub offset_ms: i64,
    pub rtt_ms: i64,
}

/// The offset of a peer's clock from `(before, peer, after)`, or why the sample is unusable.
/// `timeout` is the call's timeout: a longer round trip cannot have come from that call.
pub fn sample(before: i64, peer: i64, after: i64, timeout: Duration) -> Result<Sample, String> {
    let rtt_ms = after.checked_sub(before).ok_or("the round trip overflows")?;
    if rtt_ms < 0 {
        return Err(format!("negative round trip ({rtt_ms} ms): this node's clock moved back during the call"));
    }
    let limit_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    if rtt_ms > limit_ms {
        return Err(format!("round trip of {rtt_ms} ms is longer than the call's {limit_ms} ms timeout"));
    }
    // The peer read its clock about halfway through the round trip. `before + rtt / 2` lies
    // between `before` and `after`, so it cannot overflow.
    let midpoint = before + rtt_ms / 2;
    let offset_ms = peer.checked_sub(midpoint).ok_or("the offset overflows")?;
    if offset_ms.checked_abs().is_none_or(|a| a > MAX_SANE_OFFSET_MS) {
        return Err(format!("offset of {offset_ms} ms is beyond a year: not a clock reading"));
    }
    Ok(Sample { offset_ms, rtt_ms })
}

/// The average offset of the usable samples, `None` without any. Exact (no overflow) for any
/// number of samples.
pub fn average_offset(samples: &[Sample]) -> Option<i64> {
    if samples.is_empty() {
        return None;
    }
    let sum: i128 = samples.iter().map(|s| s.offset_ms as i128).sum();
    // The average of values within ±MAX_SANE_OFFSET_MS is within it too.
    i64::try_from(sum / samples.len() as i128).ok()
}

/// The startup check's verdict on the average offset of `usable` samples: `Err` (why
/// snowflake must stay off) when it exceeds `max_peer_offset_ms`; no usable sample passes
/// (the high-water marks alone then keep IDs unique).
pub fn verdict(avg: Option<i64>, usable: usize, max_peer_offset_ms: u64) -> Result<(), String> {
    match avg {
        Some(avg) if avg.unsigned_abs() > max_peer_offset_ms => Err(format!(
            "this node's clock is {} ms {} the average of {usable} reachable peer(s), beyond \
             snowflake.max_peer_offset_ms = {max_peer_offset_ms}; fix the clock (NTP) and restart the node",
            avg.unsigned_abs(),
            if avg > 0 { "behind" } else { "ahead of" },
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(1);
    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn a_normal_sample_is_compensated_for_half_the_round_trip() {
        assert_eq!(sample(NOW, NOW + 510, NOW + 20, T), Ok(Sample { offset_ms: 500, rtt_ms: 20 }));
        assert_eq!(sample(NOW, NOW - 300, NOW + 2, T), Ok(Sample { offset_ms: -301, rtt_ms: 2 }));
        assert_eq!(sample(NOW, NOW, NOW + 1000, T), Ok(Sample { offset_ms: -500, rtt_ms: 1000 }));
    }

    #[test]
    fn extreme_samples_are_discarded_never_overflow() {
        let extremes = [i64::MIN, i64::MIN + 1, -1, 0, 1, NOW, i64::MAX - 1, i64::MAX];
        for before in extremes {
            for peer in extremes {
                for after in extremes {
                    // Must not panic (the tests run with overflow checks on).
                    let _ = sample(before, peer, after, T);
                    let _ = sample(before, peer, after, Duration::MAX);
                }
            }
        }
        // A broken or malicious peer.
        assert!(sample(NOW, i64::MAX, NOW + 1, T).unwrap_err().contains("beyond a year"));
        assert!(sample(NOW, i64::MIN, NOW + 1, T).unwrap_err().contains("overflows"));
        assert!(sample(i64::MAX, i64::MIN, i64::MAX, T).unwrap_err().contains("overflows"));
        assert!(sample(NOW, NOW + MAX_SANE_OFFSET_MS + 1, NOW, T).is_err());
        assert!(sample(NOW, NOW + MAX_SANE_OFFSET_MS, NOW, T).is_ok());
        // A local clock that jumped during the call.
        assert!(sample(NOW, NOW, NOW - 1, T).unwrap_err().contains("negative round trip"));
        assert!(sample(i64::MAX, 0, i64::MIN, T).unwrap_err().contains("overflows"));
        assert!(sample(NOW, NOW, NOW + 1001, T).unwrap_err().contains("timeout"));
        assert!(sample(i64::MIN, 0, i64::MAX, Duration::MAX).unwrap_err().contains("overflows"));
        // The largest round trip the timeout allows, at the edges of the range.
        assert_eq!(sample(i64::MAX - 1000, i64::MAX, i64::MAX, T), Ok(Sample { offset_ms: 500, rtt_ms: 1000 }));
        assert_eq!(sample(i64::MIN, i64::MIN + 500, i64::MIN + 1000, T), Ok(Sample { offset_ms: 0, rtt_ms: 1000 }));
    }

    #[test]
    fn the_average_is_exact_and_empty_is_none() {
        assert_eq!(average_offset(&[]), None);
        let s = |offset_ms| Sample { offset_ms, rtt_ms: 1 };
        assert_eq!(average_offset(&[s(100), s(-300)]), Some(-100));
        let big = vec![s(MAX_SANE_OFFSET_MS); 10_000];
        assert_eq!(average_offset(&big), Some(MAX_SANE_OFFSET_MS));
        let low = vec![s(-MAX_SANE_OFFSET_MS); 3];
        assert_eq!(average_offset(&low), Some(-MAX_SANE_OFFSET_MS));
    }

    #[test]
    fn the_verdict_refuses_only_an_offset_beyond_the_limit() {
        assert_eq!(verdict(None, 0, 1000), Ok(()));
        assert_eq!(verdict(Some(1000), 2, 1000), Ok(()));
        assert_eq!(verdict(Some(-1000), 2, 1000), Ok(()));
        let e = verdict(Some(1001), 2, 1000).unwrap_err();
        assert!(e.contains("1001 ms behind the average of 2 reachable peer(s)"), "{e}");
        let e = verdict(Some(i64::MIN), 1, 1000).unwrap_err();
        assert!(e.contains("ms ahead of the average of 1"), "{e}");
    }
}
