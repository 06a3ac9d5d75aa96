//! The job verbs: the `submit`, `status` and `cancel` actions, Flight's PollFlightInfo and
//! CancelFlightInfo, and DoGet of a job's result. A job runs the same use case its action
//! runs ([`super::sweep`], [`super::walk_forward`]), on a task of its own; [`crate::sweep::jobs`]
//! keeps its record.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arrow_flight::flight_descriptor::DescriptorType;
use arrow_flight::{
    CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightEndpoint, FlightInfo, PollInfo,
};
use bytes::Bytes;
use prost::Message;
use sweepflight_protocol::{JobBody, JobRef, JobState, JobStatus, Ticket};

use super::State;
use crate::sweep::jobs::Job;
use crate::{Error, Result};

/// How long `cancel` waits for a running job's kernel to stop before it answers (a kernel
/// checks its flag every few milliseconds; this bounds a pathological task).
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Starts the job a `submit` body describes ([`crate::sweep::jobs::submit`]).
pub(super) fn submit(state: &State, body: &[u8]) -> Result<Arc<Job>> {
    let job = JobBody::decode(body).map_err(|e| state.hinted(e, body))?;
    crate::sweep::jobs::submit(&state.engine, job)
}

/// The job a `{"job": ID}` body names.
pub(super) fn named(state: &State, body: &[u8]) -> Result<Arc<Job>> {
    state.engine.jobs.get(&JobRef::decode(body)?.job)
}

/// The `status` action.
pub(super) fn status(state: &State, body: &[u8]) -> Result<Bytes> {
    Ok(named(state, body)?.status().encode().into())
}

/// The `cancel` action: its reply comes once the job's memory is free.
pub(super) async fn cancel(state: &State, body: &[u8]) -> Result<Bytes> {
    let job = named(state, body)?;
    let status = job.cancel(CANCEL_WAIT).await;
    tracing::info!(job = %job.id, state = ?status.state, "job cancelled");
    Ok(status.encode().into())
}

/// Flight's CancelFlightInfo: the job is named by the FlightInfo's first endpoint ticket or its
/// descriptor (both `{"job": ID}` for the infos PollFlightInfo returns).
pub(super) async fn cancel_flight_info(state: &State, body: &[u8]) -> Result<Bytes> {
    let request = CancelFlightInfoRequest::decode(body)
        .map_err(|e| Error::invalid(format!("not a CancelFlightInfoRequest: {e}")))?;
    let info = request
        .info
        .ok_or_else(|| Error::invalid("CancelFlightInfoRequest without a FlightInfo"))?;
    let id = info
        .endpoint
        .iter()
        .filter_map(|e| e.ticket.as_ref())
        .find_map(|t| match Ticket::decode(&t.ticket) {
            Ok(Ticket::Job(j)) => Some(j.job),
            _ => None,
        })
        .or_else(|| {
            info.flight_descriptor
                .as_ref()
                .and_then(|d| JobRef::decode(&d.cmd).ok())
                .map(|j| j.job)
        })
        .ok_or_else(|| {
            Error::invalid(
                "this FlightInfo names no job: cancel the FlightInfo a PollFlightInfo returned",
            )
        })?;
    let job = state.engine.jobs.get(&id)?;
    let status = if job.status().state == JobState::Failed {
        CancelStatus::NotCancellable
    } else {
        job.cancel(CANCEL_WAIT).await;
        CancelStatus::Cancelled
    };
    Ok(CancelFlightInfoResult::new(status).encode_to_vec().into())
}

/// PollFlightInfo: a CMD descriptor whose bytes are a `submit` body starts a job; one whose
/// bytes are `{"job": ID}` (the descriptor every answer returns until the job ends) polls it.
/// A done job's answer has no next descriptor and a FlightInfo whose ticket fetches the result;
/// a failed job answers with its error, a cancelled one CANCELLED.
pub(super) async fn poll(state: &State, descriptor: &FlightDescriptor) -> Result<PollInfo> {
    if descriptor.r#type() != DescriptorType::Cmd {
        return Err(Error::invalid(
            "PollFlightInfo takes a CMD descriptor: a submit body, or {\"job\": ID} to poll",
        ));
    }
    let job = match JobRef::decode(&descriptor.cmd) {
        Ok(r) => state.engine.jobs.get(&r.job)?,
        Err(_) => submit(state, &descriptor.cmd)?,
    };
    let status = job.status();
    let expires = job.expiration(state.engine.jobs.ttl());
    let next = FlightDescriptor::new_cmd(JobRef::new(&job.id).encode());
    let info = match status.state {
        JobState::Queued | JobState::Running => None,
        JobState::Done => Some(result_info(&job, next.clone())?),
        JobState::Failed => {
            return Err(Error::Job(
                code_of(&status),
                status.error.unwrap_or_default(),
            ));
        }
        JobState::Cancelled => {
            return Err(Error::Status(Box::new(tonic::Status::cancelled(format!(
                "job {} was cancelled",
                job.id
            )))));
        }
    };
    Ok(PollInfo {
        flight_descriptor: info.is_none().then_some(next),
        info,
        progress: Some(status.progress),
        expiration_time: Some(timestamp(expires)),
    })
}

/// A done job's FlightInfo: its schema, rows and the ticket that fetches it.
fn result_info(job: &Job, descriptor: FlightDescriptor) -> Result<FlightInfo> {
    let reply = job.peek()?;
    let endpoint =
        FlightEndpoint::new().with_ticket(arrow_flight::Ticket::new(Ticket::job(&job.id).encode()));
    FlightInfo::new()
        .try_with_schema(reply.schema_ref())
        .map_err(|e| Error::internal("encode the schema", e))
        .map(|info| {
            info.with_descriptor(descriptor)
                .with_total_records(reply.num_rows() as i64)
                .with_total_bytes(reply.get_array_memory_size() as i64)
                .with_ordered(true)
                .with_endpoint(endpoint)
        })
}

/// The gRPC code of a failed job's status.
fn code_of(status: &JobStatus) -> tonic::Code {
    status
        .code
        .as_deref()
        .and_then(crate::sweep::jobs::code_of_name)
        .unwrap_or(tonic::Code::Unknown)
}

/// `at` (a monotonic instant) as a wall-clock protobuf timestamp.
fn timestamp(at: Instant) -> prost_types::Timestamp {
    let wall = SystemTime::now() + at.saturating_duration_since(Instant::now());
    let since = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}
