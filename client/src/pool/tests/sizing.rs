//! The lease size under load the source cannot keep up with.
use super::*;

/// A source slower than `lease_period`: a lease then "lasts" as long as the next one takes to
/// come, callers wait for it, and the size must grow. Halving it, as a lease that lasted over
/// `2 × period` otherwise is, starved the callers down to leases of one ID (a test of 100,000
/// IDs took minutes).
#[test]
fn leases_grow_while_callers_wait_on_a_slow_source() {
    let rt = runtime();
    let fake = Fake::build(Some(StdRng::seed_from_u64(7)), 3_000);
    let options = PoolOptions {
        lease_period: Duration::from_millis(1),
        min_lease: 1,
        initial_lease: 16,
        max_lease: 4_096,
        ..quick()
    };
    let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
    let tag = pool.segment("orders").unwrap();
    let ids: Vec<i64> = (0..3_000).map(|_| tag.next_id().unwrap()).collect();
    check_ids(&fake, ids);
    let stats = tag.stats();
    assert!(stats.waits > 0, "the callers never waited: {stats:?}");
    assert!(stats.lease_target > 16, "the lease shrank while callers waited for it: {stats:?}");
}
