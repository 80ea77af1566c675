//! Transition tables of [`Phase`]: every event in every phase.
use std::time::{Duration, Instant};

use super::*;

const NOW: i64 = 1_700_000_000_000;
const WINDOW: u64 = 3000;
const TTL: u64 = 10_000;

fn worker(id: u16, confirmed: bool, t0: Instant) -> Worker {
    Worker { worker_id: id, floor_ms: NOW - 10, lease_expires_ms: NOW + 5000, lease_until: t0, confirmed }
}

/// One phase of each kind (and each worker source).
fn phases(t0: Instant) -> Vec<(&'static str, Phase)> {
    vec![
        ("awaiting", Phase::AwaitingMembership),
        ("checking", Phase::CheckingClock),
        ("registering", Phase::Registering { holdup: None }),
        ("registering-exhausted", Phase::Registering { holdup: Some(Holdup::Exhausted("all taken".into())) }),
        ("starting-file", Phase::Starting { worker: worker(7, false, t0), holdup: None }),
        ("starting-raft", Phase::Starting { worker: worker(7, true, t0), holdup: None }),
        ("serving-file", Phase::Serving { worker: worker(7, false, t0) }),
        ("serving-raft", Phase::Serving { worker: worker(7, true, t0) }),
        ("off", Phase::Off { reason: "clock".into() }),
    ]
}

fn facts(has_membership: bool, register_due: bool, limit_ms: i64, lease_remaining_ms: Option<u64>) -> TickFacts {
    TickFacts {
        has_membership,
        register_due,
        now_ms: NOW,
        limit_ms,
        lease_remaining_ms,
        window_ms: WINDOW,
        lease_ttl_ms: TTL,
    }
}

fn grant(id: u16, not_before_ms: i64) -> WorkerGrant {
    WorkerGrant { worker_id: id, not_before_ms, lease_expires_ms: NOW + 20_000 }
}

#[test]
fn reports_follow_the_phase() {
    let t0 = Instant::now();
    let want = [
        ("awaiting", Report::Starting(Some("waiting for the cluster membership (clock check)".into()))),
        ("checking", Report::Starting(None)),
        ("registering", Report::Starting(None)),
        ("registering-exhausted", Report::Exhausted("all taken".into())),
        ("starting-file", Report::Starting(None)),
        ("starting-raft", Report::Starting(None)),
        ("serving-file", Report::Serving),
        ("serving-raft", Report::Serving),
        ("off", Report::Off("clock".into())),
    ];
    for ((name, p), (wname, report)) in phases(t0).into_iter().zip(want) {
        assert_eq!(name, wname);
        assert_eq!(p.report(), report, "{name}");
    }
    let p = Phase::Starting { worker: worker(1, false, t0), holdup: Some(Holdup::Retrying("no leader".into())) };
    assert_eq!(p.report(), Report::Starting(Some("no leader".into())));
}

#[test]
fn a_tick_in_every_phase() {
    let t0 = Instant::now();
    let plenty = NOW + WINDOW as i64; // the whole window ahead
    let low = NOW + WINDOW as i64 / 2 - 1; // less than half left
                                           // (phase, facts) -> (register, step, phase name after)
    for (name, p) in phases(t0) {
        let idle = facts(true, true, plenty, Some(TTL));
        let mut q = p.clone();
        let (register, step) = q.on_tick(&idle);
        let (want_register, want_step) = match name {
            "awaiting" => (false, TickStep::CheckClock),
            "checking" | "off" => (false, TickStep::Nothing),
            "registering" | "registering-exhausted" => (true, TickStep::Nothing),
            "starting-file" => (true, TickStep::TryStart),
            "starting-raft" => (false, TickStep::TryStart),
            "serving-file" => (true, TickStep::Nothing),
            "serving-raft" => (false, TickStep::Nothing),
            other => unreachable!("{other}"),
        };
        assert_eq!((register, step), (want_register, want_step), "{name}");
        if name == "awaiting" {
            assert_eq!(q, Phase::CheckingClock);
        } else {
            assert_eq!(q, p, "{name}: a tick changes no other phase");
        }
        // Registration not due: never registers.
        let mut q = p.clone();
        assert!(!q.on_tick(&facts(true, false, plenty, Some(TTL))).0, "{name}");
        // Without the membership, the clock check waits.
        let mut q = p.clone();
        let step = q.on_tick(&facts(false, false, plenty, Some(TTL))).1;
        if name == "awaiting" {
            assert_eq!((step, q), (TickStep::Nothing, Phase::AwaitingMembership));
        }
        // Less than half the window left: only a serving worker raises the mark.
        let mut q = p.clone();
        let step = q.on_tick(&facts(true, false, low, Some(TTL))).1;
        if name.starts_with("serving") {
            assert_eq!(step, TickStep::RaiseMark, "{name}");
        }
        // Less than half the lease left: only a serving worker confirmed through Raft renews.
        let mut q = p.clone();
        let step = q.on_tick(&facts(true, false, plenty, Some(TTL / 2 - 1))).1;
        match name {
            "serving-raft" => assert_eq!(step, TickStep::Renew),
            "serving-file" => assert_eq!(step, TickStep::Nothing, "no renewal before registration"),
            _ => {}
        }
        // A lease that ran out (nothing remaining) renews too, once confirmed.
        let mut q = p.clone();
        let step = q.on_tick(&facts(true, false, plenty, None)).1;
        match name {
            "serving-raft" => assert_eq!(step, TickStep::Renew),
            "serving-file" => assert_eq!(step, TickStep::Nothing),
            _ => {}
        }
    }
}

