//! Jobs (protocol v1.2): `submit`, `status`, `cancel` and DoGet of `{"job": ID}`, and the
//! standard Flight verbs for the same (PollFlightInfo, CancelFlightInfo), against a real
//! server: a job's result equals the direct call's, progress never falls, cancel frees the
//! memory before it answers, the limits hold, results expire, and compressed replies carry the
//! same rows.

use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_flight::{CancelFlightInfoRequest, CancelStatus, FlightClient, FlightDescriptor, Ticket};
use futures::TryStreamExt;
use serde_json::{Value, json};
use tonic::Code;

use crate::common::*;

pub(crate) async fn submit(c: &mut FlightClient, body: &Value) -> String {
    let reply: Value =
        serde_json::from_slice(&action(c, "submit", body.to_string()).await.unwrap()).unwrap();
    assert_eq!(reply["state"], "queued", "{reply}");
    reply["job"].as_str().unwrap().to_owned()
}

async fn status(
    c: &mut FlightClient,
    job: &str,
) -> Result<Value, arrow_flight::error::FlightError> {
    let body = json!({"job": job}).to_string();
    Ok(serde_json::from_slice(&action(c, "status", body).await?).unwrap())
}

pub(crate) async fn fetch(
    c: &mut FlightClient,
    job: &str,
) -> Result<RecordBatch, arrow_flight::error::FlightError> {
    let ticket = Ticket::new(json!({"job": job}).to_string());
    let batches: Vec<RecordBatch> = c.do_get(ticket).await?.try_collect().await?;
    Ok(arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap())
}

