//! Fuzz target: formulas of the strategy language (parse, bind, plan, canonical text) and the
//! `explain` of a body holding one.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sweepflight_server::fuzzing::formulas(data));