#[test]
fn the_clock_check_in_every_phase() {
    let t0 = Instant::now();
    let file = StateFile { node_id: 1, worker_id: 9, high_water_ms: NOW + 100, lease_expires_ms: NOW + 4000 };
    let expired = StateFile { lease_expires_ms: NOW, ..file };
    for (name, p) in phases(t0) {
        for f in [None, Some(expired), Some(file)] {
            let mut q = p.clone();
            q.on_clock_checked(f, NOW, t0);
            if name != "checking" {
                assert_eq!(q, p, "{name}: only CheckingClock takes the verdict");
                continue;
            }
            match f {
                Some(f) if f.lease_expires_ms > NOW => {
                    let w = Worker {
                        worker_id: 9,
                        floor_ms: NOW + 100,
                        lease_expires_ms: NOW + 4000,
                        lease_until: t0 + Duration::from_millis(4000),
                        confirmed: false,
                    };
                    assert_eq!(q, Phase::Starting { worker: w, holdup: None });
                    assert!(q.needs_registration(), "registration runs alongside");
                }
                _ => assert_eq!(q, Phase::Registering { holdup: None }),
            }
        }
    }
}

#[test]
fn turning_off_from_every_phase() {
    for (name, mut p) in phases(Instant::now()) {
        let was_off = name == "off";
        assert_eq!(p.turn_off("why".into()), !was_off, "{name}");
        let reason = if was_off { "clock" } else { "why" };
        assert_eq!(p, Phase::Off { reason: reason.into() }, "{name}: the first reason stays");
        assert!(!p.needs_registration());
        assert_eq!(p.worker(), None);
    }
}

#[test]
fn a_grant_in_every_phase() {
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(5);
    for (name, p) in phases(t0) {
        // The worker ID held (7), at or below its floor.
        let mut q = p.clone();
        let g = q.on_granted(grant(7, NOW - 20), later, None);
        match name {
            "awaiting" | "checking" | "off" => {
                assert_eq!((g, &q), (Granted::Ignored, &p), "{name}");
                continue;
            }
            "registering" | "registering-exhausted" => {
                assert_eq!(g, Granted::New { worker_id: 7, replaced: None }, "{name}");
                let Phase::Starting { worker, holdup } = &q else { panic!("{name}: {q:?}") };
                assert_eq!((worker.floor_ms, worker.confirmed, worker.lease_until), (NOW - 20, true, later));
                assert_eq!(
                    holdup,
                    match &p {
                        Phase::Registering { holdup } => holdup,
                        _ => unreachable!(),
                    }
                );
            }
            _ => {
                assert_eq!(g, Granted::Extended { lease_until: later }, "{name}");
                let w = q.worker().unwrap();
                assert_eq!((w.worker_id, w.floor_ms, w.confirmed, w.lease_until), (7, NOW - 10, true, later));
                assert_eq!(w.lease_expires_ms, NOW + 20_000);
                assert_eq!(std::mem::discriminant(&q), std::mem::discriminant(&p), "{name}: same phase");
            }
        }
        // The worker ID held, with a higher mark in the log than the state file's.
        let mut q = p.clone();
        let g = q.on_granted(grant(7, NOW + 500), later, None);
        match name {
            "serving-file" | "serving-raft" => {
                assert_eq!(g, Granted::Raised { lease_until: later, floor_ms: NOW + 500 });
                let Phase::Starting { worker, holdup: None } = q else { panic!("{name}: {q:?}") };
                assert_eq!((worker.floor_ms, worker.confirmed), (NOW + 500, true));
            }
            "starting-file" | "starting-raft" => {
                // Not issuing yet: the new floor goes through the start check before serving.
                assert_eq!(g, Granted::Extended { lease_until: later });
                assert_eq!(q.worker().unwrap().floor_ms, NOW + 500);
                assert!(matches!(q, Phase::Starting { .. }));
            }
            _ => assert!(matches!(g, Granted::New { worker_id: 7, .. })),
        }
        // Another worker ID: the state file's mark does not cover it.
        let mut q = p.clone();
        let file = StateFile { node_id: 1, worker_id: 7, high_water_ms: NOW + 900, lease_expires_ms: 0 };
        let g = q.on_granted(grant(8, NOW - 20), later, Some(file));
        let replaced = p.worker().map(|w| w.worker_id);
        assert_eq!(g, Granted::New { worker_id: 8, replaced }, "{name}");
        let w = q.worker().unwrap();
        assert_eq!((w.worker_id, w.floor_ms, w.confirmed), (8, NOW - 20, true), "{name}");
        assert!(matches!(q, Phase::Starting { .. }), "{name}");
    }
}

