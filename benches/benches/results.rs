//! Criterion benches of the sweep result table: building it from kernel results and encoding
//! it as the IPC stream the `sweep` action sends, then decoding it as a client does.
//!
//! Inside the timer: `to_batch` + `ipc_stream_bodies` (encode), or `StreamReader` over the
//! concatenated bodies (decode). Outside: the kernel results, made once. Throughput: combos.
//! The decoded table is checked against the encoded one before timing.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use sweepflight_kernel::{Combo, ComboResult, Execution, Params};
use sweepflight_protocol::Strategy;
use sweepflight_server::compute::{Job, Keep, Runs};
use sweepflight_server::results::{MAX_RESULT_BODY, ipc_stream_bodies, to_batch};

fn inputs(n: usize) -> (Job, Vec<ComboResult>) {
    let params = (0..n)
        .map(|i| Params::HmaSar(Combo::from_length(1 + (i % 500) as u32).expect("valid")))
        .collect();
    let job = Job {
        inputs: Vec::new(),
        names: None,
        strategy: Strategy::HmaSar,
        params,
        exec: Execution::default(),
        periods_per_year: 1.0,
        keep: Keep::NOTHING,
        progress: None,
    };
    let results = (0..n)
        .map(|i| ComboResult {
            pnl: i as f64 * 0.5,
            trades: i as u64,
            wins: i as u64 / 2,
            max_drawdown: 1.0,
            ..Default::default()
        })
        .collect();
    (job, results)
}

fn decode(bodies: &[bytes::Bytes]) -> arrow_array::RecordBatch {
    let joined = bodies.concat();
    let mut reader =
        arrow_ipc::reader::StreamReader::try_new(joined.as_slice(), None).expect("stream");
    reader.next().expect("one batch").expect("valid batch")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("results");
    for n in [1usize, 80, 100_000] {
        let (job, results) = inputs(n);
        let results = Runs {
            results: vec![results],
            records: Vec::new(),
        };
        let batch = to_batch(&job, &results).expect("batch");
        let bodies = ipc_stream_bodies(&batch, MAX_RESULT_BODY, None).expect("encode");
        assert_eq!(decode(&bodies), batch, "round trip");
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("encode/{n}"), |b| {
            b.iter(|| {
                ipc_stream_bodies(
                    &to_batch(black_box(&job), &results).expect("batch"),
                    MAX_RESULT_BODY,
                    None,
                )
            })
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
