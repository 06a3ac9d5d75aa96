//! Fuzz target: an upload's Flight messages through the bounds check, the IPC decoder and
//! the dataset validator.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sweepflight_server::fuzzing::put_stream(data));
