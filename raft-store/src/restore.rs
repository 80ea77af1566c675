//! Restoring a backed-up state so that it cannot hand out an ID twice: the plan of how far each
//! tag's counter jumps ([`plan`]), applying it ([`apply_plan`]), and the lineage of restores a
//! state remembers ([`Lineage`]). Pure: the caller passes the time.
//!
//! A backup is a state as of one committed point. The lost cluster went on allocating after it:
//! a tag's counter must move past anything it can have reached, which the backup cannot know.
//! The margin is an estimate from what it does know ([`auto_margin`]): the tag's consumption
//! rate when the backup was taken, doubled, over the time since, plus what the nodes can have
//! taken without handing it out: two segments per node (a current and a next one), each as
//! large as a segment can grow (`max_step`, or the tag's stored step when larger; the dynamic
//! step doubles under load whatever the rate looked like at the backup). An operator who knows
//! better says so per tag (a margin, or a floor such as a table's `MAX(id) + 1`), and the plan
//! shows every jump before anything is written.
//!
//! A gapless series cannot jump silently: a skipped number is a gap. Its margin is voided
//! instead, number by number, as lost with the cluster ([`crate::gapless::lost`]): the numbers
//! after the backup's counter, and when the restore runs in a later period, the first ones of
//! that period too. Its automatic margin is twice the rate over the time since the backup, and
//! at least [`GAPLESS_MIN_MARGIN`] (no node buffers numbers); at most [`GAPLESS_MAX_MARGIN`]
//! numbers are voided, past which the plan says `exhausted` and the restore refuses it.
//!
//! Snowflake IDs need no margin, only time: every worker ID gets a released record whose
//! high-water mark is the floor (the later of the restore's clock and the backup's marks), so
//! whichever node takes it starts above anything the lost cluster issued (see
//! [`crate::workers::register`]).
use std::collections::{BTreeMap, HashMap};

use leaf_api::audit::{Actor, AuditAction};
use leaf_api::profile::{Profile, DAILY_FIRST};
use serde::{Deserialize, Serialize};

use crate::apply::Changes;
use crate::audit::Trim;
use crate::profile::StoredProfile;
use crate::state::State;
use crate::workers::{WorkerRecord, RELEASED, WORKER_IDS};

/// How many past restores a state keeps in its [`Lineage`].
pub const MAX_LINEAGE: usize = 32;

/// The rate's safety factor in the automatic margin: traffic may grow after the backup.
pub const RATE_FACTOR: f64 = 2.0;

/// The least automatic margin of a gapless series: numbers voided as lost even when the rate
/// at the backup was nil (an idle series may have issued a few since).
pub const GAPLESS_MIN_MARGIN: i64 = 100;
/// The most numbers a restore voids in one period of a gapless series.
pub const GAPLESS_MAX_MARGIN: i64 = 100_000;

/// One restore, as the restored state remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRecord {
    /// The backup's ID.
    pub backup_id: u128,
    /// The generation the restore gave the state (the backup's plus one).
    pub generation: u32,
    /// When the backup was taken (Unix ms).
    pub backup_taken_ms: i64,
    /// When it was restored (Unix ms, the restoring tool's clock).
    pub restored_ms: i64,
}

/// The restores a state descends from: none for a cluster never restored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// 0 for a cluster never restored, then one more per restore.
    pub generation: u32,
    /// The latest restores, oldest first (at most [`MAX_LINEAGE`]).
    pub restores: Vec<RestoreRecord>,
}

impl Lineage {
    /// Whether the state came from the backup `backup_id` (in this generation or an earlier).
    pub fn restored_from(&self, backup_id: u128) -> Option<&RestoreRecord> {
        self.restores.iter().find(|r| r.backup_id == backup_id)
    }
}

/// What the restore knows of the backup and of the operator's wishes.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// The restoring tool's clock (Unix ms).
    pub now_ms: i64,
    /// When the backup was taken (Unix ms).
    pub backup_taken_ms: i64,
    /// Nodes in the backed-up membership (each may hold two segments of a tag).
    pub nodes: u64,
    /// `segment.max_step` of the node that took the backup.
    pub max_step: i64,
    /// Each tag's consumption rate when the backup was taken (IDs per second).
    pub rates: HashMap<String, f64>,
    /// The operator's settings, by tag; `"*"` applies to every tag without its own.
    pub overrides: BTreeMap<String, Override>,
}

