//! Snowflake after `kill -9`: a restarted node serves at once from its durable floor forward
//! (logical milliseconds may run ahead of the wall clock inside the durable window) instead of
//! waiting for the clock to pass the old high-water mark, and never repeats or goes below an ID
//! it issued before the crash.
use std::time::{Duration, Instant};

use leaf_api::types::{SnowflakeDecoded, SnowflakeState};
use leaf_client::Client;
use tempfile::TempDir;

use crate::support::{chrono_now_ms, client, free_port, health, spawn_leaf, wait_snowflake};

/// From spawning the process to the first snowflake 200. The process itself needs a few hundred
/// ms to open its storage and listen; before this change the first 200 came only once the clock
/// had passed the old window (1.5–3 s after a quick restart with the default 3 s window).
const FIRST_200_WITHIN: Duration = Duration::from_millis(1000);

async fn take(c: &Client, n: u32) -> Vec<i64> {
    c.snowflake_ids("restart", n).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Kills the node when the test ends, also when an assertion fails first.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill(); // SIGKILL
        let _ = self.0.wait();
    }
}

async fn decode(c: &Client, id: i64) -> SnowflakeDecoded {
    c.decode(id).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snowflake_serves_at_once_after_kill_9_and_stays_above_every_earlier_id() {
    let dir = TempDir::new().unwrap();
    let port = free_port();
    let child = Killed(spawn_leaf(&dir, port));
    let url = format!("http://127.0.0.1:{port}");
    assert!(leaf_node::cli::wait_healthy(&url, Duration::from_secs(15)).await, "first start: not healthy");
    let c = client(&url, None);
    let worker = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(15)).await.snowflake.worker_id;
    // Many IDs, and the window raised a few times, right up to the crash.
    let mut before = Vec::new();
    for _ in 0..40 {
        before.extend(take(&c, 10_000).await);
    }
    let hw = health(&c).await.snowflake.high_water_ms.expect("a high-water mark while serving");
    before.extend(take(&c, 10_000).await);
    drop(child); // kill -9, right after the last IDs
    let crashed_at = chrono_now_ms();

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let c = client(&url, None);
    let spawned = Instant::now();
    let _child = Killed(spawn_leaf(&dir, port));
    let (mut first_answer, mut after) = (None, Vec::new());
    while spawned.elapsed() < Duration::from_secs(15) {
        match c.snowflake_ids("restart", 1000).await {
            Ok(ids) => {
                after = ids;
                break;
            }
            // An answer, not yet a 200.
            Err(e) if e.status().is_some() => {
                first_answer.get_or_insert(spawned.elapsed());
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_200 = spawned.elapsed();
    let first_answer = first_answer.unwrap_or(first_200);
    eprintln!(
        "restart: first HTTP answer {} ms, first snowflake 200 {} ms after spawning (window mark {} ms ahead of the \
         crash)",
        first_answer.as_millis(),
        first_200.as_millis(),
        hw - crashed_at
    );
    assert!(!after.is_empty(), "no snowflake 200 within 15 s of the restart");
    assert!(
        first_200 < FIRST_200_WITHIN,
        "first snowflake 200 only {first_200:?} after the restart (first HTTP answer at {first_answer:?})"
    );
    for _ in 0..20 {
        after.extend(take(&c, 10_000).await);
    }

    // Every ID after the restart is above every ID before it; no duplicates on either side.
    let max_before = *before.iter().max().unwrap();
    let min_after = *after.iter().min().unwrap();
    assert!(min_after > max_before, "{min_after} after the restart <= {max_before} before it");
    for ids in [&before, &after] {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "IDs not strictly increasing");
    }
    let (last_before, first_after) = (decode(&c, max_before).await, decode(&c, min_after).await);
    assert!(
        first_after.timestamp_ms > last_before.timestamp_ms,
        "timestamp {} after the restart is not above {} before it",
        first_after.timestamp_ms,
        last_before.timestamp_ms
    );
    assert_eq!(Some(first_after.worker_id), worker, "the state file's worker ID is reused");
    assert_eq!(first_after.worker_id, last_before.worker_id);
    // Never at or below the floor: the first timestamp is above the last durable mark seen
    // before the crash (the floor is at least that).
    assert!(first_after.timestamp_ms > hw, "{} is not above the pre-crash mark {hw}", first_after.timestamp_ms);
}
