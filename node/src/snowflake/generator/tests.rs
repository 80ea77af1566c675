use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::*;
use crate::clock::ManualClock;

const EPOCH: i64 = 1_288_834_974_657;
const NOW: i64 = 1_700_000_000_000;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

fn generator(random_start: u16) -> (Arc<ManualClock>, Generator) {
    let clock = Arc::new(ManualClock::new(NOW));
    let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), random_start);
    g.start(7, NOW - 1, NOW + 3000, far());
    (clock, g)
}

fn take(g: &Generator, n: u64) -> Result<Vec<i64>, Stall> {
    let mut out = Vec::new();
    let mut left = n;
    while left > 0 {
        left -= g.try_take(left, &mut |first, c| out.extend(first..first + c as i64))?;
    }
    Ok(out)
}

/// Takes IDs until the generator stalls; returns them and the stall.
fn drain(g: &Generator) -> (Vec<i64>, Stall) {
    let mut out = Vec::new();
    loop {
        if let Err(stall) = g.try_take(1000, &mut |first, c| out.extend(first..first + c as i64)) {
            return (out, stall);
        }
    }
}

fn ms(g: &Generator, id: i64) -> i64 {
    g.layout().decode(id).unwrap().timestamp_ms
}

#[test]
fn layout_round_trips_and_matches_leaf() {
    let l = Layout { epoch_ms: EPOCH };
    let id = Layout::compose((NOW - EPOCH) as u64, 1023, 4095);
    assert_eq!(l.decode(id), Some(Parts { timestamp_ms: NOW, worker_id: 1023, sequence: 4095 }));
    // Leaf: ((timestamp - twepoch) << 22) | (workerId << 12) | sequence.
    assert_eq!(Layout::compose(1, 1, 1), (1 << 22) | (1 << 12) | 1);
    assert_eq!(l.decode(-1), None);
    assert_eq!(l.max_ms() - EPOCH, (1 << 41) - 1);
    // The largest timestamp still gives a positive ID.
    assert!(Layout::compose(MAX_TIMESTAMP as u64, 1023, 4095) > 0);
}

#[test]
fn the_state_word_holds_serving_worker_ms_and_sequence_in_64_bits() {
    for s in [
        State { serving: true, worker: MAX_WORKER, position: MAX_POSITION },
        State { serving: false, worker: MAX_WORKER, position: 0 },
        State { serving: true, worker: 0, position: (12345 << SEQUENCE_BITS) | 77 },
    ] {
        assert_eq!(State::unpack(s.pack()), s);
    }
    let s = State::unpack(State { serving: true, worker: 5, position: (9 << SEQUENCE_BITS) | 4095 }.pack());
    assert_eq!((s.worker, s.ms(), s.sequence()), (5, 9, 4095));
    assert_eq!(SERVING.count_ones() + WORKER_BITS + TIMESTAMP_BITS + SEQUENCE_BITS, 64);
}

#[test]
fn ids_increase_and_carry_the_worker() {
    let (clock, g) = generator(100);
    let a = take(&g, 10).unwrap();
    clock.advance(1);
    let b = take(&g, 10).unwrap();
    let all: Vec<i64> = a.iter().chain(&b).copied().collect();
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    let l = g.layout();
    for id in &all {
        assert_eq!(l.decode(*id).unwrap().worker_id, 7);
    }
    assert_eq!(l.decode(a[0]).unwrap().timestamp_ms, NOW);
    assert_eq!(l.decode(b[0]).unwrap().timestamp_ms, NOW + 1);
    assert!(l.decode(a[0]).unwrap().sequence < 100, "the random start is below 100");
}

#[test]
fn a_full_millisecond_moves_on_ahead_of_the_clock_and_the_clock_catches_up() {
    let (clock, g) = generator(0);
    let first = take(&g, 4096).unwrap();
    assert!(first.iter().all(|id| ms(&g, *id) == NOW));
    // The clock still reads NOW: the next ID is in the next (logical) millisecond.
    let next = take(&g, 4097).unwrap();
    assert_eq!(g.layout().decode(next[0]).unwrap(), Parts { timestamp_ms: NOW + 1, worker_id: 7, sequence: 0 });
    assert_eq!(ms(&g, next[4096]), NOW + 2);
    assert!(next[0] > first[4095]);
    // Once the clock passes the last logical millisecond, IDs follow the clock again.
    clock.set(NOW + 5);
    assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 5);
    // The clock has not moved since: the rest of that millisecond is used first.
    let ids = take(&g, 10).unwrap();
    assert!(ids.iter().all(|id| ms(&g, *id) == NOW + 5));
}

