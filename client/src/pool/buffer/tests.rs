//! The buffer on one thread, step by step: order, prefetch points, switches, ranges waiting
//! for a slot, retirement, a reader paused across a slot's reuse, the generation wrapping.
use std::sync::atomic::Ordering;

use leaf_api::ranges::IdRange;
use tokio::time::Instant;

use super::slot::{split, END, RING};
use super::*;

fn r(start: i64, end: i64) -> IdRange {
    IdRange { start, end }
}

/// Takes until nothing is left, installing waiting ranges as the refill task would.
fn drain(b: &Buffer) -> Vec<(i64, bool)> {
    let mut out = Vec::new();
    loop {
        match b.take() {
            Taken::Id { id, prefetch } => out.push((id, prefetch)),
            Taken::Empty if b.top_up() => {}
            Taken::Empty => return out,
        }
    }
}

#[test]
fn takes_every_id_of_every_range_once_in_order_and_asks_at_ten_percent() {
    let now = Instant::now();
    let b = Buffer::new(now);
    assert_eq!(b.take(), Taken::Empty);
    assert!(b.is_dry());
    b.append(&[r(10, 13), r(20, 27)], 1, now);
    b.append(&[r(100, 120)], 2, now);
    assert_eq!(b.tail_lease(), 2);
    assert_eq!(b.left(), 30);
    let got = drain(&b);
    let ids: Vec<i64> = got.iter().map(|g| g.0).collect();
    let want: Vec<i64> = (10..13).chain(20..27).chain(100..120).collect();
    assert_eq!(ids, want);
    // Lease 1 holds 10 IDs: the 2nd (offset 1) asks; lease 2 holds 20: offset 2.
    let asks: Vec<i64> = got.iter().filter(|g| g.1).map(|g| g.0).collect();
    assert_eq!(asks, vec![11, 102]);
    assert_eq!(b.take(), Taken::Empty);
    assert!(b.is_dry());
    assert_eq!(b.left(), 0);
    assert_eq!(b.head_lease(), 2);
}

#[test]
fn runs_stop_at_a_range_end_and_carry_the_prefetch_point() {
    let now = Instant::now();
    let b = Buffer::new(now);
    b.append(&[r(0, 100)], 1, now);
    let a = b.take_run(8).map(|c| (c.first, c.count, c.prefetch));
    let c = b.take_run(8).map(|c| (c.first, c.count, c.prefetch));
    assert_eq!((a, c), (Some((0, 8, false)), Some((8, 8, true))));
    let rest: u64 = std::iter::from_fn(|| b.take_run(64)).map(|c| c.count).sum();
    assert_eq!(rest, 84);
    assert!(b.take_run(1).is_none());
}

#[test]
fn a_range_ending_at_the_largest_id_never_wraps() {
    let now = Instant::now();
    let b = Buffer::new(now);
    b.append(&[r(i64::MAX - 2, i64::MAX)], 1, now);
    assert_eq!(drain(&b), vec![(i64::MAX - 2, true), (i64::MAX - 1, false)]);
    for _ in 0..1000 {
        assert_eq!(b.take(), Taken::Empty);
    }
}

#[test]
fn a_lease_of_more_ranges_than_slots_waits_for_slots_and_keeps_its_order() {
    let now = Instant::now();
    let b = Buffer::new(now);
    let ranges: Vec<IdRange> = (0..(3 * RING as i64)).map(|i| r(i * 10, i * 10 + 3)).collect();
    b.append(&ranges, 1, now);
    assert_eq!(b.left(), 3 * 3 * RING as u64);
    assert_eq!(b.hints.pending.load(Ordering::Relaxed), 2 * RING as u64 + 1);
    let ids: Vec<i64> = drain(&b).iter().map(|g| g.0).collect();
    let want: Vec<i64> = ranges.iter().flat_map(|r| r.start..r.end).collect();
    assert_eq!(ids, want);
    assert!(b.is_dry());
}

#[test]
fn retiring_stops_at_the_first_fresh_range_and_counts_what_was_left() {
    let t0 = Instant::now();
    let t1 = t0 + std::time::Duration::from_secs(1);
    let b = Buffer::new(t0);
    b.append(&[r(0, 10)], 1, t0);
    b.append(&[r(50, 60)], 2, t1);
    let run = b.take_run(2);
    for _ in 0..2 {
        b.take();
    }
    assert!(run.is_some_and(|run| !b.is_retired(&run)));
    assert_eq!(b.retire_leased_until(t0), 6);
    assert!(run.is_some_and(|run| b.is_retired(&run)));
    assert_eq!(b.left(), 10);
    assert!(!b.is_dry());
    assert_eq!(drain(&b).first().map(|g| g.0), Some(50));
    assert_eq!(b.retire_leased_until(t1), 0);
}

