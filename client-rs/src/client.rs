//! [`Client`]: the contract's calls as typed async methods.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient, FlightDescriptor, FlightInfo};
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};

use sweepflight_protocol::{
    CANCEL, DROP, DatasetMeta, ECHO, EQUITY, EXPLAIN, JobBody, JobRef, JobStatus, PutSummary,
    PutTarget, STATUS, SUBMIT, SWEEP, SessionReply, Strategy, SweepRequest, TRADES, Ticket,
    WALK_FORWARD, WalkForwardRequest,
};

use crate::connect::{ConnectOptions, channel};
use crate::session::Session;
use crate::types::{DatasetInfo, SweepResult};
use crate::{Error, Result};

/// Rows per uploaded message are chosen to keep messages near this size.
const UPLOAD_MESSAGE_BYTES: usize = 8 << 20;

/// A connection to one sweepflight server.
#[derive(Debug)]
pub struct Client {
    flight: FlightClient,
}

impl Client {
    /// Connects to `grpc://HOST:PORT`, `grpc+tls://HOST:PORT` or `grpc+unix://PATH`.
    ///
    /// # Errors
    /// [`Error::BadUri`] or [`Error::Connect`].
    pub async fn connect(uri: &str) -> Result<Self> {
        Self::connect_with(uri, &ConnectOptions::default()).await
    }

    /// [`Client::connect`] with a token, a TLS CA or a message limit.
    ///
    /// # Errors
    /// [`Error::BadUri`] or [`Error::Connect`].
    pub async fn connect_with(uri: &str, options: &ConnectOptions) -> Result<Self> {
        let channel = channel(uri, options).await?;
        let limit = options.max_message_bytes.unwrap_or(64 << 20);
        let inner = arrow_flight::flight_service_client::FlightServiceClient::new(channel)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        let mut flight = FlightClient::new_from_inner(inner);
        if let Some(token) = &options.token {
            flight.add_header("authorization", &format!("Bearer {token}"))?;
        }
        Ok(Self { flight })
    }

    /// Stores a stream of batches (which must have a `close` column) as dataset `name`.
    ///
    /// # Errors
    /// [`Error::Status`] with INVALID_ARGUMENT (bad name or values, with the first bad row),
    /// RESOURCE_EXHAUSTED (too large), or an error of the input stream.
    pub async fn put_stream<S>(&mut self, name: &str, batches: S) -> Result<PutSummary>
    where
        S: Stream<Item = Result<RecordBatch>> + Send + 'static,
    {
        self.put_to(&PutTarget::dataset(name), batches).await
    }

    /// Stores a keyed universe (protocol v1.1): rows with the same value in column `key` form
    /// one series; series keep the order their keys first appear in, rows their arrival order.
    ///
    /// # Errors
    /// As [`Client::put_stream`]; INVALID_ARGUMENT also for a missing key column, one of
    /// another type, null or empty keys, and a series breaking the close rules (named).
    pub async fn put_keyed(
        &mut self,
        name: &str,
        key: &str,
        batches: Vec<RecordBatch>,
    ) -> Result<PutSummary> {
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        self.put_to(&PutTarget::keyed(name, key), stream).await
    }

