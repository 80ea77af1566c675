//! `leaf-chaos check` on hand-made histories.
use serde_json::json;

fn planted_op(op: u64, node: u64, mode: &str, at_ms: u64, ids: &[i64]) -> [serde_json::Value; 2] {
    let tag = if mode == "segment" { json!("t") } else { serde_json::Value::Null };
    let base = json!({"op": op, "process": op, "mode": mode, "node": node, "count": ids.len()});
    let mut inv = base.clone();
    inv["type"] = json!("invoke");
    inv["time_ns"] = json!(at_ms * 1_000_000);
    let mut ok = base;
    ok["type"] = json!("ok");
    ok["time_ns"] = json!((at_ms + 1) * 1_000_000);
    ok["status"] = json!(200);
    ok["ids"] = json!(ids);
    if !tag.is_null() {
        inv["tag"] = tag.clone();
        ok["tag"] = tag;
    }
    [inv, ok]
}

/// `leaf-chaos check DIR` on hand-made histories: a clean one passes (exit 0); one with a
/// planted duplicate, an order violation and an ID outside its node's allocation is reported
/// item by item and exits 1.
#[test]
fn the_checker_reports_planted_violations_and_exits_1() {
    let write = |events: &[serde_json::Value]| {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = vec![json!({"type": "meta", "seed": 5, "nodes": 2, "wall_start_ms": 1_800_000_000_000i64,
            "epoch_ms": 1_288_834_974_657i64, "faults": [], "warmup_ms": 0, "faults_ms": 0, "after_ms": 0})];
        lines.push(json!({"type": "phase", "time_ns": 0, "phase": "warmup"}));
        lines.extend(events.iter().cloned());
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(dir.path().join("history.jsonl"), text.join("\n")).unwrap();
        // Node 1 owns [1, 100), node 2 owns [100, 200).
        let journal = json!([{"node_id": 1, "complete_from_index": 0, "complete_through_index": 4, "allocations": [
            {"tag": "t", "node_id": 1, "start": 1, "end": 100, "log_index": 3, "at_ms": 0},
            {"tag": "t", "node_id": 2, "start": 100, "end": 200, "log_index": 4, "at_ms": 0}]}]);
        std::fs::write(dir.path().join("allocations.json"), journal.to_string()).unwrap();
        dir
    };
    let check = |dir: &tempfile::TempDir| {
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_leaf-chaos")).arg("check").arg(dir.path()).output().unwrap();
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string(), results)
    };
    let mut clean = Vec::new();
    clean.extend(planted_op(1, 1, "segment", 10, &[1, 2]));
    clean.extend(planted_op(2, 2, "segment", 10, &[100]));
    clean.extend(planted_op(3, 1, "segment", 20, &[5, 6]));
    let (code, stdout, results) = check(&write(&clean));
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(results["valid"], "true");

    let mut bad = clean.clone();
    // Duplicate: node 2 hands out 100 again, to a concurrent request (so no order is promised
    // between the two and only the duplicate is reported).
    bad.extend(planted_op(4, 2, "segment", 10, &[100]));
    // Order violation: node 1 gave 6 at 20 ms, then 4 to a request invoked at 40 ms.
    bad.extend(planted_op(5, 1, "segment", 40, &[4]));
    // Outside its allocation: node 1 hands out 150, which was committed to node 2.
    bad.extend(planted_op(6, 1, "segment", 50, &[150]));
    let (code, stdout, results) = check(&write(&bad));
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(results["valid"], "false");
    assert!(stdout.contains("duplicates 1  order violations 1  outside allocations 1"), "{stdout}");
    let dup = &results["duplicates"][0];
    assert_eq!(
        (dup["id"].as_i64(), dup["first"]["op"].as_u64(), dup["second"]["op"].as_u64()),
        (Some(100), Some(2), Some(4))
    );
    let order = &results["order_violations"][0];
    assert_eq!((order["earlier"]["op"].as_u64(), order["later"]["op"].as_u64()), (Some(3), Some(5)));
    assert_eq!(results["outside_allocations"][0]["id"], 150);
}