/// What the operator said of a tag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Override {
    /// Use this margin instead of the automatic one.
    pub margin: Option<i64>,
    /// The tag's next counter value is at least this.
    pub at_least: Option<i64>,
}

/// Why a tag's counter jumps as far as it does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarginSource {
    /// [`auto_margin`] from the recorded rate (0 when none was recorded).
    Auto { rate_per_sec: f64 },
    /// The operator's margin.
    Given,
}

/// What happens to a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The counter moved and IDs remain.
    Moved,
    /// The counter cannot move past its margin within the tag's bound (or its day's counter
    /// space): the tag hands out nothing more (for a daily tag, until its next day).
    Exhausted,
    /// A gapless series: the numbers of the margin are voided as lost with the cluster (in
    /// the backup's period from `from`, and in the restore's period from 1 when `days` says
    /// it is later), and the series goes on at `to`.
    Gapless,
}

/// One tag's line of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TagJump {
    pub tag: String,
    pub profile: Profile,
    /// The counter in the backup (for a daily tag, within `day_from`).
    pub from: i64,
    /// The counter after the restore.
    pub to: i64,
    /// The margin applied (before a floor raised it further).
    pub margin: i64,
    pub source: MarginSource,
    /// The operator's floor, when it decided `to`.
    pub at_least: Option<i64>,
    /// A daily tag's day in the backup and after the restore (`yyyyMMdd`); a gapless
    /// series' period.
    pub days: Option<(u32, u32)>,
    pub outcome: Outcome,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub jumps: Vec<TagJump>,
    /// No snowflake ID is issued with a timestamp at or below this (Unix ms).
    pub snowflake_floor_ms: i64,
    /// Seconds between the backup and the restore's clock.
    pub elapsed_secs: f64,
    /// A global tier's tags without the operator's floor (`at_least`): its block grants are
    /// not in the rates a backup records, so no automatic margin covers what the lost tier
    /// granted after the backup; `leaf restore` refuses the plan while any is left.
    #[serde(default)]
    pub unfloored: Vec<String>,
}

impl Plan {
    /// The gapless series whose margin is more than a restore voids, which it refuses.
    pub fn gapless_too_far(&self) -> impl Iterator<Item = &TagJump> {
        self.jumps.iter().filter(|j| j.profile == Profile::Gapless && j.outcome == Outcome::Exhausted)
    }

    /// The tags left with nothing to hand out.
    pub fn exhausted(&self) -> impl Iterator<Item = &TagJump> {
        self.jumps.iter().filter(|j| j.outcome == Outcome::Exhausted)
    }
}

/// The automatic margin of a tag with stored step `step` consumed at `rate` IDs per second,
/// `elapsed_secs` after the backup, on `nodes` nodes whose dynamic step stops at `max_step`.
pub fn auto_margin(rate: f64, elapsed_secs: f64, step: i64, nodes: u64, max_step: i64) -> i64 {
    let rate = if rate.is_finite() && rate > 0.0 { rate } else { 0.0 };
    let elapsed = elapsed_secs.max(0.0);
    let consumed = (RATE_FACTOR * rate * elapsed).ceil();
    // The largest segment a node may hold: the dynamic step stops at `max_step`, and never
    // goes below the stored step.
    let segment = step.max(max_step).max(1) as f64;
    let buffered = 2.0 * nodes.max(1) as f64 * segment;
    // Saturates at i64::MAX (a float cast does).
    (consumed + buffered) as i64
}

