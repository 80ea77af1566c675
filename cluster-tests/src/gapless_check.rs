//! The gapless check of `gapless` series (invoice numbers): a client history of issue attempts
//! against the ledger read after the cluster went quiet.
//!
//! A gapless series promises what a unique-ID tag does not: within a (tag, period) the numbers
//! are exactly 1..=N, each issued once, and an idempotency key gets one number forever, however
//! often it is retried. So the check is:
//! - the ledger: per (tag, period) no number skipped ([`Violation::Gap`]) or held twice
//!   ([`Violation::Duplicate`]), none 0 ([`Violation::NumberZero`]); per tag each key at most
//!   once ([`Violation::KeyTwice`]);
//! - the answers: each `Ok` answer is for the attempt's tag and key ([`Violation::WrongAnswer`]),
//!   is in the ledger under that key ([`Violation::AnswerNotInLedger`]), and all answers for a
//!   key agree ([`Violation::KeyAnsweredTwoNumbers`]).
//!
//! - settlements: read after every reservation's deadline has passed, no number is still
//!   reserved ([`Violation::StillReserved`]) and every void has a reason
//!   ([`Violation::VoidWithoutReason`]); an `Ok` answer's state agrees with the ledger's
//!   ([`Violation::StateContradicted`]: a number answered confirmed is confirmed, one answered
//!   voided is voided, one answered issued is issued, one answered reserved was reserved).
//!
//! An attempt that failed (an error or a timeout) may or may not have committed: a key whose
//! attempts all failed may be in the ledger or not, and is counted, not judged
//! ([`Report::unconfirmed_issued`]).
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use leaf_api::gapless::{IssuedNumber, NumberState};

/// Most missing numbers a [`Violation::Gap`] lists (it counts them all).
pub const MAX_LISTED_MISSING: usize = 20;
/// Violations [`Report`]'s `Display` shows.
const MAX_SHOWN: usize = 10;

/// One issue call of a client: the tag and key it asked for, and what it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub tag: String,
    pub key: String,
    pub outcome: Outcome,
}

/// What an issue call got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The number the cluster answered.
    Ok(IssuedNumber),
    /// An error or a timeout: whether the issue committed is unknown.
    Failed(String),
}

/// One number of the final ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub tag: String,
    pub period: u32,
    pub number: u64,
    pub key: String,
    pub state: NumberState,
    /// A void's reason.
    pub reason: Option<String>,
}

impl LedgerRow {
    /// A row of the ledger as the API answers it.
    pub fn of(tag: &str, e: &leaf_api::gapless::LedgerEntry) -> LedgerRow {
        LedgerRow {
            tag: tag.to_string(),
            period: e.period,
            number: e.number,
            key: e.key.clone(),
            state: e.state,
            reason: e.settled.as_ref().and_then(|s| s.reason.clone()),
        }
    }
}

/// A broken promise of a gapless series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Numbers below the period's largest that the ledger lacks: the first
    /// [`MAX_LISTED_MISSING`] in `missing`, all of them in `missing_count`.
    Gap { tag: String, period: u32, missing: Vec<u64>, missing_count: u64 },
    /// A number the ledger holds more than once.
    Duplicate { tag: String, period: u32, number: u64 },
    /// A ledger row numbered 0 (numbers start at 1).
    NumberZero { tag: String, period: u32, key: String },
    /// A key the ledger holds more than once in its tag, with its (period, number)s.
    KeyTwice { tag: String, key: String, numbers: Vec<(u32, u64)> },
    /// An `Ok` answer that the ledger does not hold under its key; `ledger` is where the
    /// ledger has that key (empty if nowhere).
    AnswerNotInLedger { tag: String, key: String, period: u32, number: u64, ledger: Vec<(u32, u64)> },
    /// A key whose `Ok` answers disagree: the distinct (period, number)s answered.
    KeyAnsweredTwoNumbers { tag: String, key: String, numbers: Vec<(u32, u64)> },
    /// An `Ok` answer for another tag or key than the attempt asked for.
    WrongAnswer { tag: String, key: String, answer_tag: String, answer_key: String },
    /// A number still reserved after every deadline passed: neither confirmed nor voided.
    StillReserved { tag: String, period: u32, number: u64, key: String },
    /// A voided number without a reason.
    VoidWithoutReason { tag: String, period: u32, number: u64, key: String },
    /// An `Ok` answer whose state the ledger contradicts.
    StateContradicted { tag: String, key: String, answered: NumberState, ledger: NumberState },
}

