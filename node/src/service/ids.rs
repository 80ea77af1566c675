//! The ID operations — the per-ID path, shared by HTTP (text and `format=ranges`, the fast path
//! included) and gRPC: segment takes the way each tag's profile serves them (this node's
//! buffers, the monotonic leader path, an obfuscated tag's bijection), snowflake takes, and
//! snowflake decoding. They take no lock and build no JSON: results go to a caller's sink as
//! increasing runs `(first, count)`. One ID of a buffered tag whose buffers hold one is also
//! taken synchronously ([`App::segment_take_one_now`]), for the HTTP fast path's ready answers.
use std::sync::Arc;

use leaf_api::ranges::IdRanges;
use leaf_api::types::SnowflakeDecoded;
use leaf_api::ErrorCode;

use super::{ApiError, App};
use crate::access::{IdAsk, IdRequester};
use crate::profiles::obfuscate::Obfuscator;
use crate::tags::{ServeAs, TagHandle};

/// The IDs of one batch as taken: increasing runs `(first, count)`, each of consecutive values,
/// passed through an obfuscated tag's bijection on the way out. A segment contributes one run,
/// a snowflake millisecond one, an obfuscated tag's segment one run of counters.
#[derive(Default)]
pub struct IdRuns {
    runs: Vec<(i64, u64)>,
    /// An obfuscated tag's bijection: every counter of `runs` is in its domain (checked when
    /// taken), so each encodes.
    through: Option<Arc<Obfuscator>>,
}

impl IdRuns {
    /// Adds a run after the others (joined to the last one where it follows on).
    pub fn push(&mut self, first: i64, count: u64) {
        match self.runs.last_mut() {
            Some((f, c)) if *f + *c as i64 == first => *c += count,
            _ => self.runs.push((first, count)),
        }
    }

    /// The IDs, in the order taken.
    pub fn into_ids(self) -> impl Iterator<Item = i64> + Send + 'static {
        let through = self.through;
        self.runs.into_iter().flat_map(|(first, c)| first..first + c as i64).filter_map(move |v| match &through {
            None => Some(v),
            // In its domain (checked when taken), so this never drops one.
            Some(o) => o.encode(v as u64).ok().map(|id| id as i64),
        })
    }
}

impl App {
    /// Checks an ID request's credentials (the `Authorization` header or gRPC metadata, if
    /// any): for a segment tag, or for snowflake IDs (`tag: None`); who they stand for.
    pub fn check_ids(
        &self,
        authorization: Option<&[u8]>,
        tag: Option<&str>,
        ask: IdAsk,
    ) -> Result<IdRequester, ApiError> {
        self.access.check_ids(authorization, tag, ask)
    }

    /// The segment handle of a validated tag, confirming an unknown tag with the leader first;
    /// a tag that does not exist is made from its template if `caller` may ([`App::make_from_template`]).
    pub async fn segment_handle(&self, tag: &str, caller: IdRequester) -> Result<Arc<TagHandle>, ApiError> {
        match self.known(tag, |app| app.tags.get(tag)).await {
            Err(e) if e.code == ErrorCode::TagNotFound => self.make_from_template(tag, caller, e).await,
            found => found,
        }
    }

    /// Takes `n` IDs of a validated tag the way its profile serves them, calling
    /// `sink(first, count)` per increasing run: from this node's buffers, or from the leader
    /// (monotonic tags: one run).
    pub async fn segment_take(
        &self,
        tag: &str,
        n: u32,
        caller: IdRequester,
        sink: impl FnMut(i64, u64) + Send,
    ) -> Result<(), ApiError> {
        let h = self.segment_handle(tag, caller).await?;
        self.take(&h, n, sink).await
    }

    /// One ID of a validated tag without waiting, when this node has the tag loaded, serves it
    /// from its buffers (segment and daily tags) and they hold an ID: no await, no lock, no
    /// clone of the handle. `None` otherwise (an unknown or not yet loaded tag, empty buffers,
    /// another profile): [`App::segment_take`] then serves the request, and answers alike.
    #[inline]
    pub fn segment_take_one_now(&self, tag: &str) -> Option<i64> {
        self.tags
            .with_loaded(tag, |h| match h.serve() {
                ServeAs::Buffer => h.take_one_now(),
                _ => None,
            })
            .flatten()
    }

    /// `count` IDs of a validated tag as ranges (HTTP `format=ranges` and gRPC); an obfuscated
    /// tag's IDs are not contiguous, so they come only one by one.
    pub async fn segment_ranges(&self, tag: &str, count: u32, caller: IdRequester) -> Result<IdRanges, ApiError> {
        let h = self.segment_handle(tag, caller).await?;
        if let ServeAs::Obfuscated(_) = h.serve() {
            return Err(ApiError::new(
                ErrorCode::WrongProfile,
                format!("tag {:?} is obfuscated: its IDs are not contiguous, so they come only as text", h.tag()),
            ));
        }
        let mut out = IdRanges::default();
        self.take(&h, count, |first, c| out.push_run(first, c)).await?;
        Ok(out)
    }

