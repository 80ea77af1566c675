//! The polyglot proof: Python stubs generated with grpcio-tools from the committed protos
//! (`api/proto/`) get IDs from a real node. Needs `python3` with `grpc_tools` (PyPI
//! `grpcio-tools`, installed by `.ci/run`); without it the test fails and says so.
use std::path::PathBuf;

use leaf_api::ranges::{IdRange, IdRanges};

use std::process::Command;
use std::time::Duration;

use crate::support::*;
use leaf_api::types::SnowflakeState;
use serde_json::json;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn ranges(v: &serde_json::Value) -> IdRanges {
    let ranges = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| IdRange { start: r[0].as_i64().unwrap(), end: r[1].as_i64().unwrap() })
        .collect();
    IdRanges { ranges }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stubs_from_the_committed_protos_get_ids() {
    let probe = Command::new("python3").args(["-c", "import grpc_tools.protoc, grpc"]).output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "python3 cannot import grpc_tools: run `python3 -m pip install grpcio-tools` (.ci/run does)\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("no python3 ({e}): install it and `python3 -m pip install grpcio-tools`"),
    }
    let stubs = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .current_dir(repo())
        .args(["-m", "grpc_tools.protoc", "-I", "api/proto"])
        .arg(format!("--python_out={}", stubs.path().display()))
        .arg(format!("--grpc_python_out={}", stubs.path().display()))
        .args(["leaf/v1/leaf.proto", "grpc/health/v1/health.proto"])
        .output()
        .unwrap();
    assert!(out.status.success(), "grpc_tools.protoc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    for f in ["leaf/v1/leaf_pb2.py", "leaf/v1/leaf_pb2_grpc.py", "grpc/health/v1/health_pb2_grpc.py"] {
        assert!(stubs.path().join(f).is_file(), "protoc wrote no {f}");
    }

    let dir = tempfile::tempdir().unwrap();
    let (node, http) = start(config(&dir)).await;
    wait_snowflake(&http, SnowflakeState::Serving, Duration::from_secs(15)).await;
    let script = repo().join("node/tests/python/leaf_grpc_client.py");
    let addr = node.http_addr().to_string();
    let stubs_dir = stubs.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).arg(stubs_dir).arg(addr).arg("leaf-segment-test").output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    let (a, b) = (ranges(&v["segment"][0]), ranges(&v["segment"][1]));
    a.validate(1000).unwrap();
    b.validate(1000).unwrap();
    assert!(a.ranges.last().unwrap().end <= b.ranges[0].start, "the second call's IDs come after the first's");
    let flakes = ranges(&v["snowflake"]);
    flakes.validate(100).unwrap();
    let d = &v["decode"];
    assert_eq!(d["id"].as_i64(), Some(flakes.ranges[0].start));
    let want = http.decode(flakes.ranges[0].start).await.unwrap();
    assert_eq!(d["timestamp_ms"].as_i64(), Some(want.timestamp_ms));
    assert_eq!(d["timestamp"].as_str(), Some(want.timestamp.as_str()));
    assert_eq!(d["worker_id"].as_u64(), Some(want.worker_id as u64));
    assert_eq!(d["sequence"].as_u64(), Some(want.sequence as u64));
    assert_eq!(v["unknown_tag"], json!({"code": "NOT_FOUND", "leaf_code": "tag_not_found"}));
    node.shutdown().await;
}