/// What [`check`] found, and how much it looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation found, ledger ones first, in tag order.
    pub violations: Vec<Violation>,
    /// Distinct (tag, period)s in the ledger.
    pub series: usize,
    /// Ledger rows.
    pub numbers: usize,
    /// Distinct (tag, key)s the history attempted.
    pub keys: usize,
    /// Attempts answered `Ok`.
    pub ok_answers: usize,
    /// Attempts that failed or timed out.
    pub failed_attempts: usize,
    /// `Ok` answers that were replays (`replayed`).
    pub replays: usize,
    /// Keys never answered `Ok` (all attempts failed) that the ledger holds nonetheless.
    pub unconfirmed_issued: usize,
}

impl Report {
    /// Whether no violation was found.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Report { series, numbers, keys, ok_answers, replays, failed_attempts, unconfirmed_issued, .. } = self;
        write!(f, "{series} series, {numbers} numbers, {keys} keys, {ok_answers} ok answers ({replays} replays), ")?;
        write!(f, "{failed_attempts} failed attempts, {unconfirmed_issued} unconfirmed issued: ")?;
        if self.is_ok() {
            return write!(f, "gapless");
        }
        write!(f, "{} violations", self.violations.len())?;
        for v in self.violations.iter().take(MAX_SHOWN) {
            write!(f, "\n  {v:?}")?;
        }
        if self.violations.len() > MAX_SHOWN {
            write!(f, "\n  … and {} more", self.violations.len() - MAX_SHOWN)?;
        }
        Ok(())
    }
}