/// The plan of restoring `state` at `input.now_ms`.
pub fn plan(state: &State, input: &PlanInput) -> Plan {
    let elapsed_secs = (input.now_ms.saturating_sub(input.backup_taken_ms)) as f64 / 1000.0;
    let mut jumps: Vec<TagJump> =
        state.tags.iter().map(|(tag, record)| jump(tag, record, input, elapsed_secs)).collect();
    // The voids of every gapless series fit the ledger's cap, or the series past it are refused.
    let mut room = (crate::gapless::MAX_LEDGER_NUMBERS.saturating_sub(state.ledger.len)) as u64;
    for j in jumps.iter_mut().filter(|j| j.outcome == Outcome::Gapless) {
        match room.checked_sub(voids(j)) {
            Some(left) => room = left,
            None => j.outcome = Outcome::Exhausted,
        }
    }
    let marks = state.workers.values().map(|w| w.high_water_ms);
    let snowflake_floor_ms = marks.fold(input.now_ms, i64::max);
    let floored =
        |tag: &str| input.overrides.get(tag).or_else(|| input.overrides.get("*")).is_some_and(|o| o.at_least.is_some());
    let unfloored = match state.regions.registry.is_empty() {
        true => Vec::new(),
        false => {
            jumps.iter().filter(|j| j.profile != Profile::Gapless && !floored(&j.tag)).map(|j| j.tag.clone()).collect()
        }
    };
    Plan { jumps, snowflake_floor_ms, elapsed_secs, unfloored }
}

fn jump(tag: &str, record: &crate::tags::TagRecord, input: &PlanInput, elapsed_secs: f64) -> TagJump {
    let o = input.overrides.get(tag).or_else(|| input.overrides.get("*")).copied().unwrap_or_default();
    let (margin, source) = match o.margin {
        Some(m) => (m.max(0), MarginSource::Given),
        None => {
            let rate = input.rates.get(tag).copied().unwrap_or(0.0);
            let m = auto_margin(rate, elapsed_secs, record.step, input.nodes, input.max_step);
            (m, MarginSource::Auto { rate_per_sec: rate })
        }
    };
    let from = record.max_id;
    if let StoredProfile::Gapless { policy, period, .. } = record.profile() {
        let margin = match source {
            MarginSource::Given => margin,
            MarginSource::Auto { rate_per_sec } => {
                let rate = if rate_per_sec.is_finite() && rate_per_sec > 0.0 { rate_per_sec } else { 0.0 };
                ((RATE_FACTOR * rate * elapsed_secs.max(0.0)).ceil() as i64).max(GAPLESS_MIN_MARGIN)
            }
        };
        // The lost cluster may have moved on to the restore's period (never back).
        let now = policy.period_at(input.now_ms).unwrap_or(*period).max(*period);
        let to = if now > *period { margin.saturating_add(1) } else { from.saturating_add(margin) };
        let outcome = if margin > GAPLESS_MAX_MARGIN { Outcome::Exhausted } else { Outcome::Gapless };
        return TagJump {
            tag: tag.to_string(),
            profile: record.profile().kind(),
            from,
            to,
            margin,
            source,
            at_least: None,
            days: Some((*period, now)),
            outcome,
        };
    }
    let (days, start, limit) = match record.profile() {
        StoredProfile::Daily { format, day } => {
            let today = format.day_at(input.now_ms).unwrap_or(*day);
            // The lost cluster may have reached today: its counter restarted at today's first.
            let (day_to, base) = if today > *day { (today, DAILY_FIRST) } else { (*day, from) };
            (Some((*day, day_to)), base, format.counter_limit())
        }
        _ => (None, from, record.upper_bound().map_or(i64::MAX, |b| b.saturating_add(1))),
    };
    let mut to = start.saturating_add(margin);
    let floor = o.at_least.filter(|f| *f > to);
    if let Some(f) = floor {
        to = f;
    }
    let outcome = if to >= limit {
        to = limit;
        Outcome::Exhausted
    } else {
        Outcome::Moved
    };
    // Never backwards (a daily tag moving to a new day starts its counter over).
    if days.is_none_or(|(a, b)| a == b) {
        to = to.max(from);
    }
    TagJump {
        tag: tag.to_string(),
        profile: record.profile().kind(),
        from,
        to,
        margin,
        source,
        at_least: floor,
        days,
        outcome,
    }
}

/// Numbers a gapless jump voids.
fn voids(j: &TagJump) -> u64 {
    let periods = match j.days {
        Some((a, b)) if b > a && a != 0 => 2,
        _ => 1,
    };
    j.margin.max(0) as u64 * periods
}

