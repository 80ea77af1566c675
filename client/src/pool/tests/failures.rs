//! Leases that fail: a source that recovers within `max_wait` costs callers nothing, one that
//! does not gives `Exhausted` with its last error, a refusal fails callers at once, and a failed
//! prefetch is retried while IDs remain.
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;

#[test]
fn a_failing_source_that_recovers_within_max_wait_costs_callers_no_error() {
    let rt = runtime();
    let fake = Fake::new();
    let pool = IdPool::with_runtime(Source(fake.clone()), quick(), rt.handle().clone()).unwrap();
    let tag = pool.segment("orders").unwrap();
    let mut ids = Vec::new();
    for i in 0..20_000 {
        if i == 5_000 {
            // Six failures in a row: 5+10+20+40+50+50 ms of backoff, far below max_wait.
            fake.fail_next.store(6, Ordering::SeqCst);
        }
        ids.push(tag.next_id().unwrap());
    }
    let stats = tag.stats();
    assert_eq!(stats.leases_failed, 6, "{stats:?}");
    assert_eq!(stats.exhausted, 0);
    check_ids(&fake, ids);
}

/// A prefetch that fails while IDs remain is retried after its backoff, not left until the
/// buffer runs dry (the failure had cleared the wish for a lease, and the passed retry time
/// then woke the refill task at once, again and again).
#[test]
fn a_failed_prefetch_is_retried_while_ids_remain() {
    let rt = runtime();
    let fake = Fake::new();
    let options = PoolOptions { initial_lease: 1_000, min_lease: 1_000, ..quick() };
    let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
    let tag = pool.segment("orders").unwrap();
    let mut ids = vec![tag.next_id().unwrap()];
    let waited = tag.stats().waits; // for the first lease
    fake.fail_next.store(1, Ordering::SeqCst);
    // Past the lease's 10% point: the prefetch is asked for, and fails.
    ids.extend((0..200).map(|_| tag.next_id().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tag.stats().leases_ok < 2 {
        assert!(std::time::Instant::now() < deadline, "the failed prefetch was not retried: {:?}", tag.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = tag.stats();
    assert_eq!(stats.leases_failed, 1, "{stats:?}");
    assert_eq!(stats.waits, waited, "nobody waited: the prefetch came while IDs remained: {stats:?}");
    check_ids(&fake, ids);
}

#[test]
fn a_source_failing_longer_than_max_wait_gives_exhausted_with_the_last_error() {
    let rt = runtime();
    let fake = Fake::new();
    fake.set(Mode::Unavailable);
    let options = PoolOptions { max_wait: Duration::from_millis(200), ..quick() };
    let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
    let tag = pool.segment("orders").unwrap();
    match tag.next_id() {
        Err(PoolError::Exhausted { kind: IdKind::Segment, name, waited, last_error }) => {
            assert_eq!(name, "orders");
            assert!(waited >= Duration::from_millis(200));
            assert_eq!(last_error.as_deref(), Some("injected: unavailable"));
        }
        other => panic!("{other:?}"),
    }
    let err = rt.block_on(tag.next_id_async()).unwrap_err();
    assert!(matches!(err, PoolError::Exhausted { .. }), "{err}");
    assert_eq!(tag.try_next_id(), None);
    let stats = tag.stats();
    assert_eq!((stats.exhausted, stats.ids_served), (2, 0));
    assert!(stats.leases_failed >= 1);
    // Once the source is back, so are the IDs.
    fake.set(Mode::Grant);
    assert!(tag.next_id().is_ok());
}

#[test]
fn a_refused_lease_fails_callers_at_once_until_it_is_granted() {
    let rt = runtime();
    let fake = Fake::new();
    fake.set(Mode::Refuse);
    let options = PoolOptions { max_wait: Duration::from_secs(60), ..quick() };
    let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
    let tag = pool.segment("orders").unwrap();
    // Until the first lease failed, callers wait for it; then they fail at once.
    match tag.next_id() {
        Err(PoolError::Rejected { error, .. }) => assert_eq!(error, "injected: tag_not_found"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(rt.block_on(tag.next_id_async()), Err(PoolError::Rejected { .. })));
    fake.set(Mode::Grant);
    // The refill task keeps retrying (backoff at most 50 ms); calls fail at once until then.
    let mut tries = 0;
    while let Err(e) = tag.next_id() {
        assert!(matches!(e, PoolError::Rejected { .. }), "{e}");
        tries += 1;
        assert!(tries < 1000, "still refused");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(tag.stats().rejected >= 2);
}
