//! The read-only view of the applied state for the rest of the node ([`StateReader`]).
//!
//! Tokens are also published, after every batch of entries that changed one, as an immutable
//! map behind an `ArcSwap` ([`StateReader::tokens`]): the request path checks a token with one
//! atomic load, and a node refuses a revoked token as soon as it applied the revocation.
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;

use leaf_api::gapless::{NumberState, PeriodClose};

use super::SmData;
use crate::gapless::{LedgerSlice, NumberRecord};

/// What [`StateReader::due_reservations`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueReservations {
    /// Reservations to void now, as (tag, key), at most the `max` asked for.
    pub due: Vec<(String, String)>,
    /// Every reservation due (past its deadline, or of a closed period under `void`), of
    /// series that are not archived.
    pub overdue: u64,
    /// Every open reservation.
    pub open: u64,
}
use crate::state::State;
use crate::tags::TagRecord;
use crate::tokens::TokenRecord;
use crate::types::LogId;
use crate::workers::WorkerRecord;

/// The tokens as last applied, by ID: replaced whole after each batch that changed one.
pub type Tokens = std::collections::BTreeMap<u64, TokenRecord>;

/// Read-only view of the applied state for the rest of the node (tag lookups, `/db`).
#[derive(Clone)]
pub struct StateReader {
    data: Arc<RwLock<SmData>>,
    tokens: Arc<ArcSwap<Tokens>>,
    archives: Arc<std::sync::atomic::AtomicU64>,
}

impl StateReader {
    /// A reader of `data`, whose tokens are published in `tokens`.
    pub(super) fn new(
        data: Arc<RwLock<SmData>>,
        tokens: Arc<ArcSwap<Tokens>>,
        archives: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        StateReader { data, tokens, archives }
    }