/// Polls until the job has ended; every status seen, in order.
pub(crate) async fn wait(c: &mut FlightClient, job: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    loop {
        let s = status(c, job).await.unwrap();
        let end = ["done", "failed", "cancelled"].contains(&s["state"].as_str().unwrap());
        seen.push(s);
        if end {
            return seen;
        }
        assert!(Instant::now() < deadline, "job {job} did not end: {seen:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A grid long enough to be cancelled while it runs (seconds on the optimised kernel).
fn long_grid() -> Value {
    json!({"dataset": "paper", "strategy": "sma_cross",
           "grid": {"fast": (1..200).collect::<Vec<_>>(), "slow": (2..300).collect::<Vec<_>>()}})
}

async fn reserved(c: &mut FlightClient) -> i64 {
    let s: Value = serde_json::from_slice(&action(c, "stats", "").await.unwrap()).unwrap();
    s["sweep_reserved_bytes"].as_i64().unwrap()
}

#[tokio::test]
async fn a_job_answers_what_its_action_answers_and_progress_never_falls() {
    let server = TestServer::with(|c| c.job_ttl = Duration::from_millis(300)).await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    let bodies = [
        json!({"dataset": "paper", "lengths": (6..200).step_by(3).collect::<Vec<_>>()}),
        json!({"dataset": "paper", "strategy": "ema_cross", "grid": {"fast": [5, 10, 20], "slow": [50, 100]},
               "order_by": "sharpe", "top": 2, "action": "trades", "side": "long"}),
        json!({"dataset": "paper", "strategy": "donchian", "params": [[20], [55]], "action": "equity", "rows": [1000, 5000]}),
        json!({"dataset": "paper", "strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [50, 100]},
               "folds": {"train": 40000, "test": 20000}, "select": {"by": "sharpe"}, "action": "walk_forward"}),
    ];
    for body in bodies {
        let kind = body
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("sweep")
            .to_owned();
        let mut direct = body.clone();
        direct.as_object_mut().unwrap().remove("action");
        let want = table(&mut c, &kind, &direct).await.unwrap();
        let job = submit(&mut c, &body).await;
        let seen = wait(&mut c, &job).await;
        let last = seen.last().unwrap();
        assert_eq!(last["state"], "done", "{kind}: {last}");
        assert_eq!(last["action"], kind.as_str());
        assert_eq!(last["progress"], 1.0);
        assert_eq!(last["combos_done"], last["combos_total"], "{last}");
        assert!(last["combos_total"].as_u64().unwrap() > 0, "{last}");
        let progress: Vec<f64> = seen
            .iter()
            .map(|s| s["progress"].as_f64().unwrap())
            .collect();
        assert!(
            progress.windows(2).all(|w| w[0] <= w[1]),
            "{kind}: progress fell: {progress:?}"
        );
        assert!(
            seen.iter()
                .all(|s| ["queued", "running", "done"].contains(&s["state"].as_str().unwrap())),
            "{kind}: {seen:?}"
        );
        assert_eq!(
            fetch(&mut c, &job).await.unwrap(),
            want,
            "{kind}: the job's rows"
        );
        // Fetched: kept for the time to live (fetched again meanwhile), then forgotten.
        assert_eq!(
            fetch(&mut c, &job).await.unwrap(),
            want,
            "{kind}: fetched twice"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let gone = status(&mut c, &job).await.unwrap_err();
        assert_eq!(code(&gone), Code::NotFound, "{gone}");
        assert_eq!(
            code(&fetch(&mut c, &job).await.unwrap_err()),
            Code::NotFound
        );
    }
}

#[tokio::test]
async fn queued_and_running_jobs_cancel_and_free_their_memory() {
    // Room for one long sweep at a time: the second job waits in the queue.
    let server = TestServer::with(|c| {
        c.sweep_memory_bytes = 64 << 20;
        c.threads = Some(2);
    })
    .await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    let first = submit(&mut c, &long_grid()).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&mut c, &first).await.unwrap()["state"] != "running" {
        assert!(Instant::now() < deadline, "never started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let second = submit(&mut c, &long_grid()).await;
    let s = status(&mut c, &second).await.unwrap();
    assert_eq!(s["state"], "queued", "{s}");
    // Not done: no result yet.
    for job in [&first, &second] {
        let e = fetch(&mut c, job).await.unwrap_err();
        assert_eq!(code(&e), Code::FailedPrecondition, "{e}");
    }
    let stats: Value = serde_json::from_slice(&action(&mut c, "stats", "").await.unwrap()).unwrap();
    assert_eq!(stats["jobs_running"], 1, "{stats}");
    assert_eq!(stats["jobs_queued"], 1, "{stats}");
    assert_eq!(stats["jobs"].as_array().unwrap().len(), 2, "{stats}");
    // Progress moves while the first runs (the kernel reports as it goes).
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&mut c, &first).await.unwrap()["combos_done"] == 0 {
        assert!(Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The queued one leaves the queue; the running one stops, and its memory is back when
    // the cancel answers.
    let cancelled: Value = serde_json::from_slice(
        &action(&mut c, "cancel", json!({"job": second}).to_string())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(reserved(&mut c).await > 0);
    let cancelled: Value = serde_json::from_slice(
        &action(&mut c, "cancel", json!({"job": first}).to_string())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(
        cancelled["combos_done"].as_u64().unwrap() < cancelled["combos_total"].as_u64().unwrap()
    );
    assert_eq!(reserved(&mut c).await, 0, "memory held after cancel");
    let e = fetch(&mut c, &first).await.unwrap_err();
    assert_eq!(code(&e), Code::FailedPrecondition, "{e}");
    assert!(e.to_string().contains("cancelled"), "{e}");
    // The server goes on serving.
    let b = sweep(&mut c, json!({"dataset": "paper", "lengths": [20]}))
        .await
        .unwrap();
    assert_eq!(b.num_rows(), 1);
}

#[tokio::test]
async fn max_jobs_failed_jobs_and_a_client_that_goes_away() {
    let server = TestServer::with(|c| {
        c.max_jobs = 2;
        c.max_trade_combos = 3;
    })
    .await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    // Submitted by a client that disconnects at once: the job runs on.
    let job = {
        let mut gone = server.client().await;
        submit(
            &mut gone,
            &json!({"dataset": "paper", "lengths": [20, 40, 60]}),
        )
        .await
    };
    let long = submit(&mut c, &long_grid()).await;
    let e = action(
        &mut c,
        "submit",
        json!({"dataset": "paper", "lengths": [6]}).to_string(),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&e), Code::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("--max-jobs"), "{e}");
    assert_eq!(wait(&mut c, &job).await.last().unwrap()["state"], "done");
    let want = sweep(&mut c, json!({"dataset": "paper", "lengths": [20, 40, 60]}))
        .await
        .unwrap();
    assert_eq!(fetch(&mut c, &job).await.unwrap(), want);
    action(&mut c, "cancel", json!({"job": long}).to_string())
        .await
        .unwrap();
    // A job whose failure shows only when it runs: more chosen combos than --max-trade-combos.
    let failing = submit(
        &mut c,
        &json!({"dataset": "paper", "lengths": [10, 20, 30, 40, 50], "where": {"trades": [0, null]}, "action": "trades"}),
    )
    .await;
    let last = wait(&mut c, &failing).await.pop().unwrap();
    assert_eq!(last["state"], "failed", "{last}");
    assert_eq!(last["code"], "INVALID_ARGUMENT", "{last}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("--max-trade-combos"),
        "{last}"
    );
    let e = fetch(&mut c, &failing).await.unwrap_err();
    assert_eq!(code(&e), Code::InvalidArgument, "{e}");
    // A failed job holds nothing: with the fetched one (kept for its time to live), one more
    // fits.
    submit(&mut c, &json!({"dataset": "paper", "lengths": [6]})).await;
}

#[tokio::test]
async fn poll_flight_info_runs_a_job_and_cancel_flight_info_stops_one() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    let body = json!({"dataset": "paper", "strategy": "rsi_revert", "grid": {"n": [7, 14], "lower": [25, 30], "upper": [70, 75]}});
    let want = sweep(&mut c, body.clone()).await.unwrap();
    let mut poll = c
        .poll_flight_info(FlightDescriptor::new_cmd(body.to_string()))
        .await
        .unwrap();
    let mut progress = 0.0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(next) = poll.flight_descriptor.clone() {
        assert!(poll.info.is_none());
        assert!(poll.expiration_time.is_some());
        let p = poll.progress.unwrap();
        assert!((progress..=1.0).contains(&p), "{p} after {progress}");
        progress = p;
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
        poll = c.poll_flight_info(next).await.unwrap();
    }
    assert_eq!(poll.progress, Some(1.0));
    let info = poll.info.expect("a done job's FlightInfo");
    assert_eq!(info.total_records, want.num_rows() as i64);
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let got: Vec<RecordBatch> = c.do_get(ticket).await.unwrap().try_collect().await.unwrap();
    assert_eq!(
        arrow_select::concat::concat_batches(&got[0].schema(), &got).unwrap(),
        want
    );

    // CancelFlightInfo on a long one: cancelled, and polling it says so.
    let poll = c
        .poll_flight_info(FlightDescriptor::new_cmd(long_grid().to_string()))
        .await
        .unwrap();
    let next = poll.flight_descriptor.clone().unwrap();
    let info = arrow_flight::FlightInfo::new().with_descriptor(next.clone());
    let result = c
        .cancel_flight_info(CancelFlightInfoRequest::new(info))
        .await
        .unwrap();
    assert_eq!(result.status(), CancelStatus::Cancelled);
    let e = c.poll_flight_info(next).await.unwrap_err();
    assert_eq!(code(&e), Code::Cancelled, "{e}");
    assert_eq!(reserved(&mut c).await, 0);
}

#[tokio::test]
async fn compressed_replies_carry_the_same_rows() {
    let server =
        TestServer::with(|c| c.reply_compression = Some(sweepflight_protocol::Compression::Lz4))
            .await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    let body = json!({"dataset": "paper", "lengths": (6..200).collect::<Vec<_>>()});
    let plain = sweep(&mut c, body.clone()).await.unwrap();
    for compression in ["zstd", "lz4"] {
        let mut asked = body.clone();
        asked["compression"] = compression.into();
        assert_eq!(
            sweep(&mut c, asked.clone()).await.unwrap(),
            plain,
            "{compression}"
        );
        asked["action"] = "sweep".into();
        let job = submit(&mut c, &asked).await;
        wait(&mut c, &job).await;
        assert_eq!(
            fetch(&mut c, &job).await.unwrap(),
            plain,
            "{compression} job"
        );
    }
    // DoGet of the stored rows under --reply-compression: the same rows.
    let info = infos(&mut c).await.remove(0);
    let stored = rows(&mut c, &info).await;
    let sent: Vec<f64> = paper_batches()
        .iter()
        .flat_map(|b| f64s(b, "close"))
        .collect();
    assert_eq!(f64s(&stored, "close"), sent);
}
