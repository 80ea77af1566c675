//! The load of a rolling upgrade run ([`super::run::RunConfig::upgrade_from`]) through one
//! client of every node, as an application has it: failover across the nodes and the
//! client's own retries. The run's other clients are pinned to one node each, so they see
//! every restart; this one must see none: any error it reports fails the run.
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_client::Client;

/// What the client saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Calls answered with an ID.
    pub ok: u64,
    /// Every error, as the client reported it.
    pub errors: Vec<String>,
    /// IDs answered twice (of one tag, or of snowflake).
    pub duplicates: u64,
}

/// Asks for one ID of `tag` and one snowflake ID in turn, every 10 ms, until `stop`.
pub async fn run(client: Client, tag: String, stop: Arc<AtomicBool>) -> Report {
    let mut report = Report::default();
    let (mut segment, mut snowflake) = (HashSet::new(), HashSet::new());
    let mut turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let (kind, got, seen) = if turn.is_multiple_of(2) {
            ("segment", client.segment_id(&tag).await, &mut segment)
        } else {
            ("snowflake", client.snowflake_id("upgrade").await, &mut snowflake)
        };
        match got {
            Ok(id) => {
                report.ok += 1;
                if !seen.insert(id) {
                    report.duplicates += 1;
                }
            }
            Err(e) => report.errors.push(format!("{kind}: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    report
}