#[test]
fn a_grant_starts_above_the_state_files_mark_of_that_worker_id() {
    let t0 = Instant::now();
    let file = StateFile { node_id: 1, worker_id: 8, high_water_ms: NOW + 900, lease_expires_ms: 0 };
    let mut p = Phase::Registering { holdup: None };
    p.on_granted(grant(8, NOW - 20), t0, Some(file));
    assert_eq!(p.worker().unwrap().floor_ms, NOW + 900);
    // A first grant ever has no floor.
    let mut p = Phase::Registering { holdup: None };
    p.on_granted(grant(0, i64::MIN), t0, None);
    assert_eq!(p.worker().unwrap().floor_ms, i64::MIN);
}

#[test]
fn a_failed_registration_in_every_phase() {
    for (name, p) in phases(Instant::now()) {
        for why in [Holdup::Exhausted("all taken".into()), Holdup::Retrying("no leader".into())] {
            let mut q = p.clone();
            q.on_register_failed(why.clone());
            match &q {
                Phase::Registering { holdup } | Phase::Starting { holdup, .. } => {
                    assert_eq!(holdup.as_ref(), Some(&why), "{name}")
                }
                // Serving and off keep what they report; the others do not register.
                _ => assert_eq!(q, p, "{name}"),
            }
        }
    }
}

#[test]
fn the_start_check_refuses_a_floor_too_far_ahead() {
    let w = |floor_ms| Worker { floor_ms, ..worker(3, true, Instant::now()) };
    assert_eq!(Phase::start_check(&w(i64::MIN), NOW, 5000), Ok(i64::MIN.saturating_sub(NOW)));
    assert_eq!(Phase::start_check(&w(NOW - 5), NOW, 5000), Ok(-5));
    assert_eq!(Phase::start_check(&w(NOW + 5000), NOW, 5000), Ok(5000));
    let e = Phase::start_check(&w(NOW + 5001), NOW, 5000).unwrap_err();
    assert!(e.contains("5001 ms behind the time high-water mark of worker ID 3"), "{e}");
    assert!(Phase::start_check(&w(i64::MAX), i64::MIN, u64::MAX).is_ok(), "saturates, never overflows");
}

#[test]
fn the_next_mark_in_every_phase() {
    let t0 = Instant::now();
    for (name, p) in phases(t0) {
        let mark = p.next_mark(NOW, WINDOW, NOW + 100);
        match name {
            // A start's first mark: at least the margin above the floor (here the window wins).
            "starting-file" | "starting-raft" | "serving-file" | "serving-raft" => {
                assert_eq!(mark, Some((worker(7, name.ends_with("raft"), t0), NOW + WINDOW as i64)), "{name}")
            }
            _ => assert_eq!(mark, None, "{name}"),
        }
    }
    // Never below the limit.
    let serving = Phase::Serving { worker: worker(7, true, t0) };
    assert_eq!(serving.next_mark(NOW, WINDOW, NOW + 9000).unwrap().1, NOW + 9000);
    // A floor ahead of the clock: a start's first mark is the margin above it, a raise's is not.
    let far = Worker { floor_ms: NOW + 8000, ..worker(7, true, t0) };
    let starting = Phase::Starting { worker: far, holdup: None };
    assert_eq!(starting.next_mark(NOW, WINDOW, 0).unwrap().1, NOW + 8000 + START_MARGIN_MS);
    let serving = Phase::Serving { worker: far };
    assert_eq!(serving.next_mark(NOW, WINDOW, 0).unwrap().1, NOW + WINDOW as i64);
    // Saturates at the end of time.
    assert_eq!(serving.next_mark(i64::MAX, WINDOW, 0).unwrap().1, i64::MAX);
}

