//! Criterion benches of the sweep result table on the wire: encoding it as the IPC stream the
//! `sweep` action sends, then decoding it as a client does.
//!
//! Inside the timer: `ipc_stream_bodies` (encode), or `StreamReader` over the concatenated
//! bodies (decode). Outside: the table, made once by the server's own sweep ([`Engine`](sweepflight_server::Engine)) of
//! 1, 80 and 100,000 hma_sar combos on a 64-bar series (every metric column filled as in a
//! real reply). Throughput: combos. The decoded table is checked against the encoded one
//! before timing.

use std::hint::black_box;

use arrow_array::RecordBatch;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sweepflight_benches::tiny_engine;
use sweepflight_protocol::SweepRequest;
use sweepflight_server::{MAX_RESULT_BODY, ipc_stream_bodies};

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
    let engine = tiny_engine(&rt);
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