#[test]
fn retiring_every_range_drops_those_waiting_for_a_slot_too() {
    let t0 = Instant::now();
    let t1 = t0 + std::time::Duration::from_secs(1);
    let b = Buffer::new(t0);
    let old: Vec<IdRange> = (0..(2 * RING as i64)).map(|i| r(i * 10, i * 10 + 2)).collect();
    b.append(&old, 1, t0);
    b.append(&[r(5000, 5003)], 2, t1);
    b.take();
    assert_eq!(b.retire_leased_until(t0), 4 * RING as u64 - 1);
    assert_eq!(b.left(), 3);
    assert_eq!(drain(&b), vec![(5000, true), (5001, false), (5002, false)]);
}

/// A taker paused between its `fetch_add` and its read of the slot, while the slot is reused:
/// it still gets the ID it claimed, from the log.
#[test]
fn a_reader_paused_across_its_slots_reuse_gets_the_id_it_claimed() {
    let now = Instant::now();
    let b = Buffer::new(now);
    b.append(&[r(1000, 1003)], 1, now);
    assert_eq!(b.take(), Taken::Id { id: 1000, prefetch: true });
    // Paused here: the claim of 1001 is made, its slot not read yet.
    let word = b.cursor.0.fetch_add(1, Ordering::Acquire);
    let (gen, _) = split(word);
    for lease in 2..(2 + 2 * RING as u64) {
        let start = lease as i64 * 1000;
        b.append(&[r(start, start + 1)], lease, now);
    }
    let others = drain(&b);
    assert_eq!(others.first(), Some(&(1002, false)));
    assert!(b.slot(gen).read(gen).is_none(), "the slot holds a later range now");
    match b.resolve(word, 1) {
        Step::Hit(claim) => assert_eq!((claim.first, claim.count, claim.prefetch), (1001, 1, false)),
        _ => panic!("the claim was not recovered"),
    }
    assert_eq!(b.lost(), 0);
}

/// Past the log's reach a paused taker's claim is lost: counted, never handed out twice.
#[test]
fn a_claim_older_than_the_log_is_counted_lost_not_reissued() {
    let now = Instant::now();
    let b = Buffer::new(now);
    b.append(&[r(0, 4)], 1, now);
    assert_eq!(b.take(), Taken::Id { id: 0, prefetch: true });
    let word = b.cursor.0.fetch_add(1, Ordering::Acquire);
    let ids: Vec<i64> = drain(&b).iter().map(|g| g.0).collect();
    assert_eq!(ids, vec![2, 3]);
    // Reuse the slot, and drop the range from the log.
    for lease in 2..(2 + RING as u64) {
        b.append(&[r(lease as i64 * 10, lease as i64 * 10 + 1)], lease, now);
    }
    drain(&b);
    b.queue().forget_passed();
    assert!(matches!(b.resolve(word, 1), Step::Retry));
    assert_eq!(b.lost(), 1);
}

#[test]
fn the_generation_wraps_without_a_duplicate() {
    let now = Instant::now();
    let b = Buffer::starting_at(now, u32::MAX - 100);
    let mut want = Vec::new();
    for lease in 1..=300u64 {
        let start = lease as i64 * 100;
        b.append(&[r(start, start + 3)], lease, now);
        want.extend(start..start + 3);
        if lease % 20 == 0 {
            let ids: Vec<i64> = drain(&b).iter().map(|g| g.0).collect();
            assert_eq!(ids, want, "up to lease {lease}");
            want.clear();
        }
    }
    let (gen, _) = split(b.cursor.0.load(Ordering::Relaxed));
    assert!(gen < 1000, "wrapped to {gen}");
}

#[test]
fn misses_on_an_empty_buffer_never_carry_into_the_generation() {
    let now = Instant::now();
    let b = Buffer::new(now);
    // 100,000 misses of 65,536 tickets: far past 2^32 without the clamp.
    for _ in 0..100_000 {
        assert!(b.take_run(65_536).is_none());
    }
    let (gen, ticket) = split(b.cursor.0.load(Ordering::Relaxed));
    assert_eq!(gen, 0);
    assert!(ticket >= END);
    b.append(&[r(7, 9)], 1, now);
    assert_eq!(drain(&b), vec![(7, true), (8, false)]);
}

#[test]
fn concurrent_takers_get_each_id_exactly_once() {
    let now = Instant::now();
    let b = Buffer::new(now);
    let mut want = 0u64;
    for lease in 1..=200u64 {
        let start = lease as i64 * 1000;
        b.append(&[r(start, start + 7), r(start + 500, start + 500 + lease as i64)], lease, now);
        want += 7 + lease;
    }
    let b = Arc::new(b);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || drain(&b).into_iter().map(|g| g.0).collect::<Vec<_>>())
        })
        .collect();
    let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.extend(drain(&b).into_iter().map(|g| g.0));
    assert_eq!(all.len() as u64 + b.lost(), want);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len() as u64 + b.lost(), want);
}
