//! Persistence against the real binary: datasets come back after a restart, and after
//! `kill -9` at random moments (mid-upload included) every acknowledged dataset is back
//! byte-identical and nothing partial is visible.

use std::path::Path;
use std::sync::Arc;

use crate::common::{BinaryServer as TestServer, action, infos, put, rows};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_flight::FlightClient;

fn start(dir: &Path) -> TestServer {
    TestServer::start(&["--data-dir", dir.to_str().unwrap()])
}

/// The dataset a put of content `id` uploads: a timestamp column and closes, both derived
/// from `id`, in batches of 50,000 rows. Sizes vary so that some uploads take a while.
fn content(id: u64) -> Vec<RecordBatch> {
    let rows = 1_000 + (id.wrapping_mul(7_919) % 300_000) as usize;
    let t = Int64Array::from_iter_values((0..rows as i64).map(|i| i * 60 + id as i64));
    let close = Float64Array::from_iter_values(
        (0..rows).map(|i| 100.0 + ((i as f64) * 0.01 + id as f64).sin()),
    );
    let batch = RecordBatch::try_from_iter([
        ("t", Arc::new(t) as ArrayRef),
        ("close", Arc::new(close) as ArrayRef),
    ])
    .unwrap();
    (0..rows)
        .step_by(50_000)
        .map(|start| batch.slice(start, (rows - start).min(50_000)))
        .collect()
}

/// Stops `server` gracefully (its shutdown waits for open connections, so `client` goes first)
/// and starts a new one on the same directory.
async fn restart(
    mut server: TestServer,
    client: FlightClient,
    dir: &Path,
) -> (TestServer, FlightClient) {
    drop(client);
    assert!(
        server
            .process()
            .terminate(std::time::Duration::from_secs(30))
            .is_some()
    );
    let server = start(dir);
    let client = server.client().await;
    (server, client)
}

/// Every stored dataset's rows, concatenated, by name.
async fn stored(client: &mut FlightClient) -> Vec<(String, RecordBatch)> {
    let mut out = Vec::new();
    for info in infos(client).await {
        let name = info.flight_descriptor.as_ref().unwrap().path[0].clone();
        out.push((name, rows(client, &info).await));
    }
    out
}

fn concat(batches: &[RecordBatch]) -> RecordBatch {
    arrow_select::concat::concat_batches(&batches[0].schema(), batches).unwrap()
}

// Multi-threaded so the client's connection task runs (and closes) while the test thread
// blocks waiting for the server to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datasets_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = server.client().await;
    put(&mut c, "a", content(1)).await.unwrap();
    put(&mut c, "b", content(2)).await.unwrap();
    let replaced = put(&mut c, "a", content(3)).await.unwrap();
    assert_eq!(replaced["version"], 2);
    action(&mut c, "drop", "b").await.unwrap();
    let (_server, mut c) = restart(server, c, dir.path()).await;
    let found = stored(&mut c).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "a");
    assert_eq!(found[0].1, concat(&content(3)));
    // Versions continue where they were.
    assert_eq!(put(&mut c, "a", content(4)).await.unwrap()["version"], 3);
    let files = std::fs::read_dir(dir.path().join("datasets"))
        .unwrap()
        .count();
    assert_eq!(files, 1, "one file per dataset once a replace is done");
}

/// A universe keyed by a dictionary column whose dictionary is replaced from batch to batch (as
/// pyarrow sends a table whose chunks were built apart) comes back after a restart as it was
/// served before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_universe_with_replaced_dictionaries_survives_a_restart() {
    use arrow_array::DictionaryArray;
    use arrow_array::types::Int8Type;
    use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
    use futures::TryStreamExt;

    let batch = |names: &[&str], keys: &[i8], first: usize| {
        let symbol = DictionaryArray::<Int8Type>::try_new(
            keys.iter().copied().collect(),
            Arc::new(arrow_array::StringArray::from(names.to_vec())),
        )
        .unwrap();
        let close =
            Float64Array::from_iter_values((first..first + keys.len()).map(|i| 100.0 + i as f64));
        RecordBatch::try_from_iter([
            ("symbol", Arc::new(symbol) as ArrayRef),
            ("close", Arc::new(close) as ArrayRef),
        ])
        .unwrap()
    };
    // A and B; then a replacement (C and A, A at another key); then one that neither equals
    // nor extends what came before; then the same dictionary again.
    let batches = vec![
        batch(&["A", "B"], &[0, 0, 1, 1], 0),
        batch(&["C", "A"], &[0, 0, 1], 4),
        batch(&["D", "B", "C"], &[2, 1, 0, 0], 7),
        batch(&["D", "B", "C"], &[0, 1], 11),
    ];
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = server.client().await;
    let descriptor = arrow_flight::FlightDescriptor::new_cmd(
        serde_json::json!({"dataset": "u", "key": "symbol"}).to_string(),
    );
    let upload = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(descriptor))
        .with_dictionary_handling(DictionaryHandling::Resend)
        .build(futures::stream::iter(batches.into_iter().map(Ok)));
    let results: Vec<_> = c.do_put(upload).await.unwrap().try_collect().await.unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&results[0].app_metadata).unwrap();
    assert_eq!(
        (meta["rows"].as_u64(), meta["series"].as_u64()),
        (Some(13), Some(4))
    );
    let before = stored(&mut c).await;
    let (_server, mut c) = restart(server, c, dir.path()).await;
    assert_eq!(stored(&mut c).await, before);
    let info = &infos(&mut c).await[0];
    let meta: serde_json::Value = serde_json::from_slice(&info.app_metadata).unwrap();
    assert_eq!(
        (meta["key"].as_str(), meta["series"].as_u64()),
        (Some("symbol"), Some(4))
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("quarantine"))
            .unwrap()
            .count(),
        0,
        "nothing quarantined"
    );
}

