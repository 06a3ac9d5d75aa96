//! `flight-probe`: one-in-flight latency of small calls from the Rust client
//! (`sweepflight-client`), to separate server cost from client cost in the params-only floor.
//!
//! Usage: `flight-probe URI N [RAW_ECHO_SOCKET]` (URI: grpc://HOST:PORT or grpc+unix://PATH).
//! Needs a dataset `tiny` on the server. With a `raw-echo` socket, an 8-byte raw echo from this
//! process is measured too. Each round makes every call once, in a shuffled order, so the calls
//! share the machine's state alike. Prints JSON: p50/p99 (microseconds) and n for each call.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use anyhow::{Context, ensure};
use sweepflight_client::{Client, Session, SweepRequest};

/// Warm-up rounds, not counted.
const WARMUP: usize = 200;

/// The probed calls; one per variant, so a round can shuffle them.
#[derive(Clone, Copy)]
enum Call {
    Echo,
    Sweep,
    SessionSweep,
    RawEcho,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo-8B",
            Self::Sweep => "sweep-1combo",
            Self::SessionSweep => "session-sweep-1combo",
            Self::RawEcho => "raw-unix-echo-8B",
        }
    }
}

struct Probe {
    client: Client,
    session: Session,
    raw: Option<UnixStream>,
    request: SweepRequest,
}

impl Probe {
    async fn call(&mut self, call: Call) -> anyhow::Result<()> {
        match call {
            Call::Echo => ensure!(self.client.echo("xxxxxxxx").await?.len() == 8),
            Call::Sweep => ensure!(self.client.sweep(&self.request).await?.batch.num_rows() == 1),
            Call::SessionSweep => {
                ensure!(self.session.sweep(&self.request).await?.batch.num_rows() == 1);
            }
            Call::RawEcho => raw_echo(self.raw.as_mut().context("no raw echo socket")?)?,
        }
        Ok(())
    }
}

/// 8 bytes, length-prefixed, through the `raw-echo` server.
fn raw_echo(s: &mut UnixStream) -> anyhow::Result<()> {
    let mut msg = [b'x'; 12];
    msg[..4].copy_from_slice(&8u32.to_le_bytes());
    s.write_all(&msg)?;
    s.read_exact(&mut msg)?;
    ensure!(&msg[4..] == b"xxxxxxxx");
    Ok(())
}

/// A fixed-seed xorshift shuffle: no dependency for a benchmark's call order.
fn shuffle(calls: &mut [Call], state: &mut u64) {
    for i in (1..calls.len()).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        calls.swap(i, (*state % (i as u64 + 1)) as usize);
    }
}

fn pct(xs: &mut [u128], q: f64) -> f64 {
    xs.sort_unstable();
    xs[((xs.len() - 1) as f64 * q).round() as usize] as f64 / 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: flight-probe URI N [RAW_ECHO_SOCKET]";
    let uri = args.get(1).context(usage)?;
    let n: usize = args.get(2).context(usage)?.parse()?;
    let raw = args.get(3).map(UnixStream::connect).transpose()?;
    let mut client = Client::connect(uri).await?;
    let session = client.session().await?;
    let mut calls = vec![Call::Echo, Call::Sweep, Call::SessionSweep];
    if raw.is_some() {
        calls.push(Call::RawEcho);
    }
    let mut probe = Probe {
        client,
        session,
        raw,
        request: SweepRequest::lengths("tiny", [6]),
    };
    let mut lat: Vec<Vec<u128>> = (0..4).map(|_| Vec::with_capacity(n)).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    for round in 0..n + WARMUP {
        shuffle(&mut calls, &mut seed);
        for &call in &calls {
            let t0 = Instant::now();
            probe.call(call).await?;
            if round >= WARMUP {
                lat[call as usize].push(t0.elapsed().as_nanos());
            }
        }
    }
    let mut out = serde_json::Map::new();
    for call in calls {
        let xs = &mut lat[call as usize];
        let (p50, p99) = (pct(xs, 0.5), pct(xs, 0.99));
        out.insert(
            call.name().into(),
            serde_json::json!({"n": n, "p50_us": p50, "p99_us": p99}),
        );
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
