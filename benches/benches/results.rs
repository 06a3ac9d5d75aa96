//! Criterion benches of the sweep result table on the wire: encoding it as the IPC stream the
//! `sweep` action sends, then decoding it as a client does.
//!
//! Inside the timer: `ipc_stream_bodies` (encode), or `StreamReader` over the concatenated
//! bodies (decode). Outside: the table, made once by the server's own sweep ([`Engine`]) of
//! 1, 80 and 100,000 hma_sar combos on a 64-bar series (every metric column filled as in a
//! real reply). Throughput: combos. The decoded table is checked against the encoded one
//! before timing.

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sweepflight_protocol::SweepRequest;
use sweepflight_server::{Engine, MAX_RESULT_BODY, ServerConfig, ipc_stream_bodies};

fn decode(bodies: &[bytes::Bytes]) -> RecordBatch {
    let joined = bodies.concat();
    let mut reader =
        arrow_ipc::reader::StreamReader::try_new(joined.as_slice(), None).expect("stream");
    reader.next().expect("one batch").expect("valid batch")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let engine = Engine::in_memory(ServerConfig::default()).expect("an engine");
    let close: Float64Array = (0..64).map(|i| 100.0 + f64::from(i).sin()).collect();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "close",
        DataType::Float64,
        false,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(close)]).expect("batch");
    rt.block_on(engine.put("tiny", &schema, vec![batch], None))
        .expect("stored");
    let mut group = c.benchmark_group("results");
    for n in [1u32, 80, 100_000] {
        let request = SweepRequest::lengths("tiny", (0..n).map(|i| 1 + i % 500));
        let batch = rt.block_on(engine.sweep(&request)).expect("a table");
        let bodies = ipc_stream_bodies(&batch, MAX_RESULT_BODY, None).expect("encode");
        assert_eq!(decode(&bodies), batch, "round trip");
        group.throughput(Throughput::Elements(u64::from(n)));
        group.bench_function(format!("encode/{n}"), |b| {
            b.iter(|| ipc_stream_bodies(black_box(&batch), MAX_RESULT_BODY, None))
        });
        group.bench_function(format!("decode/{n}"), |b| {
            b.iter_batched(
                || bodies.clone(),
                |bodies| decode(black_box(&bodies)),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