#[test]
fn a_durable_mark_in_every_phase() {
    let t0 = Instant::now();
    for (name, p) in phases(t0) {
        let held = p.worker().copied().unwrap_or(worker(7, true, t0));
        // Written for the worker held, same floor.
        let mut q = p.clone();
        let r = q.on_persisted(&held);
        match name {
            "starting-file" | "starting-raft" => {
                assert_eq!(r, Persisted::Start(held), "{name}");
                assert_eq!(q, Phase::Serving { worker: held });
            }
            "serving-file" | "serving-raft" => assert_eq!((r, &q), (Persisted::Raise, &p), "{name}"),
            _ => assert_eq!((r, &q), (Persisted::Stale, &p), "{name}"),
        }
        // Written for the worker held, but its floor rose meanwhile.
        let mut q = p.clone();
        let r = q.on_persisted(&Worker { floor_ms: held.floor_ms - 1, ..held });
        match name {
            "starting-file" | "starting-raft" => assert_eq!((r, &q), (Persisted::Recheck, &p), "{name}"),
            "serving-file" | "serving-raft" => assert_eq!(r, Persisted::Raise, "{name}"),
            _ => assert_eq!(r, Persisted::Stale, "{name}"),
        }
        // Written for a worker ID no longer held.
        let mut q = p.clone();
        assert_eq!(q.on_persisted(&Worker { worker_id: 8, ..held }), Persisted::Stale, "{name}");
        assert_eq!(q, p, "{name}");
    }
}

#[test]
fn a_renewal_in_every_phase() {
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(5);
    for (name, p) in phases(t0) {
        let holds = p.worker().is_some();
        // A grant for the worker ID held extends its lease.
        let mut q = p.clone();
        let r = q.on_renewed(Ok(grant(7, 0)), later);
        if holds {
            assert_eq!(r, Renewed::Extended { lease_until: later }, "{name}");
            let w = q.worker().unwrap();
            assert_eq!((w.lease_until, w.lease_expires_ms, w.floor_ms), (later, NOW + 20_000, NOW - 10));
        } else {
            assert_eq!((r, &q), (Renewed::Ignored, &p), "{name}");
        }
        // An earlier lease end never shortens it.
        let mut q = p.clone();
        q.on_renewed(Ok(grant(7, 0)), t0 - Duration::from_secs(1));
        if holds {
            assert_eq!(q.worker().unwrap().lease_until, t0, "{name}");
        }
        // A grant for another worker ID changes nothing.
        let mut q = p.clone();
        assert_eq!((q.on_renewed(Ok(grant(8, 0)), later), &q), (Renewed::Ignored, &p), "{name}");
        // The worker ID lost: register again.
        let mut q = p.clone();
        let r = q.on_renewed(Err("worker ID 7 is not held".into()), later);
        if holds {
            assert_eq!(r, Renewed::Lost, "{name}");
            let want = Holdup::Retrying("worker ID 7 is not held (removed from the cluster?)".into());
            assert_eq!(q, Phase::Registering { holdup: Some(want) });
            assert!(q.needs_registration());
        } else {
            assert_eq!((r, &q), (Renewed::Ignored, &p), "{name}: off stays off");
        }
    }
}

#[test]
fn a_request_at_the_windows_edge_in_every_phase() {
    for (name, p) in phases(Instant::now()) {
        let ready = p.on_raise(NOW + 10, NOW + 10);
        let wait = p.on_raise(NOW + 10, NOW + 11);
        match name {
            "serving-file" | "serving-raft" => {
                assert_eq!((ready, wait), (RaiseAnswer::Ready, RaiseAnswer::Wait), "{name}")
            }
            "off" => {
                assert_eq!(ready, RaiseAnswer::Refuse("clock".into()));
                assert_eq!(wait, RaiseAnswer::Refuse("clock".into()));
            }
            _ => {
                let no = RaiseAnswer::Refuse("snowflake service is not started".into());
                assert_eq!((ready, wait), (no.clone(), no), "{name}");
            }
        }
    }
}