#[test]
fn a_second_server_on_the_same_directory_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let _first = start(dir.path());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sweepflight-server"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by another sweepflight-server"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_corrupt_file_is_quarantined_and_the_rest_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let mut c = server.client().await;
    put(&mut c, "good", content(5)).await.unwrap();
    put(&mut c, "bad", content(6)).await.unwrap();
    server.process().kill();
    let bad = std::fs::read_dir(dir.path().join("datasets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("bad."))
        .unwrap();
    let mut bytes = std::fs::read(&bad).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&bad, bytes).unwrap();

    let server = start(dir.path());
    let mut c = server.client().await;
    let found = stored(&mut c).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0], ("good".to_owned(), concat(&content(5))));
    assert_eq!(
        std::fs::read_dir(dir.path().join("quarantine"))
            .unwrap()
            .count(),
        1
    );
}

/// What a writer's dataset is: absent or a content id.
type State = Option<u64>;

/// One writer owns one name and changes it in sequence: puts of new content, sometimes a drop.
/// Returns the state after its last acknowledged operation and, if an operation was cut off by
/// the kill, the state that operation would have produced.
async fn writer(
    uri: String,
    name: String,
    mut acked: State,
    mut rng: Rng,
) -> (State, Option<State>) {
    // A call still waiting long after the server was killed is cut off like one that failed
    // (its fate unknown either way): a connection that died mid-stream has been seen to leave
    // a call waiting with nothing left to wake it, and the test must end, not hang.
    const CUT_OFF: std::time::Duration = std::time::Duration::from_secs(30);
    let endpoint =
        tonic::transport::Channel::from_shared(uri.replace("grpc://", "http://")).unwrap();
    let Ok(Ok(channel)) = tokio::time::timeout(CUT_OFF, endpoint.connect()).await else {
        return (acked, None);
    };
    let mut client = FlightClient::new(channel);
    loop {
        let next: State = if acked.is_some() && rng.below(5) == 0 {
            None
        } else {
            Some(rng.next())
        };
        let call = async {
            match next {
                Some(id) => put(&mut client, &name, content(id)).await.map(drop),
                None => action(&mut client, "drop", name.clone()).await.map(drop),
            }
        };
        match tokio::time::timeout(CUT_OFF, call).await {
            Ok(Ok(())) => acked = next,
            Ok(Err(_)) | Err(_) => return (acked, Some(next)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing_acknowledged() {
    const ROUNDS: usize = 24;
    const WRITERS: usize = 4;
    let seed = std::env::var("SWEEPFLIGHT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("SWEEPFLIGHT_SEED={seed}");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..WRITERS).map(|w| format!("w{w}")).collect();
    let mut expected: Vec<State> = vec![None; WRITERS];
    let mut cut_off_puts = 0;
    for round in 0..ROUNDS {
        let mut server = start(dir.path());
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                tokio::spawn(writer(
                    server.uri().to_owned(),
                    names[w].clone(),
                    expected[w],
                    Rng(rng.next() | 1),
                ))
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(5 + rng.below(400))).await;
        server.process().kill();
        let mut allowed = Vec::new();
        for task in tasks {
            let (acked, cut_off) = task.await.unwrap();
            cut_off_puts += usize::from(matches!(cut_off, Some(Some(_))));
            allowed.push((acked, cut_off));
        }

        let server = start(dir.path());
        let mut c = server.client().await;
        let found = stored(&mut c).await;
        for name in found.iter().map(|(n, _)| n) {
            assert!(
                names.contains(name),
                "round {round}: unexpected dataset {name}"
            );
        }
        for (w, (acked, cut_off)) in allowed.into_iter().enumerate() {
            let now = found.iter().find(|(n, _)| *n == names[w]).map(|(_, b)| b);
            let state = match now {
                None => None,
                Some(batch) => {
                    // Byte-identical to one of the two states the writer may have left.
                    let id = [acked, cut_off.flatten()]
                        .into_iter()
                        .flatten()
                        .find(|&id| concat(&content(id)) == *batch);
                    assert!(
                        id.is_some(),
                        "round {round}: {} holds data no acknowledged or cut-off put sent",
                        names[w]
                    );
                    id
                }
            };
            assert!(
                state == acked || Some(state) == cut_off,
                "round {round}: {} is {state:?}; acknowledged {acked:?}, cut off {cut_off:?}",
                names[w]
            );
            expected[w] = state;
        }
        let tmp = std::fs::read_dir(dir.path().join("tmp")).unwrap().count();
        assert_eq!(
            tmp, 0,
            "round {round}: unfinished uploads are cleared at start"
        );
        let quarantined = std::fs::read_dir(dir.path().join("quarantine"))
            .unwrap()
            .count();
        assert_eq!(
            quarantined, 0,
            "round {round}: a crash must never leave a corrupt file"
        );
        let files = std::fs::read_dir(dir.path().join("datasets"))
            .unwrap()
            .count();
        assert_eq!(
            files,
            found.len(),
            "round {round}: one file per dataset after start"
        );
        drop(server);
    }
    assert!(
        cut_off_puts > 0,
        "no kill landed during a put; the test did not test that"
    );
    println!("{ROUNDS} rounds, {cut_off_puts} puts cut off by kill -9");
}

/// xorshift64: reproducible from the printed seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
