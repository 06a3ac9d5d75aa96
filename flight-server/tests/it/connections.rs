//! Connections: capped (`--max-connections`), and closed when silent (`--handshake-timeout`,
//! `--idle-timeout`), while live clients, idle or not, keep theirs.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits until the server closes `s` (EOF or an error), at most `limit`; how long it took.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at((started + limit).into(), s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            // The server's SETTINGS and pings: read past them.
            Ok(Ok(_)) => {}
        }
    }
}

async fn stats(c: &mut arrow_flight::FlightClient) -> serde_json::Value {
    serde_json::from_slice(&action(c, "stats", "").await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_are_closed_past_the_cap_or_the_handshake_timeout() {
    let server = TestServer::with(|c| {
        c.max_connections = 12;
        c.handshake_timeout = Duration::from_millis(400);
        c.idle_timeout = Duration::from_secs(3);
    })
    .await;
    let addr = server.uri().trim_start_matches("grpc://").to_owned();
    // A live client first: it must keep working through all of this.
    let mut live = server.client().await;
    put(&mut live, "s", vec![close_batch(&series(500))])
        .await
        .unwrap();

    // 8 sockets that never speak and 3 that send only the preface fill the cap (with `live`).
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(&addr).await.unwrap());
    }
    for _ in 0..3 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(PREFACE).await.unwrap();
        silent.push(s);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(stats(&mut live).await["connections"], 12);
    // Past the cap: closed at once.
    let mut extra = TcpStream::connect(&addr).await.unwrap();
    let t = closed_within(&mut extra, Duration::from_millis(300)).await;
    assert!(
        t.is_some(),
        "a connection past --max-connections stays open"
    );

    // Every silent one is closed after the handshake timeout, not before, not much after.
    for s in &mut silent {
        let t = closed_within(s, Duration::from_secs(3)).await;
        let t = t.expect("a silent connection is still open after 3 s");
        assert!(t < Duration::from_millis(2_000), "{t:?}");
    }
    let s = stats(&mut live).await;
    assert_eq!(s["connections"], 1, "{s}");
    assert_eq!(s["connections_timed_out"], 11, "{s}");
    assert_eq!(s["connections_refused"], 1, "{s}");

    // The live client, idle for longer than the idle timeout, keeps its connection: it
    // answers the server's keep-alive pings.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let b = sweep(&mut live, json!({"dataset": "s", "lengths": [6]}))
        .await
        .unwrap();
    assert_eq!(b.num_rows(), 1);
    let s = stats(&mut live).await;
    assert_eq!(s["connections"], 1, "{s}");
    assert_eq!(
        s["connections_timed_out"], 11,
        "the live connection was not closed: {s}"
    );
    // And new clients get in again.
    let mut fresh = server.client().await;
    assert_eq!(action(&mut fresh, "echo", "hi").await.unwrap(), b"hi");
}