    /// Stores a stream of batches where `target` says (a v1 or a keyed put).
    ///
    /// # Errors
    /// As [`Client::put_stream`] and [`Client::put_keyed`].
    pub async fn put_to<S>(&mut self, target: &PutTarget, batches: S) -> Result<PutSummary>
    where
        S: Stream<Item = Result<RecordBatch>> + Send + 'static,
    {
        let batches = batches
            .map(|b| b.map(split_for_upload))
            .map_ok(|parts| futures::stream::iter(parts.into_iter().map(Ok)))
            .try_flatten()
            .map_err(|e: Error| FlightError::ExternalError(Box::new(e)));
        let data = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(target.to_descriptor()))
            .with_max_flight_data_size(UPLOAD_MESSAGE_BYTES + (64 << 10))
            .build(batches);
        let results: Vec<_> = self.flight.do_put(data).await?.try_collect().await?;
        let first = results
            .first()
            .ok_or_else(|| Error::Protocol("no PutResult".into()))?;
        serde_json::from_slice(&first.app_metadata)
            .map_err(|e| Error::Protocol(format!("PutResult metadata: {e}")))
    }

    /// Stores `batches` as dataset `name`.
    ///
    /// # Errors
    /// As [`Client::put_stream`].
    pub async fn put(&mut self, name: &str, batches: Vec<RecordBatch>) -> Result<PutSummary> {
        self.put_stream(name, futures::stream::iter(batches.into_iter().map(Ok)))
            .await
    }

    /// Stores a bare series of closes as dataset `name`. The slice is copied once into an
    /// Arrow column; for data already in Arrow, [`Client::put`] sends the caller's buffers
    /// without a copy.
    ///
    /// # Errors
    /// As [`Client::put_stream`].
    pub async fn put_closes(&mut self, name: &str, closes: &[f64]) -> Result<PutSummary> {
        let col = Arc::new(Float64Array::from(closes.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_from_iter([("close", col)])?;
        self.put(name, vec![batch]).await
    }

    /// Runs one sweep call.
    ///
    /// # Errors
    /// [`Error::Status`] with NOT_FOUND (no such dataset or series) or INVALID_ARGUMENT.
    pub async fn sweep(&mut self, request: &SweepRequest) -> Result<SweepResult> {
        SweepResult::check(self.table(SWEEP, request).await?)
    }

    /// The booked trades of the combos `request` chooses (all of them, or what its `where`,
    /// `order_by` and `top` keep, as [`Client::sweep`] would): \[`series`\], `combo`, `trade`,
    /// `side`, `entry_row`, `exit_row`, `entry_price`, `exit_price`, `pnl`.
    ///
    /// # Errors
    /// As [`Client::sweep`]; INVALID_ARGUMENT past the server's `--max-trade-combos`.
    pub async fn trades(&mut self, request: &SweepRequest) -> Result<RecordBatch> {
        self.table(TRADES, request).await
    }

    /// The mark-to-market equity of the combos `request` chooses, one row per evaluated bar:
    /// \[`series`\], `combo`, `row`, `position`, `equity`.
    ///
    /// # Errors
    /// As [`Client::trades`]; RESOURCE_EXHAUSTED if the curves do not fit the server's budget.
    pub async fn equity(&mut self, request: &SweepRequest) -> Result<RecordBatch> {
        self.table(EQUITY, request).await
    }

    /// Walk-forward in one call: per series and fold, the best combo in-sample (by the
    /// request's `select`, after `where`) and its run on the test rows. One row per series and
    /// fold: \[`series`\], `fold`, the train and test rows, `combo` and its parameters,
    /// `train_score`, the test run's `pnl` .. `sqn` (null where no combo passed `where`).
    ///
    /// # Errors
    /// As [`Client::sweep`]; INVALID_ARGUMENT for folds that fit no series or a train range
    /// shorter than the grid's longest window.
    pub async fn walk_forward(&mut self, request: &WalkForwardRequest) -> Result<RecordBatch> {
        self.action_table(WALK_FORWARD, request.encode()).await
    }

    /// Starts a job (the `sweep`, `trades`, `equity` or `walk_forward` of `body`) and
    /// returns its status at once (queued).
    ///
    /// # Errors
    /// What the action would answer for a bad body, unknown dataset or series, at once;
    /// RESOURCE_EXHAUSTED past the server's `--max-jobs`.
    pub async fn submit(&mut self, body: &JobBody) -> Result<JobStatus> {
        self.job_call(SUBMIT, body.encode()).await
    }

    /// A job's status.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown job or one forgotten after it ended.
    pub async fn status(&mut self, job: &str) -> Result<JobStatus> {
        self.job_call(STATUS, JobRef::new(job).encode()).await
    }

    /// Cancels a job (or drops its result); answers once its memory is free on the server.
    ///
    /// # Errors
    /// As [`Client::status`].
    pub async fn cancel(&mut self, job: &str) -> Result<JobStatus> {
        self.job_call(CANCEL, JobRef::new(job).encode()).await
    }

    /// Polls a job until it ends (a growing interval, from 1 ms to 100 ms), telling
    /// `progress` each status; the last status.
    ///
    /// # Errors
    /// As [`Client::status`].
    pub async fn wait(
        &mut self,
        job: &str,
        mut progress: impl FnMut(&JobStatus),
    ) -> Result<JobStatus> {
        let started = std::time::Instant::now();
        loop {
            let status = self.status(job).await?;
            progress(&status);
            if status.state.is_final() {
                return Ok(status);
            }
            let delay = (started.elapsed() / 10).clamp(
                std::time::Duration::from_millis(1),
                std::time::Duration::from_millis(100),
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// A done job's result (DoGet of its ticket).
    ///
    /// # Errors
    /// FAILED_PRECONDITION while it runs or if it was cancelled; the job's own error if it
    /// failed; NOT_FOUND for an unknown or expired job.
    pub async fn fetch(&mut self, job: &str) -> Result<RecordBatch> {
        let ticket = arrow_flight::Ticket::new(Ticket::job(job).encode());
        let batches: Vec<RecordBatch> = self.flight.do_get(ticket).await?.try_collect().await?;
        let schema = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| Error::Protocol("a job's result without a schema".into()))?;
        Ok(arrow_select::concat::concat_batches(&schema, &batches)?)
    }

    async fn job_call(&mut self, action: &str, body: Vec<u8>) -> Result<JobStatus> {
        let bodies: Vec<Bytes> = self
            .flight
            .do_action(Action::new(action, body))
            .await?
            .try_collect()
            .await?;
        JobStatus::decode(&bodies.concat()).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// An action whose reply is one Arrow IPC stream split over its Result bodies, as one
    /// batch.
    async fn table(&mut self, action: &str, request: &SweepRequest) -> Result<RecordBatch> {
        self.action_table(action, request.encode()).await
    }

    async fn action_table(&mut self, action: &str, body: Vec<u8>) -> Result<RecordBatch> {
        let bodies: Vec<Bytes> = self
            .flight
            .do_action(Action::new(action, body))
            .await?
            .try_collect()
            .await?;
        let stream: Vec<u8> = bodies.concat();
        let reader = arrow_ipc::reader::StreamReader::try_new(stream.as_slice(), None)?;
        let schema = reader.schema();
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(arrow_select::concat::concat_batches(&schema, &batches)?)
    }

    /// Opens a `session`: many sweeps on one open stream, for tight loops of small
    /// params-only sweeps. Each sweep is then a message each way instead of a gRPC call.
    /// A session serves unkeyed datasets; [`Client::keyed_session`] serves keyed ones.
    ///
    /// # Errors
    /// [`Error::Status`] if the server refuses the exchange (UNAUTHENTICATED, for one).
    pub async fn session(&mut self) -> Result<Session> {
        Session::open(
            &mut self.flight,
            false,
            Strategy::default(),
            SessionReply::Sweep,
        )
        .await
    }

    /// Opens a `session` for keyed datasets (replies start with the `series` column).
    ///
    /// # Errors
    /// As [`Client::session`].
    pub async fn keyed_session(&mut self) -> Result<Session> {
        Session::open(
            &mut self.flight,
            true,
            Strategy::default(),
            SessionReply::Sweep,
        )
        .await
    }

    /// Opens a `session` for sweeps of `strategy` (a session's replies have one schema: one
    /// strategy, keyed or not).
    ///
    /// # Errors
    /// As [`Client::session`].
    pub async fn strategy_session(&mut self, strategy: Strategy, keyed: bool) -> Result<Session> {
        Session::open(&mut self.flight, keyed, strategy, SessionReply::Sweep).await
    }

    /// Opens a `session` whose messages are answered as the `reply` action answers them
    /// ([`Session::trades`], [`Session::equity`], [`Session::walk_forward`]), for `strategy`
    /// (keyed datasets if `keyed`).
    ///
    /// # Errors
    /// As [`Client::session`].
    pub async fn action_session(
        &mut self,
        reply: SessionReply,
        strategy: Strategy,
        keyed: bool,
    ) -> Result<Session> {
        Session::open(&mut self.flight, keyed, strategy, reply).await
    }

    /// Runs a large sweep as calls of at most `chunk` combos, in sequence; `progress` is told
    /// how many combos are done after each call. The result equals one big call.
    ///
    /// # Errors
    /// As [`Client::sweep`], from the first call that fails.
    pub async fn sweep_chunked(
        &mut self,
        request: &SweepRequest,
        chunk: usize,
        mut progress: impl FnMut(usize),
    ) -> Result<SweepResult> {
        let mut parts = Vec::new();
        let mut done = 0;
        let chunks = request
            .chunks(chunk)
            .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        for part in &chunks {
            let part = part.clone();
            let mut result = self.sweep(&part).await?;
            if done > 0 {
                result.batch = offset_combo(&result.batch, done as i64)?;
            }
            done += part.len();
            progress(done);
            parts.push(result);
        }
        let keyed = parts[0].is_keyed();
        let schema = parts[0].batch.schema();
        let batches: Vec<RecordBatch> = parts.into_iter().map(|p| p.batch).collect();
        let sizes: Vec<usize> = chunks.iter().map(SweepRequest::len).collect();
        let all = arrow_select::concat::concat_batches(&schema, &batches)?;
        SweepResult::check(if keyed {
            series_major(&all, &sizes)?
        } else {
            all
        })
    }

    /// Every stored dataset.
    ///
    /// # Errors
    /// [`Error::Status`] if the server refuses.
    pub async fn list(&mut self) -> Result<Vec<DatasetInfo>> {
        let infos: Vec<FlightInfo> = self
            .flight
            .list_flights(Bytes::new())
            .await?
            .try_collect()
            .await?;
        infos.into_iter().map(dataset_info).collect()
    }

    /// One dataset's description.
    ///
    /// # Errors
    /// [`Error::Status`] with NOT_FOUND.
    pub async fn info(&mut self, name: &str) -> Result<DatasetInfo> {
        dataset_info(self.flight_info(name).await?)
    }

    /// The stored rows of a dataset.
    ///
    /// # Errors
    /// [`Error::Status`] with NOT_FOUND.
    pub async fn get(&mut self, name: &str) -> Result<Vec<RecordBatch>> {
        let info = self.flight_info(name).await?;
        let ticket = info
            .endpoint
            .first()
            .and_then(|e| e.ticket.clone())
            .ok_or_else(|| Error::Protocol("FlightInfo without a ticket".into()))?;
        Ok(self.flight.do_get(ticket).await?.try_collect().await?)
    }

    /// Removes a dataset; returns the version that was dropped (if the server says).
    ///
    /// # Errors
    /// [`Error::Status`] with NOT_FOUND.
    pub async fn drop(&mut self, name: &str) -> Result<Option<u64>> {
        let bodies: Vec<Bytes> = self
            .flight
            .do_action(Action::new(DROP, name.to_owned()))
            .await?
            .try_collect()
            .await?;
        Ok(bodies
            .first()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .and_then(|v| v["version"].as_u64()))
    }

    /// The plan of `request`, nothing run (the `explain` action, protocol v1.3): its
    /// parameters with their kinds, canonical formulas, combos after the constraint, lookback,
    /// distinct arrays and the columns it reads, as the server's JSON.
    ///
    /// # Errors
    /// [`Error::Status`] with INVALID_ARGUMENT for a body or formula the server refuses.
    pub async fn explain(&mut self, request: &SweepRequest) -> Result<serde_json::Value> {
        let bodies: Vec<Bytes> = self
            .flight
            .do_action(Action::new(EXPLAIN, request.encode()))
            .await?
            .try_collect()
            .await?;
        serde_json::from_slice(&bodies.concat())
            .map_err(|e| Error::Protocol(format!("explain reply is not JSON: {e}")))
    }

    /// Round trip of `data` through the `echo` action.
    ///
    /// # Errors
    /// [`Error::Status`] if the server refuses.
    pub async fn echo(&mut self, data: impl Into<Bytes>) -> Result<Bytes> {
        let bodies: Vec<Bytes> = self
            .flight
            .do_action(Action::new(ECHO, data.into()))
            .await?
            .try_collect()
            .await?;
        Ok(bodies.concat().into())
    }

    async fn flight_info(&mut self, name: &str) -> Result<FlightInfo> {
        Ok(self
            .flight
            .get_flight_info(FlightDescriptor::new_path(vec![name.to_owned()]))
            .await?)
    }
}

/// Large batches go as several messages of about [`UPLOAD_MESSAGE_BYTES`].
fn split_for_upload(batch: RecordBatch) -> Vec<RecordBatch> {
    let rows = batch.num_rows();
    let per_row = (batch.get_array_memory_size() / rows.max(1)).max(1);
    let chunk = (UPLOAD_MESSAGE_BYTES / per_row).max(1);
    if rows <= chunk {
        return vec![batch];
    }
    (0..rows)
        .step_by(chunk)
        .map(|s| batch.slice(s, chunk.min(rows - s)))
        .collect()
}

fn offset_combo(batch: &RecordBatch, offset: i64) -> Result<RecordBatch> {
    let index = batch
        .schema()
        .index_of("combo")
        .map_err(|_| Error::Protocol("no column `combo`".into()))?;
    let combo = batch
        .column(index)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| Error::Protocol("`combo` is not int64".into()))?;
    let shifted: Int64Array = combo.iter().map(|v| v.map(|v| v + offset)).collect();
    let mut columns = batch.columns().to_vec();
    columns[index] = Arc::new(shifted);
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// Chunks of a keyed sweep come back series-major within each chunk; one call would answer
/// series-major over the whole grid. Reorders the concatenated chunks (`sizes` combos each)
/// to that order.
fn series_major(all: &RecordBatch, sizes: &[usize]) -> Result<RecordBatch> {
    let total: usize = sizes.iter().sum();
    let series = all.num_rows().checked_div(total).unwrap_or(0);
    let mut order = Vec::with_capacity(all.num_rows());
    for s in 0..series {
        let mut start = 0;
        for &n in sizes {
            // Chunk `c` occupies rows start*series.. of the concatenation, series-major.
            let base = start * series + s * n;
            order.extend((base..base + n).map(|i| i as u32));
            start += n;
        }
    }
    let order = arrow_array::UInt32Array::from(order);
    Ok(arrow_select::take::take_record_batch(all, &order)?)
}

fn dataset_info(info: FlightInfo) -> Result<DatasetInfo> {
    let name = info
        .flight_descriptor
        .as_ref()
        .and_then(|d| d.path.first().cloned())
        .ok_or_else(|| Error::Protocol("FlightInfo without a PATH descriptor".into()))?;
    // Any Flight server's info decodes; sweepflight's metadata adds version and series.
    let meta = serde_json::from_slice::<DatasetMeta>(&info.app_metadata).ok();
    let (rows, bytes) = (info.total_records, info.total_bytes);
    let schema = Arc::new(info.try_decode_schema()?);
    Ok(DatasetInfo {
        name,
        rows,
        bytes,
        version: meta.as_ref().map(|m| m.version),
        key: meta.as_ref().and_then(|m| m.key.clone()),
        series: meta.as_ref().and_then(|m| m.series),
        columns: meta.as_ref().map(|m| m.columns.clone()).unwrap_or_default(),
        unusable: meta.map(|m| m.unusable).unwrap_or_default(),
        schema,
    })
}