/// Checks a client history (attempts in any order, retries sharing a key) against the final
/// ledger (rows in any order), collecting every violation.
pub fn check(attempts: &[Attempt], ledger: &[LedgerRow]) -> Report {
    let mut r = Report { numbers: ledger.len(), ..Report::default() };
    // (tag, period) → number → keys holding it.
    let mut slots: BTreeMap<(&str, u32), BTreeMap<u64, Vec<&str>>> = BTreeMap::new();
    // (tag, key) → where the ledger has it.
    let mut by_key: BTreeMap<(&str, &str), Vec<(u32, u64)>> = BTreeMap::new();
    for row in ledger {
        if row.number == 0 {
            r.violations.push(Violation::NumberZero { tag: row.tag.clone(), period: row.period, key: row.key.clone() });
        }
        let (tag, period, number, key) = (row.tag.clone(), row.period, row.number, row.key.clone());
        match (row.state, row.reason.as_deref()) {
            (NumberState::Reserved, _) => r.violations.push(Violation::StillReserved { tag, period, number, key }),
            (NumberState::Voided, None | Some("")) => {
                r.violations.push(Violation::VoidWithoutReason { tag, period, number, key })
            }
            _ => {}
        }
        slots.entry((&row.tag, row.period)).or_default().entry(row.number).or_default().push(&row.key);
        // Numbers lost with a cluster (voided by a restore) have no key.
        if !row.key.is_empty() {
            by_key.entry((&row.tag, &row.key)).or_default().push((row.period, row.number));
        }
    }
    r.series = slots.len();
    by_key.values_mut().for_each(|v| v.sort_unstable());
    for (&(tag, period), numbers) in &slots {
        let (mut missing, mut missing_count, mut next) = (Vec::new(), 0u64, 1u64);
        // Walking the distinct numbers in order: a gap is any jump past `next`, whatever its size.
        for (&n, keys) in numbers.range(1..) {
            if n > next {
                missing_count += n - next;
                let room = MAX_LISTED_MISSING.saturating_sub(missing.len());
                missing.extend((next..n).take(room));
            }
            next = n.saturating_add(1);
            if keys.len() > 1 {
                r.violations.push(Violation::Duplicate { tag: tag.into(), period, number: n });
            }
        }
        if missing_count > 0 {
            r.violations.push(Violation::Gap { tag: tag.into(), period, missing, missing_count });
        }
    }
    for (&(tag, key), numbers) in &by_key {
        if numbers.len() > 1 {
            r.violations.push(Violation::KeyTwice { tag: tag.into(), key: key.into(), numbers: numbers.clone() });
        }
    }

    // (tag, key) → whether it got a right `Ok` answer; and the (period, number)s answered.
    let mut attempted: BTreeMap<(&str, &str), bool> = BTreeMap::new();
    let mut answered: BTreeMap<(&str, &str), BTreeSet<(u32, u64)>> = BTreeMap::new();
    let state_of: BTreeMap<(&str, &str), NumberState> =
        ledger.iter().map(|row| ((row.tag.as_str(), row.key.as_str()), row.state)).collect();
    for a in attempts {
        let got_ok = attempted.entry((&a.tag, &a.key)).or_insert(false);
        match &a.outcome {
            Outcome::Failed(_) => r.failed_attempts += 1,
            Outcome::Ok(n) => {
                r.ok_answers += 1;
                r.replays += usize::from(n.replayed);
                if n.tag != a.tag || n.key != a.key {
                    let (tag, key, answer_tag, answer_key) =
                        (a.tag.clone(), a.key.clone(), n.tag.clone(), n.key.clone());
                    r.violations.push(Violation::WrongAnswer { tag, key, answer_tag, answer_key });
                    continue;
                }
                *got_ok = true;
                answered.entry((&a.tag, &a.key)).or_default().insert((n.period, n.number));
                if let Some(&ledger) = state_of.get(&(a.tag.as_str(), a.key.as_str())) {
                    let agrees = match n.state {
                        NumberState::Reserved => ledger != NumberState::Issued,
                        answered => answered == ledger,
                    };
                    if !agrees {
                        let (tag, key, answered) = (a.tag.clone(), a.key.clone(), n.state);
                        r.violations.push(Violation::StateContradicted { tag, key, answered, ledger });
                    }
                }
            }
        }
    }
    r.keys = attempted.len();
    for (&(t, k), numbers) in &answered {
        let (tag, key) = (t.to_string(), k.to_string());
        if numbers.len() > 1 {
            let numbers = numbers.iter().copied().collect();
            r.violations.push(Violation::KeyAnsweredTwoNumbers { tag: tag.clone(), key: key.clone(), numbers });
        }
        for &(period, number) in numbers {
            if !slots.get(&(t, period)).and_then(|s| s.get(&number)).is_some_and(|ks| ks.contains(&k)) {
                let (tag, key, ledger) = (tag.clone(), key.clone(), by_key.get(&(t, k)).cloned().unwrap_or_default());
                r.violations.push(Violation::AnswerNotInLedger { tag, key, period, number, ledger });
            }
        }
    }
    r.unconfirmed_issued = attempted.iter().filter(|(k, &got_ok)| !got_ok && by_key.contains_key(k)).count();
    r
}

#[cfg(test)]
mod tests {
    use leaf_api::gapless::NumberState;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn row(tag: &str, period: u32, number: u64, key: &str) -> LedgerRow {
        LedgerRow { tag: tag.into(), period, number, key: key.into(), state: NumberState::Issued, reason: None }
    }

