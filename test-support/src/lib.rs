//! What leaf's test suites share (`node/tests/`, `cluster-tests/tests/`): waiting on a
//! condition instead of sleeping ([`eventually`], [`until`], [`until_holds`]), and the client calls every suite
//! makes (tags, IDs, error bodies, snowflake readiness), written once.
//!
//! Layout:
//! - this file: [`eventually`] (and [`until`], [`until_holds`] over it), the one way a test
//!   waits;
//! - [`calls`]: the calls on a [`leaf_client::Client`] the suites share;
//! - [`gate`]: a TCP gate a test closes to cut a link and opens to heal it.
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

pub mod calls;
pub mod gate;

pub use calls::{
    create_bounded_tag, create_regions_token, create_tag, error_of, get_ids, tag_req, try_get_ids, wait_snowflake,
};

/// How often [`eventually`] and [`until`] look again.
pub const POLL: Duration = Duration::from_millis(20);

/// Asks `probe` every [`POLL`] until it answers `Ok`, and returns that; fails the test with
/// `what` and the last `Err` once `within` has passed. The one way a test waits on a condition:
/// never a fixed sleep.
pub async fn eventually<T, E, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    E: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let last = match probe().await {
            Ok(v) => return v,
            Err(e) => e,
        };
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {within:?}; last seen: {last:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a condition that is only true or false.
pub async fn until<F, Fut>(what: &str, within: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(what, within, || {
        let done = done();
        async move {
            if done.await {
                Ok(())
            } else {
                Err("false")
            }
        }
    })
    .await
}

/// [`until`] for a condition read without waiting (an atomic counter, a shared map).
pub async fn until_holds(what: &str, within: Duration, mut holds: impl FnMut() -> bool) {
    until(what, within, || std::future::ready(holds())).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_the_first_ok_and_fails_with_the_last_err() {
        let n = AtomicU32::new(0);
        let got = eventually("three", Duration::from_secs(1), || async {
            let k = n.fetch_add(1, Ordering::Relaxed);
            if k >= 3 {
                Ok(k)
            } else {
                Err(k)
            }
        })
        .await;
        assert_eq!(got, 3);
        let failed = tokio::spawn(eventually("never", Duration::from_millis(100), || async { Err::<(), _>("nope") }));
        let e = failed.await.unwrap_err().into_panic();
        let message = e.downcast_ref::<String>().unwrap();
        assert!(message.contains("never: not within 100ms; last seen: \"nope\""), "{message}");
    }

    #[tokio::test(start_paused = true)]
    async fn until_waits_for_true() {
        let n = AtomicU32::new(0);
        until("five", Duration::from_secs(1), || async { n.fetch_add(1, Ordering::Relaxed) == 5 }).await;
        assert_eq!(n.load(Ordering::Relaxed), 6);
        let failed = tokio::spawn(until("false", Duration::from_millis(50), || async { false }));
        assert!(failed.await.is_err());
    }
}
