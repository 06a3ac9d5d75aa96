//! Fuzz target: `sweep` bodies, DoExchange commands, tickets, names and descriptors.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sweepflight_server::fuzzing::requests(data));