/// Voids the margin of gapless series `j.tag` as lost and moves its counter (and period) on.
fn void_lost_numbers(state: &mut State, j: &TagJump, restore: &RestoreRecord, actor: &Actor) {
    let Some(record) = state.tags.get_mut(&j.tag) else { return };
    let StoredProfile::Gapless { policy, period, pruned_through } = record.profile().clone() else { return };
    let (backup_period, now) = j.days.unwrap_or((period, period));
    let margin = j.margin.max(0) as u64;
    let from = j.from.max(1) as u64;
    // Period 0 of a series that resets is "no number yet": nothing of it to void.
    let backup_is_a_period = policy.is_period(backup_period);
    record.max_id = j.to;
    record.set_profile(StoredProfile::Gapless { policy, period: now, pruned_through });
    if margin == 0 {
        return;
    }
    let reason = crate::gapless::lost::lost_reason(restore.backup_id);
    let at = (restore.restored_ms, actor);
    if backup_is_a_period {
        let last = from.saturating_add(margin - 1);
        crate::gapless::lost::void_lost(state, &j.tag, backup_period, from..=last, at, &reason);
    }
    if now > backup_period {
        crate::gapless::lost::void_lost(state, &j.tag, now, 1..=margin, at, &reason);
    }
}

/// Applies `plan` to `state`, restored at `now_ms` from the backup described by `restore`:
/// every tag's counter (and a daily tag's day), every worker ID released with the snowflake
/// floor as its high-water mark, the lineage, and a record of it at the end of the audit
/// trail by `actor`.
pub fn apply_plan(state: &mut State, plan: &Plan, restore: RestoreRecord, actor: Actor) {
    for j in &plan.jumps {
        if j.outcome == Outcome::Gapless {
            void_lost_numbers(state, j, &restore, &actor);
            continue;
        }
        // A gapless series whose margin is too large to void: `leaf restore` refuses the plan;
        // a silent jump would be a gap.
        if j.profile == Profile::Gapless {
            continue;
        }
        let Some(record) = state.tags.get_mut(&j.tag) else { continue };
        record.max_id = j.to;
        if let (StoredProfile::Daily { format, .. }, Some((_, day))) = (record.profile().clone(), j.days) {
            record.set_profile(StoredProfile::Daily { format, day });
        }
    }
    // A region's blocks may have been used past the backup: each becomes a gap, and the tag
    // waits for a new block above its counter, which the global tier grants above every block
    // it granted before (`crate::regions`).
    for (tag, blocks) in &mut state.regions.blocks {
        let max_id = state.tags.get(tag).map_or(blocks.high, |r| r.max_id);
        blocks.queued.clear();
        blocks.end = max_id;
        blocks.high = blocks.high.max(max_id);
    }
    let floor = plan.snowflake_floor_ms;
    // A region's homes are learnt again from the global tier, at their current epochs. A global
    // tier's leases may have been renewed past the backup: each runs a full lease from now, so
    // no move treats a home as let go early (`crate::regions::homes`).
    if state.regions.here.is_some() {
        state.regions.homes.clear();
    }
    for until in state.regions.leases.values_mut() {
        *until = (*until).max(floor.saturating_add(crate::regions::homes::HOME_LEASE_MS));
    }
    for id in 0..WORKER_IDS {
        let previous = state.workers.get(&id).map(|w| w.node_id);
        let high_water_ms = state.workers.get(&id).map_or(floor, |w| w.high_water_ms.max(floor));
        // Released, its lease long over: any node of the new cluster may take it, and starts
        // strictly after `high_water_ms`.
        let record = WorkerRecord {
            node_id: RELEASED,
            high_water_ms,
            lease_expires_ms: i64::MIN / 4,
            lease_ms: 0,
            since_ms: restore.restored_ms,
            previous_node_id: previous,
        };
        state.workers.insert(id, record);
    }
    let exhausted = plan.exhausted().count() as u64;
    let action = AuditAction::ClusterRestored {
        backup_id: format!("{:032x}", restore.backup_id),
        generation: restore.generation,
        backup_taken_ms: restore.backup_taken_ms,
        tags_moved: plan.jumps.len() as u64 - exhausted,
        tags_exhausted: exhausted,
        snowflake_floor_ms: floor,
    };
    state.audit.push(restore.restored_ms, actor, action, Trim::Apart, &mut Changes::default());
    let lineage = &mut state.lineage;
    lineage.generation = restore.generation;
    lineage.restores.push(restore);
    let extra = lineage.restores.len().saturating_sub(MAX_LINEAGE);
    lineage.restores.drain(..extra);
}