    /// `n` IDs of a validated tag as [`IdRuns`] (HTTP text batches): the runs taken, and an
    /// obfuscated tag's counters encoded only as the answer is written, so a batch of a million
    /// costs a few runs of memory, never a million IDs.
    pub async fn segment_runs(&self, tag: &str, n: u32, caller: IdRequester) -> Result<IdRuns, ApiError> {
        let h = self.segment_handle(tag, caller).await?;
        let mut runs = IdRuns::default();
        let ServeAs::Obfuscated(o) = h.serve() else {
            self.take(&h, n, |first, c| runs.push(first, c)).await?;
            return Ok(runs);
        };
        h.take(u64::from(n), |first, c| runs.push(first, c)).await?;
        // Every counter must be in the bijection's domain: a run's last is its largest.
        if let Some(e) = runs.runs.iter().find_map(|&(first, c)| o.encode((first + c as i64 - 1) as u64).err()) {
            tracing::error!(tag = h.tag(), error = %e, "an obfuscated tag's counter left its ID space");
            return Err(ApiError::new(ErrorCode::Unavailable, format!("tag {:?} cannot be served: {e}", h.tag())));
        }
        runs.through = Some(o.clone());
        Ok(runs)
    }

    /// `n` snowflake IDs for a validated key as [`IdRuns`] (about one run per millisecond).
    pub async fn snowflake_runs(&self, key: &str, n: u32) -> Result<IdRuns, ApiError> {
        let mut runs = IdRuns::default();
        self.snowflake_take(key, n, |first, c| runs.push(first, c)).await?;
        Ok(runs)
    }

    /// `count` IDs of a validated tag one by one, whatever its profile (gRPC `GetSegmentIdList`).
    pub async fn segment_list(&self, tag: &str, count: u32, caller: IdRequester) -> Result<Vec<i64>, ApiError> {
        let mut out = Vec::with_capacity(count as usize);
        self.segment_take(tag, count, caller, |first, c| out.extend(first..first + c as i64)).await?;
        Ok(out)
    }

    async fn take(&self, h: &TagHandle, n: u32, mut sink: impl FnMut(i64, u64) + Send) -> Result<(), ApiError> {
        match h.serve() {
            ServeAs::Buffer => Ok(h.take(u64::from(n), sink).await?),
            ServeAs::Obfuscated(o) => {
                let mut bad = None;
                h.take(u64::from(n), |first, count| {
                    for seq in first..first + count as i64 {
                        // The counter is below the tag's limit, the bijection's domain.
                        match o.encode(seq as u64) {
                            Ok(id) => sink(id as i64, 1),
                            Err(e) => bad = Some(e),
                        }
                    }
                })
                .await?;
                match bad {
                    Some(e) => {
                        tracing::error!(tag = h.tag(), error = %e, "an obfuscated tag's counter left its ID space");
                        Err(ApiError::new(ErrorCode::Unavailable, format!("tag {:?} cannot be served: {e}", h.tag())))
                    }
                    None => Ok(()),
                }
            }
            ServeAs::Leader => {
                // Forwarded to the leader from a follower: a failure converts through
                // `ApiError::from(ProposeError)`, which never shows the leader's address.
                let first = self.monotonic.take(&self.raft, h.tag().to_string(), n).await?;
                h.count_served(u64::from(n));
                sink(first, u64::from(n));
                Ok(())
            }
            ServeAs::Gapless => Err(ApiError::new(
                ErrorCode::WrongProfile,
                format!(
                    "tag {:?} is gapless: its numbers are issued one per key with POST /api/gapless/{}/issue, not taken \
                     as IDs",
                    h.tag(),
                    h.tag()
                ),
            )),
            ServeAs::Unservable(why) => {
                Err(ApiError::new(ErrorCode::Unavailable, format!("tag {:?} cannot be served: {why}", h.tag())))
            }
        }
    }

    /// `n` snowflake IDs for a validated key, as increasing runs to `sink`; counted per key.
    pub async fn snowflake_take(&self, key: &str, n: u32, sink: impl FnMut(i64, u64) + Send) -> Result<(), ApiError> {
        self.snowflake.take(u64::from(n), sink).await?;
        self.metrics.snowflake_served(key, u64::from(n));
        Ok(())
    }

    /// `count` snowflake IDs as ranges, for a validated key (HTTP `format=ranges` and gRPC).
    pub async fn snowflake_ranges(&self, key: &str, count: u32) -> Result<IdRanges, ApiError> {
        let mut out = IdRanges::default();
        self.snowflake_take(key, count, |first, c| out.push_run(first, c)).await?;
        Ok(out)
    }

    /// The parts of snowflake ID `id` (HTTP decoders and gRPC); a negative ID is
    /// `invalid_request`.
    pub fn decode_snowflake(&self, id: i64) -> Result<SnowflakeDecoded, ApiError> {
        let parts = self.snowflake.layout().decode(id).ok_or_else(|| not_a_snowflake(&id.to_string()))?;
        let timestamp = chrono::DateTime::from_timestamp_millis(parts.timestamp_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
        Ok(SnowflakeDecoded {
            id,
            timestamp_ms: parts.timestamp_ms,
            timestamp,
            worker_id: parts.worker_id,
            sequence: parts.sequence,
        })
    }

    /// [`App::decode_snowflake`] of an ID as the caller wrote it (a path or query parameter).
    pub fn decode_snowflake_text(&self, raw: &str) -> Result<SnowflakeDecoded, ApiError> {
        let id: i64 = raw.parse().map_err(|_| not_a_snowflake(raw))?;
        self.decode_snowflake(id).map_err(|_| not_a_snowflake(raw))
    }
}

/// 400 `invalid_request`: `raw` is not a snowflake ID.
pub fn not_a_snowflake(raw: &str) -> ApiError {
    ApiError::invalid(format!("{raw:?} is not a snowflake ID (0..2^63)"))
}
