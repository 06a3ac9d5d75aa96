//! Replays the fuzz targets' seeds and every input the fuzzer ever crashed on
//! (`flight-server/fuzz/{seeds,regressions}/TARGET/`) through the same entry points, on
//! stable Rust, so a fixed crash stays fixed. See docs/operations.md for running the fuzzer.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use arrow_flight::utils::batches_to_flight_data;
use sweepflight_server::fuzzing;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    ["seeds", "regressions"]
        .iter()
        .flat_map(|kind| std::fs::read_dir(fuzz.join(kind).join(target)).unwrap())
        .map(|e| {
            let path = e.unwrap().path();
            (path.display().to_string(), std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn request_inputs_do_not_panic() {
    let inputs = inputs("requests");
    // Three of them carry execution options (and stop formulas), run on a few bars.
    assert!(inputs.len() >= 9, "seeds missing: {}", inputs.len());
    for (name, data) in inputs {
        eprintln!("{name}");
        fuzzing::requests(&data);
    }
}

#[test]
fn formula_inputs_do_not_panic() {
    let inputs = inputs("formulas");
    assert!(inputs.len() >= 7, "seeds missing: {}", inputs.len());
    for (name, data) in inputs {
        eprintln!("{name}");
        fuzzing::formulas(&data);
    }
}

#[test]
fn upload_inputs_do_not_panic() {
    let inputs = inputs("put_stream");
    assert!(inputs.len() >= 4, "seeds missing: {}", inputs.len());
    for (name, data) in inputs {
        eprintln!("{name}");
        fuzzing::put_stream(&data);
    }
}

/// The first crash the bad-input suite found: a record batch whose body is shorter than its
/// header says made arrow-ipc's decoder slice out of bounds.
#[test]
fn truncated_body_is_an_error_not_a_panic() {
    let batch = RecordBatch::try_from_iter([(
        "close",
        Arc::new(Float64Array::from(vec![1.0; 100])) as ArrayRef,
    )])
    .unwrap();
    let mut msgs = batches_to_flight_data(&batch.schema(), [&batch]).unwrap();
    for cut in [0, 1, 8, 400, 799] {
        msgs[1].data_body = msgs[1].data_body.slice(0..cut.min(msgs[1].data_body.len()));
        fuzzing::put_stream(&fuzzing::frame(&msgs));
    }
}