#[cfg(test)]
#[allow(clippy::inconsistent_digit_grouping)]
mod tests {
    use leaf_api::profile::DailyFormat;

    use super::*;
    use crate::tags::TagRecord;

    const NOV23: i64 = 1_795_392_000_000; // 2026-11-23T00:00:00Z

    fn state() -> State {
        let mut s = State::default();
        s.tags.insert("plain".into(), TagRecord::plain(1_000, 100, 0, 0));
        s.tags.insert("bounded".into(), TagRecord::plain(900, 10, 0, 0).with_upper_bound(Some(950)));
        let daily = StoredProfile::Daily { format: DailyFormat { digits: 6, utc_offset_minutes: 0 }, day: 20261123 };
        s.tags.insert("daily".into(), TagRecord::plain(500, 10, 0, 0).with_profile(daily));
        s.workers.insert(
            3,
            WorkerRecord {
                node_id: 2,
                high_water_ms: NOV23 + 7_200_000,
                lease_expires_ms: NOV23,
                lease_ms: 10_000,
                since_ms: 0,
                previous_node_id: None,
            },
        );
        s
    }

    fn input(now_ms: i64) -> PlanInput {
        PlanInput {
            now_ms,
            backup_taken_ms: NOV23 + 3_600_000,
            nodes: 3,
            max_step: 10,
            rates: HashMap::from([("plain".to_string(), 10.0)]),
            overrides: BTreeMap::new(),
        }
    }