    fn ok(tag: &str, key: &str, period: u32, number: u64, replayed: bool) -> Attempt {
        let n = IssuedNumber {
            tag: tag.into(),
            period,
            number,
            display: None,
            key: key.into(),
            state: NumberState::Issued,
            issued_ms: 1_795_824_000_000,
            deadline_ms: None,
            reason: None,
            replayed,
            secret: None,
        };
        Attempt { tag: tag.into(), key: key.into(), outcome: Outcome::Ok(n) }
    }

    fn failed(tag: &str, key: &str) -> Attempt {
        Attempt { tag: tag.into(), key: key.into(), outcome: Outcome::Failed("timeout".into()) }
    }

    /// Keys k1..kN answered and in the ledger as 1..N of (`inv`, `period`).
    fn series(period: u32, n: u64) -> (Vec<Attempt>, Vec<LedgerRow>) {
        let key = |i: u64| format!("{period}-k{i}");
        (
            (1..=n).map(|i| ok("inv", &key(i), period, i, false)).collect(),
            (1..=n).map(|i| row("inv", period, i, &key(i))).collect(),
        )
    }

    #[test]
    fn a_clean_history_passes() {
        let (mut attempts, ledger) = series(0, 3);
        attempts.push(failed("inv", "0-k2"));
        attempts.push(ok("inv", "0-k2", 0, 2, true));
        let r = check(&attempts, &ledger);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.series, r.numbers, r.keys, r.ok_answers, r.failed_attempts, r.replays), (1, 3, 3, 4, 1, 1));
        assert!(r.to_string().ends_with("gapless"), "{r}");
    }

    #[test]
    fn a_skipped_number_is_a_gap() {
        let ledger = vec![row("inv", 0, 1, "a"), row("inv", 0, 2, "b"), row("inv", 0, 4, "d")];
        let r = check(&[], &ledger);
        let gap = Violation::Gap { tag: "inv".into(), period: 0, missing: vec![3], missing_count: 1 };
        assert_eq!(r.violations, vec![gap]);
        assert!(r.to_string().contains("1 violations"), "{r}");
        // A long gap lists 20 numbers and counts all.
        let r = check(&[], &[row("inv", 0, 1, "a"), row("inv", 0, 100, "b")]);
        let gap = Violation::Gap { tag: "inv".into(), period: 0, missing: (2..22).collect(), missing_count: 98 };
        assert_eq!(r.violations, vec![gap]);
    }

    #[test]
    fn unsettled_and_reasonless_numbers_and_contradicted_answers_are_found() {
        let settled = |state, reason: Option<&str>, n: u64, key: &str| LedgerRow {
            state,
            reason: reason.map(str::to_string),
            ..row("inv", 0, n, key)
        };
        let ledger = [
            settled(NumberState::Confirmed, None, 1, "a"),
            settled(NumberState::Voided, Some("expired"), 2, "b"),
            settled(NumberState::Issued, None, 3, "c"),
        ];
        let mut reserved = ok("inv", "a", 0, 1, false);
        let Outcome::Ok(n) = &mut reserved.outcome else { unreachable!() };
        n.state = NumberState::Reserved;
        let clean = [reserved.clone(), ok("inv", "c", 0, 3, false)];
        assert!(check(&clean, &ledger).is_ok(), "{}", check(&clean, &ledger));
        // A number left reserved, a void without its reason.
        let mut planted = ledger.clone();
        planted[0].state = NumberState::Reserved;
        planted[1].reason = None;
        let r = check(&clean, &planted);
        assert!(
            matches!(
                r.violations[..],
                [Violation::StillReserved { number: 1, .. }, Violation::VoidWithoutReason { number: 2, .. }]
            ),
            "{r}"
        );
        // An answer "confirmed" for a number the ledger has voided; "issued" for a reserved one.
        let mut confirmed = ok("inv", "b", 0, 2, false);
        let Outcome::Ok(n) = &mut confirmed.outcome else { unreachable!() };
        n.state = NumberState::Confirmed;
        let r = check(&[confirmed, ok("inv", "a", 0, 1, true)], &ledger);
        assert_eq!(r.violations.len(), 2, "{r}");
        assert!(r.violations.iter().all(|v| matches!(v, Violation::StateContradicted { .. })), "{r}");
    }

    #[test]
    fn a_key_with_two_numbers_is_key_twice() {
        let ledger = vec![row("inv", 0, 1, "a"), row("inv", 0, 2, "a")];
        let r = check(&[], &ledger);
        let twice = Violation::KeyTwice { tag: "inv".into(), key: "a".into(), numbers: vec![(0, 1), (0, 2)] };
        assert_eq!(r.violations, vec![twice]);
    }

    #[test]
    fn two_answers_for_one_key_are_two_numbers() {
        let (mut attempts, ledger) = series(0, 2);
        attempts.push(ok("inv", "0-k1", 0, 2, true));
        let r = check(&attempts, &ledger);
        let two =
            Violation::KeyAnsweredTwoNumbers { tag: "inv".into(), key: "0-k1".into(), numbers: vec![(0, 1), (0, 2)] };
        assert!(r.violations.contains(&two), "{r}");
    }

    #[test]
    fn a_number_twice_is_a_duplicate() {
        let ledger = vec![row("inv", 0, 1, "a"), row("inv", 0, 2, "b"), row("inv", 0, 2, "c")];
        let r = check(&[], &ledger);
        assert_eq!(r.violations, vec![Violation::Duplicate { tag: "inv".into(), period: 0, number: 2 }]);
    }

    #[test]
    fn an_answer_missing_from_the_ledger_is_reported() {
        let (mut attempts, ledger) = series(0, 2);
        attempts.push(ok("inv", "ghost", 0, 3, false));
        let r = check(&attempts, &ledger);
        let missing = Violation::AnswerNotInLedger {
            tag: "inv".into(),
            key: "ghost".into(),
            period: 0,
            number: 3,
            ledger: vec![],
        };
        assert_eq!(r.violations, vec![missing]);
    }

    #[test]
    fn an_answer_for_another_key_is_wrong() {
        let (mut attempts, ledger) = series(0, 1);
        attempts[0].key = "other".into();
        let r = check(&attempts, &ledger);
        let wrong = Violation::WrongAnswer {
            tag: "inv".into(),
            key: "other".into(),
            answer_tag: "inv".into(),
            answer_key: "0-k1".into(),
        };
        assert_eq!(r.violations, vec![wrong]);
    }

    #[test]
    fn periods_are_independent() {
        let (mut attempts, mut ledger) = series(2026, 3);
        let (a, l) = series(2027, 2);
        attempts.extend(a);
        ledger.extend(l);
        let r = check(&attempts, &ledger);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.series, 2);
        ledger.retain(|l| (l.period, l.number) != (2027, 1));
        attempts.retain(|a| a.key != "2027-k1");
        let r = check(&attempts, &ledger);
        assert_eq!(
            r.violations,
            vec![Violation::Gap { tag: "inv".into(), period: 2027, missing: vec![1], missing_count: 1 }]
        );
    }

    #[test]
    fn a_failed_attempt_in_the_ledger_is_unconfirmed_and_clean() {
        let (mut attempts, ledger) = series(0, 3);
        attempts.retain(|a| a.key != "0-k3");
        attempts.push(failed("inv", "0-k3"));
        attempts.push(failed("inv", "never-committed"));
        let r = check(&attempts, &ledger);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.unconfirmed_issued, r.failed_attempts, r.keys), (1, 2, 4));
    }

    /// A clean history of 1–3 tags, with retries, failed attempts that did and did not commit;
    /// and how many keys were issued without any `Ok` answer.
    fn clean_history(rng: &mut StdRng) -> (Vec<Attempt>, Vec<LedgerRow>, usize) {
        let (mut attempts, mut ledger, mut unconfirmed) = (Vec::new(), Vec::new(), 0);
        for t in 0..rng.gen_range(1..=3) {
            let tag = format!("inv{t}");
            let periods: Vec<u32> =
                if rng.gen_bool(0.5) { vec![0] } else { (2026..2026 + rng.gen_range(1..=3)).collect() };
            for period in periods {
                for number in 1..=rng.gen_range(2..=30u64) {
                    let key = format!("{tag}-{period}-{number}");
                    ledger.push(row(&tag, period, number, &key));
                    let never_answered = rng.gen_bool(0.1);
                    let mut answered = false;
                    for _ in 0..rng.gen_range(1..=4) {
                        if never_answered || rng.gen_bool(0.3) {
                            attempts.push(failed(&tag, &key));
                        } else {
                            attempts.push(ok(&tag, &key, period, number, answered));
                            answered = true;
                        }
                    }
                    unconfirmed += usize::from(!answered);
                }
            }
            for i in 0..rng.gen_range(0..3) {
                attempts.push(failed(&tag, &format!("{tag}-lost-{i}")));
            }
        }
        attempts.shuffle(rng);
        ledger.shuffle(rng);
        (attempts, ledger, unconfirmed)
    }

    /// Plants one violation at random; answers whether a violation is the one planted.
    fn plant(rng: &mut StdRng, attempts: &mut Vec<Attempt>, ledger: &mut Vec<LedgerRow>) -> fn(&Violation) -> bool {
        let i = rng.gen_range(0..ledger.len());
        let r = ledger[i].clone();
        let max = ledger.iter().filter(|l| l.tag == r.tag && l.period == r.period).map(|l| l.number).max().unwrap_or(0);
        match rng.gen_range(0..7) {
            0 => {
                // Every period has at least 2 numbers: drop one below its largest.
                let i = ledger.iter().position(|l| l.tag == r.tag && l.period == r.period && l.number < max).unwrap();
                ledger.remove(i);
                |v| matches!(v, Violation::Gap { missing_count: 1, .. })
            }
            1 => {
                ledger.push(row(&r.tag, r.period, r.number, "intruder"));
                |v| matches!(v, Violation::Duplicate { .. })
            }
            2 => {
                ledger.push(row(&r.tag, r.period, max + 1, &r.key));
                |v| matches!(v, Violation::KeyTwice { .. })
            }
            3 => {
                // The key may have had no `Ok` answer yet: give it the right one too.
                attempts.push(ok(&r.tag, &r.key, r.period, r.number, false));
                attempts.push(ok(&r.tag, &r.key, r.period, r.number + 1, true));
                |v| matches!(v, Violation::KeyAnsweredTwoNumbers { .. })
            }
            4 => {
                attempts.push(ok(&r.tag, "ghost", r.period, r.number, false));
                |v| matches!(v, Violation::AnswerNotInLedger { .. })
            }
            5 => {
                let mut a = ok(&r.tag, &r.key, r.period, r.number, true);
                a.key = "asked-for-another".into();
                attempts.push(a);
                |v| matches!(v, Violation::WrongAnswer { .. })
            }
            _ => {
                ledger.push(row(&r.tag, r.period, 0, "zero"));
                |v| matches!(v, Violation::NumberZero { .. })
            }
        }
    }

    #[test]
    fn random_histories_are_clean_until_a_violation_is_planted() {
        let seed = std::env::var("GAPLESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
        eprintln!("seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..200 {
            let (mut attempts, mut ledger, unconfirmed) = clean_history(&mut rng);
            let r = check(&attempts, &ledger);
            assert!(r.is_ok(), "round {round}: {r}");
            assert_eq!((r.numbers, r.unconfirmed_issued), (ledger.len(), unconfirmed), "round {round}");
            let planted = plant(&mut rng, &mut attempts, &mut ledger);
            let r = check(&attempts, &ledger);
            assert!(r.violations.iter().any(planted), "round {round}: planted violation not reported: {r}");
        }
    }
}