#[test]
fn a_floor_ahead_of_the_clock_issues_at_once_strictly_above_it_and_never_above_the_limit() {
    let clock = Arc::new(ManualClock::new(NOW));
    let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 0);
    // A restart: the floor (the old high-water mark) is 2 s ahead of the clock.
    let (floor, limit) = (NOW + 2000, NOW + 2003);
    g.start(3, floor, limit, far());
    let started = Instant::now();
    let (ids, stall) = drain(&g);
    assert!(started.elapsed() < Duration::from_millis(500), "issuing did not wait for the clock");
    assert_eq!(ms(&g, ids[0]), floor + 1, "the first ID is right above the floor");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    assert!(ids.iter().all(|id| (floor + 1..=limit).contains(&ms(&g, *id))));
    assert_eq!(ids.len(), 3 * 4096, "every sequence number of the 3 ms up to the limit");
    // The next millisecond is above the durable mark: a stall, never an ID.
    assert_eq!(stall, Stall::Window { next_ms: limit + 1, ahead_ms: limit + 1 - NOW });
    // The clock moving forward below the floor is not a clock error.
    clock.set(NOW + 1500);
    let stall = Stall::Window { next_ms: limit + 1, ahead_ms: limit + 1 - (NOW + 1500) };
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(stall));
    g.raise_limit(NOW + 2010);
    let more = take(&g, 10).unwrap();
    assert!(more[0] > ids[ids.len() - 1] && ms(&g, more[0]) == limit + 1);
    // The clock passes the last logical millisecond: it converges to the clock.
    clock.set(NOW + 2007);
    let (conv, _) = drain(&g);
    assert!(conv[0] > more[9]);
    assert_eq!(ms(&g, conv[0]), NOW + 2007);
    assert_eq!(ms(&g, *conv.last().unwrap()), NOW + 2010, "ahead of the clock again, up to the limit");
}

#[test]
fn a_restart_continues_above_everything_issued_before_whatever_the_worker() {
    let (clock, g) = generator(0);
    let a = take(&g, 5000).unwrap();
    // Same worker, a floor below what was issued: it continues above, never at or below.
    g.start(7, NOW - 10, NOW + 3000, far());
    let b = take(&g, 1).unwrap()[0];
    assert!(b > a[4999], "{b} <= {}", a[4999]);
    // Another worker with a floor below: its IDs still never go back in time.
    g.start(8, NOW - 10, NOW + 3000, far());
    let c = take(&g, 1).unwrap()[0];
    assert_eq!(g.layout().decode(c).unwrap().worker_id, 8);
    assert!(ms(&g, c) >= ms(&g, b));
    // A higher floor wins.
    g.start(7, NOW + 100, NOW + 3000, far());
    assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 101);
    assert_eq!(g.worker_id(), Some(7));
    clock.set(NOW + 200);
    assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 200);
}

#[test]
fn rollback_of_the_wall_clock_is_reported_not_issued() {
    let (clock, g) = generator(0);
    take(&g, 1).unwrap();
    clock.advance(-3);
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 3 }));
    // Relative to the last wall reading, not to the (logical) last ID: a floor ahead of
    // the clock is no rollback, but the clock going back under it still is.
    g.start(7, NOW + 1000, NOW + 4000, far());
    clock.set(NOW + 10);
    assert!(take(&g, 1).is_ok());
    clock.set(NOW + 4);
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 6 }));
}

#[test]
fn window_lease_and_worker_gate_issuing() {
    let (clock, g) = generator(0);
    clock.set(NOW + 3001);
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Window { next_ms: NOW + 3001, ahead_ms: 0 }));
    g.raise_limit(NOW + 6000);
    g.raise_limit(NOW);
    assert_eq!(g.limit_ms(), NOW + 6000, "limits never go down");
    assert!(take(&g, 1).is_ok());
    g.stop();
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NotServing));
    assert!(!g.serving());
    assert_eq!(g.worker_id(), None);
    // A lease that has run out stops the generator by itself.
    g.start(7, NOW + 3001, NOW + 6000, Instant::now() + Duration::from_millis(30));
    clock.set(NOW + 3002);
    assert!(take(&g, 1).is_ok());
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NotServing));
}