    /// A counter raised after each applied tag archive and each installed snapshot, before
    /// the node reports the entry applied (`Release`; read it with `Acquire`): a node's request
    /// path compares it with the last value it saw and drops the tags it loaded that are
    /// archived now, so their buffers stop serving.
    pub fn archives(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.archives.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, SmData> {
        // A poisoned lock means a panic while applying; the data is still the last consistent
        // state because apply() mutates only on success.
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokens as of the last applied entry: one atomic load, no lock (the request path).
    pub fn tokens(&self) -> arc_swap::Guard<Arc<Tokens>> {
        self.tokens.load()
    }

    /// The audit trail's page of up to `limit` records after `after_seq` passing `filter`,
    /// the next page's `after_seq`, the oldest record kept and the retention.
    pub fn audit_page(
        &self,
        filter: &leaf_api::audit::AuditFilter,
        after_seq: u64,
        limit: usize,
    ) -> leaf_api::audit::AuditPage {
        let d = self.read();
        let log = &d.state.audit;
        let (records, next_after_seq) = log.page(filter, after_seq, limit);
        leaf_api::audit::AuditPage {
            records,
            next_after_seq,
            oldest_seq: log.records.front().map(|r| r.seq),
            retention: log.retention,
        }
    }

    /// Every tag template, by name.
    pub fn templates(&self) -> Vec<(String, crate::TemplateRecord)> {
        self.read().state.templates.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// A global tier's regions, every one ever registered, by name.
    pub fn regions(&self) -> Vec<(String, crate::regions::RegionRecord)> {
        self.read().state.regions.registry.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Whether this cluster adopted a region (without copying its identity).
    pub fn is_region(&self) -> bool {
        self.read().state.regions.here.is_some()
    }

    /// The region this cluster is, once adopted.
    pub fn region_here(&self) -> Option<crate::regions::Identity> {
        self.read().state.regions.here.clone()
    }

    /// `tag`'s home, as the global tier decided it or as this region learnt it.
    pub fn home(&self, tag: &str) -> Option<crate::regions::Home> {
        self.read().state.regions.homes.get(tag).cloned()
    }

    /// Homed tags' homes in name order: those starting with `prefix`, after `after`
    /// (exclusive), at most `limit`.
    pub fn homes(&self, prefix: &str, after: Option<&str>, limit: usize) -> Vec<(String, crate::regions::Home)> {
        use std::ops::Bound;
        let d = self.read();
        let from = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        d.state
            .regions
            .homes
            .range((from, Bound::Unbounded))
            .take_while(|(t, _)| t.starts_with(prefix))
            .take(limit)
            .map(|(t, h)| (t.clone(), h.clone()))
            .collect()
    }

    /// `tag`'s counter and blocks in a region (its blocks empty if it was granted none yet);
    /// `None` if the tag does not exist.
    pub fn tag_blocks(&self, tag: &str) -> Option<(i64, crate::regions::TagBlocks)> {
        let d = self.read();
        let max_id = d.state.tags.get(tag)?.max_id;
        let blocks = d.state.regions.blocks.get(tag).cloned().unwrap_or(crate::regions::TagBlocks {
            end: max_id,
            queued: Default::default(),
            high: max_id,
        });
        Some((max_id, blocks))
    }

    /// The template that makes `tag`, if one does.
    pub fn template_for(&self, tag: &str) -> Option<(String, crate::TemplateRecord)> {
        let d = self.read();
        crate::templates::matching(&d.state.templates, tag).map(|(n, r)| (n.clone(), r.clone()))
    }

    /// Up to `limit` numbers of gapless series `tag` after `after` (period, number) in order,
    /// only those of `period` and in `state` if given; with the series' count of numbers, its
    /// open reservations and its head. A filter on state scans the series (a page of open
    /// reservations reads their index).
    pub fn ledger_page(
        &self,
        tag: &str,
        period: Option<u32>,
        state: Option<NumberState>,
        after: Option<(u32, u64)>,
        limit: usize,
    ) -> LedgerSlice {
        use std::ops::Bound;
        let d = self.read();
        let ledger = &d.state.ledger;
        let Some(series) = ledger.series.get(tag) else {
            return LedgerSlice { numbers: Vec::new(), count: 0, open: 0, head: crate::gapless::CHAIN_GENESIS };
        };
        let from = match (after, period) {
            (Some(a), Some(p)) if a >= (p, 0) => Bound::Excluded(a),
            (_, Some(p)) => Bound::Included((p, 0)),
            (Some(a), None) => Bound::Excluded(a),
            (None, None) => Bound::Unbounded,
        };
        let numbers = series
            .numbers
            .range((from, Bound::Unbounded))
            .take_while(|((p, _), _)| period.is_none_or(|want| *p == want))
            .filter(|(_, r)| state.is_none_or(|s| r.state() == s))
            .take(limit)
            .map(|(at, r)| (*at, r.clone()))
            .collect();
        LedgerSlice { numbers, count: series.numbers.len(), open: series.open(), head: series.head() }
    }

    /// Gapless series `tag`'s limits (the defaults if it set none).
    pub fn series_limits(&self, tag: &str) -> leaf_api::gapless::SeriesLimits {
        self.read().state.ledger.limits_of(tag)
    }

    /// The fill of the `max` fullest gapless series: (tag, numbers held, its `max_numbers`),
    /// fullest first (by numbers held over the cap).
    pub fn fullest_series(&self, max: usize) -> Vec<(String, u64, u64)> {
        let d = self.read();
        let ledger = &d.state.ledger;
        let mut fill: Vec<(String, u64, u64)> = ledger
            .series
            .iter()
            .map(|(tag, s)| (tag.clone(), s.numbers.len() as u64, ledger.limits_of(tag).max_numbers))
            .collect();
        // Fuller first: a/b > c/d as a·d > c·b, in integers.
        let fuller = |a: &(String, u64, u64), b: &(String, u64, u64)| {
            (u128::from(b.1) * u128::from(a.2)).cmp(&(u128::from(a.1) * u128::from(b.2))).then_with(|| a.0.cmp(&b.0))
        };
        if max < fill.len() && max > 0 {
            fill.select_nth_unstable_by(max - 1, fuller);
        }
        fill.truncate(max);
        fill.sort_by(fuller);
        fill
    }

    /// The number `key` has in gapless series `tag`, with its record.
    pub fn number_of_key(&self, tag: &str, key: &str) -> Option<((u32, u64), NumberRecord)> {
        self.read().state.ledger.by_key(tag, key).map(|(at, r)| (at, r.clone()))
    }

    /// What the leader should void at `now_ms` ([`DueReservations`]): up to `max` open
    /// reservations as (tag, key), those whose deadline has passed first, then those of a
    /// period their series has left under `on_period_close: void`. An archived series is left
    /// alone (apply refuses any ask of it) until it is restored.
    pub fn due_reservations(&self, now_ms: i64, max: usize) -> DueReservations {
        let d = self.read();
        let ledger = &d.state.ledger;
        let live = |tag: &str| d.state.tags.get(tag).filter(|t| t.archived_ms().is_none());
        let key_of = |tag: &str, at: (u32, u64)| ledger.get(tag, at).map(|r| (tag.to_string(), r.key.to_string()));
        let expired = ledger.open.iter().take_while(|(deadline, ..)| *deadline <= now_ms);
        let mut overdue = 0;
        let mut due = Vec::new();
        for (_, tag, p, n) in expired {
            if live(tag).is_some() {
                overdue += 1;
                if due.len() < max {
                    due.extend(key_of(tag, (*p, *n)));
                }
            }
        }
        // Closed periods: only the periods with open reservations of the series that void them.
        for (tag, series) in &ledger.series {
            let Some(crate::StoredProfile::Gapless { policy, period, .. }) = live(tag).map(|t| t.profile()) else {
                continue;
            };
            if policy.on_period_close != PeriodClose::Void {
                continue;
            }
            for (p, _) in series.periods.range(..*period).filter(|(_, c)| c.open > 0) {
                for (n, r) in series.numbers.range((*p, 0)..=(*p, u64::MAX)) {
                    if r.state() != NumberState::Reserved || r.deadline_ms.is_some_and(|d| d <= now_ms) {
                        continue;
                    }
                    overdue += 1;
                    if due.len() < max {
                        due.extend(key_of(tag, *n));
                    }
                }
            }
        }
        DueReservations { due, overdue, open: ledger.open.len() as u64 }
    }

    pub fn tag(&self, tag: &str) -> Option<TagRecord> {
        self.read().state.tags.get(tag).cloned()
    }

    pub fn tags(&self) -> Vec<(String, TagRecord)> {
        self.read().state.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Snowflake worker IDs in use.
    pub fn workers(&self) -> Vec<(u16, WorkerRecord)> {
        self.read().state.workers.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    /// Up to `limit` tags in name order that start with `prefix`, come after `after` and
    /// pass `keep`: one page of a listing, read under the lock without copying the rest.
    pub fn tags_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        mut keep: impl FnMut(&str, &TagRecord) -> bool,
    ) -> Vec<(String, TagRecord)> {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let d = self.read();
        d.state
            .tags
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(t, _)| t.starts_with(prefix))
            .filter(|(t, r)| keep(t, r))
            .take(limit)
            .map(|(t, r)| (t.clone(), r.clone()))
            .collect()
    }

    /// The cluster's active version ([`crate::version`]).
    pub fn cluster_version(&self) -> crate::version::ClusterVersion {
        self.read().state.version
    }

    pub fn tag_count(&self) -> usize {
        self.read().state.tags.len()
    }

    /// Runs `f` on the applied state under the read lock, for a reader that needs more than
    /// one record without copying the whole state (the forecasts). Keep `f` short: applying
    /// the next entry waits for it.
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.read().state)
    }

    pub fn last_applied(&self) -> Option<LogId> {
        self.read().last_applied
    }

    /// A copy of the whole applied state (tests, diagnostics).
    pub fn data(&self) -> SmData {
        self.read().clone()
    }

    /// Whether `node_id` was a member once and was removed (node IDs are never reused).
    pub fn is_retired_node(&self, node_id: u64) -> bool {
        let d = self.read();
        let current = d.membership.membership().nodes().map(|(id, _)| *id);
        d.state.is_retired(node_id, current)
    }
}
