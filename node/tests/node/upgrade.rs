//! A data directory written by the previous release opens in this one, as it is.
//!
//! `tests/fixtures/data-dir-3efe52c.tar.gz` was written by the real `leaf` of 3efe52c (main
//! before issue 51), release build, not by hand: `leaf serve --data-dir data`, two tags created
//! (`upgrade-plain`, step 1000; `upgrade-mono`, monotonic, step 100), 360 segment IDs of each
//! and of `leaf-segment-test` and 11 snowflake IDs taken, then `kill -9`. The highest IDs it
//! answered are below. Issue 51 changed when the store syncs, not what it writes, so there is
//! nothing to convert; this test is what keeps that true.
use std::process::Command;
use std::time::Duration;

use leaf_api::types::SnowflakeState;
use tempfile::TempDir;

use crate::support::*;

/// The highest segment ID the old node answered, per tag.
const SERVED: [(&str, i64); 3] = [("upgrade-plain", 365), ("upgrade-mono", 460), ("leaf-segment-test", 365)];
/// The highest snowflake ID it answered.
const SNOWFLAKE_SERVED: i64 = 2_126_961_339_078_279_245;

fn unpack_fixture() -> TempDir {
    let dir = TempDir::new().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/data-dir-3efe52c.tar.gz");
    let status = Command::new("tar").arg("xzf").arg(fixture).arg("-C").arg(dir.path()).status().unwrap();
    assert!(status.success(), "tar xzf {fixture}: {status}");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_the_previous_release_opens_and_serves_above_what_it_served() {
    let dir = unpack_fixture();
    let mut cfg = config(&dir);
    cfg.data_dir = dir.path().join("data");
    for round in 0..2 {
        // Round 0 opens the old release's directory; round 1 what this release wrote into it.
        let (node, c) = start(cfg.clone()).await;
        for (tag, served) in SERVED {
            let info = c.tag(tag).await.unwrap_or_else(|e| panic!("round {round}: {tag}: {e}"));
            assert!(info.max_id > served, "round {round}: {tag}'s max_id {} is not above {served}", info.max_id);
            let ids = get_ids(&c, tag, Some(10)).await;
            assert!(ids.iter().all(|id| *id > served), "round {round}: {tag} served {ids:?}, not above {served}");
        }
        wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(15)).await;
        let sf = snowflake_ids(&c, None).await;
        assert!(sf[0] > SNOWFLAKE_SERVED, "round {round}: snowflake {} is not above {SNOWFLAKE_SERVED}", sf[0]);
        node.shutdown().await;
    }
}