#[test]
fn clock_outside_the_layout_is_refused() {
    let clock = Arc::new(ManualClock::new(EPOCH - 1));
    let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 0);
    g.start(1, i64::MIN, i64::MAX, far());
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
    clock.set(g.layout().max_ms());
    let (ids, stall) = drain(&g);
    assert!(ids[0] > 0 && ids.len() == 4096);
    assert_eq!(stall, Stall::OutOfRange, "no millisecond after the layout's last one");
    clock.set(g.layout().max_ms() + 1);
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
    // Extreme floors and epochs do not overflow.
    let g = Generator::new(Layout { epoch_ms: i64::MAX }, clock.clone(), 0);
    g.start(1, i64::MAX, i64::MAX, far());
    assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
    assert_eq!(Layout { epoch_ms: i64::MAX }.decode(i64::MAX).unwrap().timestamp_ms, i64::MAX);
}

#[test]
fn concurrent_takers_never_share_an_id() {
    let clock: Arc<dyn Clock> = Arc::new(crate::clock::SystemClock::new(0));
    let g = Arc::new(Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 100));
    let now = clock.now_ms();
    g.start(3, now - 1, now + 600_000, far());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                while out.len() < 50_000 {
                    if let Err(e) = g.try_take(7, &mut |f, c| out.extend(f..f + c as i64)) {
                        panic!("{e:?}");
                    }
                }
                out
            })
        })
        .collect();
    let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs");
}

/// Takers race a thread that keeps restarting the generator with other worker IDs and
/// floors. The clock stays below every floor, so each ID's millisecond says which start it
/// came from; its worker ID must be that start's, its millisecond strictly above that
/// start's floor and at most its limit, and no ID may repeat.
#[test]
fn restarts_under_concurrent_takers_keep_each_id_with_the_start_it_came_from() {
    const BASE: i64 = NOW + 1000;
    const REGION: i64 = 10_000;
    const SPAN: i64 = 2_000;
    const STARTS: i64 = 60_000;
    const TAKES_PER_START: i64 = 20;
    const TAKERS: usize = 6;
    let worker_of = |k: i64| (k % 4) as u16;
    let floor_of = |k: i64| BASE + k * REGION;
    let clock = Arc::new(ManualClock::new(NOW));
    let g = Arc::new(Generator::new(Layout { epoch_ms: EPOCH }, clock, 0));
    g.start(worker_of(0), floor_of(0), floor_of(0) + SPAN, far());
    // Takes the takers may still start under the current start (keeps the run short and
    // lets the restarter in while takers are in the middle of theirs).
    let (done, budget) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicI64::new(TAKES_PER_START)));
    let takers: Vec<_> = (0..TAKERS)
        .map(|t| {
            let (g, done, budget) = (g.clone(), done.clone(), budget.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut n = t as u64;
                while !done.load(SeqCst) {
                    if budget.fetch_sub(1, SeqCst) <= 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    n = n % 5 + 1;
                    let _ = g.try_take(n, &mut |f, c| out.extend(f..f + c as i64));
                }
                out
            })
        })
        .collect();
    let restarter = {
        let (g, budget) = (g.clone(), budget.clone());
        std::thread::spawn(move || {
            for k in 1..STARTS {
                let since = Instant::now();
                while budget.load(SeqCst) > 0 && since.elapsed() < Duration::from_millis(50) {
                    std::thread::yield_now();
                }
                g.start(worker_of(k), floor_of(k), floor_of(k) + SPAN, far());
                budget.store(TAKES_PER_START, SeqCst);
            }
        })
    };
    restarter.join().unwrap();
    done.store(true, SeqCst);
    let mut all: Vec<i64> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(all.len() > STARTS as usize, "too few IDs taken ({}) to exercise the race", all.len());
    let (mut mismatched, mut outside) = (Vec::new(), Vec::new());
    for &id in &all {
        let p = g.layout().decode(id).unwrap();
        let k = (p.timestamp_ms - BASE).div_euclid(REGION);
        if !(floor_of(k) + 1..=floor_of(k) + SPAN).contains(&p.timestamp_ms) {
            outside.push(p);
        } else if p.worker_id != worker_of(k) {
            mismatched.push(p);
        }
    }
    assert!(outside.is_empty(), "IDs at or below their start's floor or above its limit: {outside:?}");
    assert!(
        mismatched.is_empty(),
        "{} IDs pair one start's millisecond with another start's worker ID: {:?}",
        mismatched.len(),
        &mismatched[..mismatched.len().min(5)]
    );
    let n = all.len();
    let unique: HashSet<i64> = all.drain(..).collect();
    assert_eq!(unique.len(), n, "duplicate IDs");
}
