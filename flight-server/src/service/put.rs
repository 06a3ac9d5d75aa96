//! DoPut: receive a whole series (or a keyed universe), validate it, then store it in one step.

use arrow_flight::{FlightDescriptor, PutResult};
use sweepflight_protocol::{PutSummary, PutTarget};

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
    // A durable put writes its file while the stream arrives; only the commit is left after.
    let disk = state.engine.store.data_dir().cloned();
    let (upload, staged) =
        read_upload(data, upload_limits(state), target.key.as_deref(), disk).await?;
    let d = state
        .engine
        .store
        .put(&target.dataset, upload, staged)
        .await?;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(dataset = %d.name, rows = d.rows(), version = d.version, elapsed_ms, "stored");
    let summary = PutSummary {
        dataset: d.name.clone(),
        rows: d.rows() as u64,
        bytes: d.bytes(),
        version: d.version,
        series: d.universe().map(|u| u.len() as u64),
    };
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
