//! In-process cost of the persisted-record path of one segment allocation: encoding the Raft
//! log entry (versioned, CRC-checked bincode, `leaf_api::codec`), decoding it, and the pure
//! `apply` of the state machine. Baseline: `bincode` alone on the same log entry, without the
//! codec's version header and checksum.
//!
//!   cargo bench -p leaf-raft-store --bench codec
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leaf_api::codec;
use leaf_raft_store::types::Entry;
use leaf_raft_store::{apply, Changes, Command, Op, State};
use openraft::{CommittedLeaderId, EntryPayload, LogId};

fn allocation(at_ms: i64) -> Command {
    Command { at_ms, op: Op::AllocateSegment { tag: "order-service".to_string(), step: 100_000, node_id: 2 } }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Elements(1));
    let entry = Entry {
        log_id: LogId::new(CommittedLeaderId::new(7, 1), 123_456),
        payload: EntryPayload::Normal(allocation(1_795_000_000_000)),
    };
    let bytes = codec::encode(&entry).expect("encode");
    let cmd = allocation(1_795_000_000_000);
    let config = bincode::config::standard();
    g.bench_function("baseline_bincode_encode_log_entry", |b| {
        b.iter(|| bincode::serde::encode_to_vec(std::hint::black_box(&entry), config).expect("encode"))
    });
    g.bench_function("encode_log_entry", |b| b.iter(|| codec::encode(std::hint::black_box(&entry)).expect("encode")));
    g.bench_function("decode_log_entry", |b| {
        b.iter(|| codec::decode::<Entry>(std::hint::black_box(&bytes)).expect("decode"))
    });
    g.bench_function("apply_allocation", |b| {
        let mut state = State::default();
        let create =
            Command { at_ms: 1, op: Op::create_segment_tag("order-service".to_string(), 100_000, 1, String::new()) };
        apply(&mut state, &create, &mut Changes::default()).expect("create tag");
        // max_id grows by one step per apply: 9e18 / 1e5 leaves room for 9e13 iterations.
        b.iter(|| apply(&mut state, std::hint::black_box(&cmd), &mut Changes::default()).expect("apply"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
