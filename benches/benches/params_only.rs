//! Criterion benches of the server's own work for one params-only call: a 1-combo sweep of a
//! stored 64-bar dataset (the params-only floor of docs/benchmarks.md), stage by stage.
//!
//! Inside the timer: decoding the JSON body, the store lookup and the sweep with a warm kernel
//! cache (the `sweep` use case through [`Engine`](sweepflight_server::Engine), which runs a sweep this small inline), building the result table,
//! and encoding it for each reply shape (the `sweep` action's IPC stream, a `session`
//! message). Outside: the store and dataset, made once. Everything but the network and
//! gRPC: what the server adds to an echo. The session reply is checked against the action's
//! result before timing.

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::RecordBatch;
use criterion::{Criterion, criterion_group, criterion_main};
use sweepflight_benches::tiny_engine;
use sweepflight_protocol::SweepRequest;
use sweepflight_server::{MAX_RESULT_BODY, SessionEncoder, ipc_stream_bodies};

const BODY: &[u8] = br#"{"dataset": "tiny", "lengths": [6]}"#;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let engine = tiny_engine(&rt);
    // The server's own path from a body to a table: the action's use case (the handler adds
    // only the decoding).
    let sweep = |body: &[u8]| -> RecordBatch {
        let req = SweepRequest::decode(body).expect("valid body");
        rt.block_on(engine.sweep(&req)).expect("sweep")
    };
    let batch = sweep(BODY);
    let mut session = SessionEncoder::default();
    let reply = session.encode(&batch).expect("session reply");
    let decoded = arrow_flight::utils::flight_data_to_arrow_batch(
        &reply,
        Arc::clone(batch.schema_ref()),
        &Default::default(),
    )
    .expect("decodes");
    assert_eq!(decoded, batch, "session reply round trip");

    let mut group = c.benchmark_group("params_only");
    group.bench_function("parse_body", |b| {
        b.iter(|| SweepRequest::decode(black_box(BODY)))
    });
    group.bench_function("parse_sweep_table", |b| b.iter(|| sweep(black_box(BODY))));
    group.bench_function("encode_action_stream", |b| {
        b.iter(|| ipc_stream_bodies(black_box(&batch), MAX_RESULT_BODY, None))
    });
    group.bench_function("encode_session_message", |b| {
        b.iter(|| session.encode(black_box(&batch)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
