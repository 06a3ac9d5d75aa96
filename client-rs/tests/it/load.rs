//! Load: 32 clients at once on loopback, each with a bounded number of operations, mixing
//! put / replace / sweep / drop against one server with a data directory. No call may fail,
//! every sweep must equal the serial kernel's answer for one whole version of its dataset
//! (a replace during a sweep never mixes versions), and the server's peak RSS is reported.

use sweepflight_client::{Client, SweepRequest};
use sweepflight_kernel::{Combo, ComboResult, DEFAULT_FEE, sweep};
use sweepflight_server::testing::TestServer;

const CLIENTS: usize = 32;
const OPS_PER_CLIENT: usize = 24;
const SHARED: usize = 4;
const VARIANTS: u64 = 6;
const BARS: usize = 40_000;
const LENGTHS: [u32; 3] = [6, 24, 80];

/// The series a put of `variant` uploads; every variant gives different sweep results.
fn series(variant: u64) -> Vec<f64> {
    let v = variant as f64;
    (0..BARS)
        .map(|i| {
            let x = i as f64;
            100.0 + (x * (0.011 + v * 0.002)).sin() * (3.0 + v) + (x * 0.0007).cos() * 6.0
        })
        .collect()
}

/// The serial answer for each variant, from the kernel in this process.
fn answers() -> Vec<Vec<ComboResult>> {
    let combos: Vec<Combo> = LENGTHS
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    (0..VARIANTS)
        .map(|v| sweep(&series(v), &combos, DEFAULT_FEE).unwrap())
        .collect()
}

/// Which variant a sweep result is, if it is exactly one of them.
fn variant_of(got: &[ComboResult], answers: &[Vec<ComboResult>]) -> Option<u64> {
    answers.iter().position(|a| a == got).map(|i| i as u64)
}

/// xorshift64, seeded per client.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One client's session; returns how many sweeps it checked.
async fn client(uri: String, id: usize, answers: &[Vec<ComboResult>]) -> usize {
    let mut c = Client::connect(&uri).await.unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1);
    let own = format!("own-{id}");
    let mut own_variant: Option<u64> = None;
    let mut sweeps = 0;
    for op in 0..OPS_PER_CLIENT {
        let shared = format!("shared-{}", next(&mut rng) % SHARED as u64);
        match next(&mut rng) % 6 {
            // Replace a shared dataset others are sweeping.
            0 => {
                let v = next(&mut rng) % VARIANTS;
                c.put_closes(&shared, &series(v)).await.unwrap();
            }
            // Sweep a shared dataset: some whole version, whichever it saw.
            1 | 2 => {
                let got = c
                    .sweep(&SweepRequest::lengths(&shared, LENGTHS))
                    .await
                    .unwrap();
                let v = variant_of(&crate::support::results(&got), answers);
                assert!(
                    v.is_some(),
                    "client {id} op {op}: {shared} gave a result no version gives"
                );
                sweeps += 1;
            }
            // Put or replace its own dataset, then sweep it: exactly that version's answer.
            3 | 4 => {
                let v = next(&mut rng) % VARIANTS;
                c.put_closes(&own, &series(v)).await.unwrap();
                own_variant = Some(v);
                let got = c
                    .sweep(&SweepRequest::lengths(&own, LENGTHS))
                    .await
                    .unwrap();
                assert_eq!(
                    variant_of(&crate::support::results(&got), answers),
                    Some(v),
                    "client {id} op {op}"
                );
                sweeps += 1;
            }
            // Drop its own dataset if it has one.
            _ => {
                if own_variant.take().is_some() {
                    c.drop(&own).await.unwrap();
                }
            }
        }
    }
    sweeps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_clients_mixing_puts_replaces_sweeps_and_drops() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_owned();
    let server = TestServer::start(|c| c.data_dir = Some(data_dir)).await;
    let answers = std::sync::Arc::new(answers());
    let mut c = Client::connect(server.uri()).await.unwrap();
    for s in 0..SHARED {
        c.put_closes(&format!("shared-{s}"), &series(s as u64 % VARIANTS))
            .await
            .unwrap();
    }
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (uri, answers) = (server.uri().to_owned(), std::sync::Arc::clone(&answers));
            tokio::spawn(async move { client(uri, id, &answers).await })
        })
        .collect();
    let mut sweeps = 0;
    for t in tasks {
        sweeps += t.await.expect("a client failed");
    }
    assert!(sweeps >= CLIENTS, "only {sweeps} sweeps ran");
    // Every shared dataset is still one whole version, on the server and after the calls.
    for s in 0..SHARED {
        let got = c
            .sweep(&SweepRequest::lengths(format!("shared-{s}"), LENGTHS))
            .await
            .unwrap();
        assert!(variant_of(&crate::support::results(&got), &answers).is_some());
    }
    // The server runs in this process: its peak is this process's.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(str::trim)
        .unwrap();
    println!(
        "{CLIENTS} clients x {OPS_PER_CLIENT} ops ({sweeps} sweeps checked), {BARS}-bar series: peak RSS of server and clients {peak}"
    );
    assert!(peak.ends_with("kB"), "{peak}");
}
