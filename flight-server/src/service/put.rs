//! DoPut: receive a whole series (or a keyed universe), validate it, then store it in one step.

use arrow_flight::{FlightDescriptor, PutResult};
use sweepflight_protocol::PutTarget;

use super::{Inbound, State};
use crate::datasets::ingest::{UploadLimits, read_upload};
use crate::{Error, Result};

/// Reads the upload; stores it only once the stream has ended and every row passed.
pub(super) async fn put(
    state: &State,
    descriptor: Option<&FlightDescriptor>,
    data: Inbound,
) -> Result<PutResult> {
    let descriptor = descriptor.ok_or_else(|| {
        Error::invalid(
            "DoPut needs a PATH descriptor [name] (or a CMD {\"dataset\", \"key\"}) on its first message",
        )
    })?;
    let target = PutTarget::from_descriptor(descriptor)?;
    let started = std::time::Instant::now();
    // The store owns the put: a durable one writes its file while the stream arrives, so only
    // the commit is left after; a refused upload is aborted and leaves nothing.
    let mut put = state.engine.store.begin_put(&target.dataset);
    let d = match read_upload(data, upload_limits(state), target.key.as_deref(), &mut put).await {
        Ok(upload) => put.commit(upload).await?,
        Err(e) => {
            put.abort().await;
            return Err(e);
        }
    };
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(dataset = %d.name, rows = d.rows(), version = d.version, elapsed_ms, "stored");
    let summary = d.summary();
    Ok(PutResult {
        app_metadata: serde_json::to_vec(&summary)
            .expect("summary serialises")
            .into(),
    })
}

/// What an upload (DoPut, or DoExchange's series) is checked against.
pub(super) fn upload_limits(state: &State) -> UploadLimits {
    UploadLimits {
        max_bytes: state.engine.config.max_dataset_bytes,
    }
}