    fn jump<'a>(p: &'a Plan, tag: &str) -> &'a TagJump {
        p.jumps.iter().find(|j| j.tag == tag).unwrap()
    }

    #[test]
    fn the_automatic_margin_covers_twice_the_rate_and_two_full_segments_a_node() {
        // 10/s for 100 s, doubled: 2,000; two segments of max_step on each of 3 nodes.
        assert_eq!(auto_margin(10.0, 100.0, 100, 3, 1_000_000), 2_000 + 6 * 1_000_000);
        // Whatever the rate (an idle tag can get busy), and the stored step when larger.
        assert_eq!(auto_margin(0.0, 0.0, 100, 1, 5_000), 2 * 5_000);
        assert_eq!(auto_margin(0.0, 1e9, 700, 2, 5), 4 * 700);
        // A rate that is no number counts as none; a clock behind the backup as no time.
        assert_eq!(auto_margin(f64::NAN, 10.0, 1, 1, 1), 2);
        assert_eq!(auto_margin(5.0, -10.0, 1, 1, 1), 2);
        assert_eq!(auto_margin(1e300, 1e300, 1, 1, 1), i64::MAX);
    }

    #[test]
    fn every_counter_moves_forward_past_its_margin_or_is_reported_exhausted() {
        let s = state();
        let now = NOV23 + 3_700_000; // 100 s after the backup, the same day
        let p = plan(&s, &input(now));
        let plain = jump(&p, "plain");
        assert_eq!((plain.from, plain.to, plain.outcome), (1_000, 1_000 + plain.margin, Outcome::Moved));
        assert_eq!(plain.margin, auto_margin(10.0, 100.0, 100, 3, 10));
        // No room between 900 and the bound 950 for a margin of 2 × 3 segments: exhausted, at
        // one past the bound.
        let bounded = jump(&p, "bounded");
        assert_eq!((bounded.to, bounded.outcome), (951, Outcome::Exhausted));
        let daily = jump(&p, "daily");
        assert_eq!((daily.from, daily.to, daily.days), (500, 560, Some((20261123, 20261123))));
        assert_eq!(p.snowflake_floor_ms, NOV23 + 7_200_000, "a mark ahead of the clock is the floor");
        for j in &p.jumps {
            assert!(j.to > j.from, "{j:?}");
        }
    }

    #[test]
    fn a_daily_tag_restored_on_a_later_day_starts_that_day_past_its_margin() {
        let p = plan(&state(), &input(NOV23 + 86_400_000 + 5));
        let daily = jump(&p, "daily");
        assert_eq!((daily.to, daily.days), (DAILY_FIRST + 60, Some((20261123, 20261124))));
        assert_eq!(p.snowflake_floor_ms, NOV23 + 86_400_000 + 5, "the clock past every mark is the floor");
    }

    #[test]
    fn the_operator_s_margin_and_floor_win_and_a_star_covers_the_rest() {
        let mut i = input(NOV23 + 3_700_000);
        i.overrides.insert("plain".into(), Override { margin: Some(5), at_least: Some(50_000) });
        i.overrides.insert("*".into(), Override { margin: Some(0), at_least: None });
        let p = plan(&state(), &i);
        let plain = jump(&p, "plain");
        assert_eq!(
            (plain.to, plain.margin, plain.source, plain.at_least),
            (50_000, 5, MarginSource::Given, Some(50_000))
        );
        let bounded = jump(&p, "bounded");
        assert_eq!((bounded.to, bounded.outcome), (900, Outcome::Moved), "a margin of 0 keeps the counter");
        // A floor below the margin does not count.
        i.overrides.insert("plain".into(), Override { margin: Some(5), at_least: Some(10) });
        assert_eq!(jump(&plan(&state(), &i), "plain").at_least, None);
    }

    #[test]
    fn applying_moves_counters_releases_every_worker_above_the_floor_and_records_the_restore() {
        let mut s = state();
        let now = NOV23 + 86_400_000 + 5;
        let p = plan(&s, &input(now));
        let r = RestoreRecord { backup_id: 0xabc, generation: 1, backup_taken_ms: NOV23, restored_ms: now };
        apply_plan(&mut s, &p, r.clone(), Actor::Node { id: 1 });
        assert_eq!(s.tags["plain"].max_id, jump(&p, "plain").to);
        assert_eq!(
            s.tags["daily"].profile(),
            &StoredProfile::Daily { format: DailyFormat { digits: 6, utc_offset_minutes: 0 }, day: 20261124 }
        );
        assert_eq!(s.workers.len(), WORKER_IDS as usize);
        for (id, w) in &s.workers {
            assert_eq!(w.node_id, RELEASED, "worker {id}");
            assert!(w.high_water_ms >= p.snowflake_floor_ms, "worker {id}");
            assert!(w.reclaimable(now, &[1, 2, 3].into()), "worker {id}");
        }
        assert_eq!(s.workers[&3].previous_node_id, Some(2));
        assert_eq!(s.lineage, Lineage { generation: 1, restores: vec![r] });
        assert!(s.lineage.restored_from(0xabc).is_some() && s.lineage.restored_from(1).is_none());
        let last = s.audit.records.back().unwrap();
        assert!(
            matches!(&last.action, AuditAction::ClusterRestored { generation: 1, tags_exhausted: 1, .. }),
            "{last:?}"
        );
        // A new node registering gets a worker ID that starts above the floor.
        crate::state::record_members(&mut s, [7], &mut Changes::default());
        let g = crate::testing::grant(crate::testing::register(&mut s, now + 1, 7));
        assert!(g.not_before_ms >= p.snowflake_floor_ms);
    }

    #[test]
    fn a_gapless_series_voids_its_margin_as_lost_and_goes_on_after_it() {
        use leaf_api::gapless::{NumberState, Reset, SeriesPolicy, VoidCause};

        let mut s = State::default();
        let yearly = SeriesPolicy { reset: Reset::Year, ..Default::default() };
        let never = SeriesPolicy::default();
        let gapless = |policy, period| StoredProfile::Gapless { policy, period, pruned_through: None };
        s.tags.insert("inv".into(), TagRecord::plain(41, 1, 0, 0).with_profile(gapless(yearly.clone(), 2026)));
        s.tags.insert("cn".into(), TagRecord::plain(8, 1, 0, 0).with_profile(gapless(never, 0)));
        s.tags.insert("fresh".into(), TagRecord::plain(1, 1, 0, 0).with_profile(gapless(yearly, 0)));
        const JAN2_2027: i64 = 1_798_848_000_000;
        let mut i = input(NOV23 + 3_700_000);
        i.rates.insert("inv".into(), 0.5);
        let p = plan(&s, &i);
        // 0.5/s for 100 s, doubled: 100; the least margin is 100 too.
        let inv = jump(&p, "inv");
        assert_eq!((inv.from, inv.to, inv.margin, inv.outcome), (41, 141, 100, Outcome::Gapless));
        assert_eq!(inv.days, Some((2026, 2026)));
        // Restored in a later year: the backup's year loses its margin, and the new year
        // starts after its own.
        i.now_ms = JAN2_2027;
        i.overrides.insert("inv".into(), Override { margin: Some(5), at_least: None });
        let p = plan(&s, &i);
        let inv = jump(&p, "inv");
        assert_eq!((inv.to, inv.days, inv.margin), (6, Some((2026, 2027)), 5));
        assert_eq!(jump(&p, "fresh").days, Some((0, 2027)), "a series without a number yet");
        let r = RestoreRecord { backup_id: 0xabc, generation: 1, backup_taken_ms: NOV23, restored_ms: JAN2_2027 };
        apply_plan(&mut s, &p, r, Actor::Node { id: 1 });
        let ledger = &s.ledger.series["inv"];
        let lost: Vec<(u32, u64)> = ledger.numbers.keys().copied().collect();
        let want: Vec<(u32, u64)> = (41..=45).map(|n| (2026, n)).chain((1..=5).map(|n| (2027, n))).collect();
        assert_eq!(lost, want);
        for r in ledger.numbers.values() {
            assert_eq!(r.state(), NumberState::Voided);
            let (cause, why) = r.void().unwrap();
            assert_eq!(cause, VoidCause::Lost);
            assert!(why.contains("00000000000000000000000000000abc"), "{why}");
        }
        assert_eq!(s.tags["inv"].max_id, 6);
        assert!(matches!(s.tags["inv"].profile(), StoredProfile::Gapless { period: 2027, .. }));
        // Period 0 of a yearly series is no period: only the new year's first numbers are lost.
        let fresh: Vec<(u32, u64)> = s.ledger.series["fresh"].numbers.keys().copied().collect();
        assert_eq!(fresh, (1..=100).map(|n| (2027, n)).collect::<Vec<_>>());
        assert_eq!(s.ledger.series["cn"].numbers.len(), 100);
        // The next issue follows the block.
        let ask = crate::gapless::NumberAsk {
            tag: "inv".into(),
            key: "k".into(),
            actor: Actor::Unattributed,
            act: crate::gapless::NumberAct::Issue,
        };
        let cmd = crate::Command { at_ms: JAN2_2027 + 1, op: crate::Op::plain_numbers(vec![ask]) };
        let r = crate::apply::apply(&mut s, &cmd, &mut Changes::default()).unwrap();
        let crate::Applied::Numbers(r) = r else { panic!() };
        assert_eq!(r[0].as_ref().map(|i| (i.period, i.number)), Ok((2027, 6)));
        // A margin past what a restore voids is refused, and applying it changes nothing.
        let mut i = input(NOV23 + 3_700_000);
        i.overrides.insert("*".into(), Override { margin: Some(GAPLESS_MAX_MARGIN + 1), at_least: None });
        let mut s2 = State::default();
        let policy = SeriesPolicy::default();
        s2.tags.insert("cn".into(), TagRecord::plain(8, 1, 0, 0).with_profile(gapless(policy, 0)));
        let p = plan(&s2, &i);
        assert_eq!(p.gapless_too_far().count(), 1);
        let r = RestoreRecord { backup_id: 1, generation: 1, backup_taken_ms: NOV23, restored_ms: NOV23 };
        apply_plan(&mut s2, &p, r, Actor::Node { id: 1 });
        assert_eq!((s2.tags["cn"].max_id, s2.ledger.len), (8, 0));
    }
}
