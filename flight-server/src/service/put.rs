//! DoPut: receive a whole series, validate it, then store it in one step.

use arrow_flight::{FlightDescriptor, PutResult};

use super::{Inbound, State};
use crate::ingest::{UploadLimits, read_series};
use crate::request::dataset_path;
use crate::{Error, Result};

/// Reads the upload; stores it only once the stream has ended and every row passed.
pub(super) async fn put(
    state: &State,
    descriptor: Option<&FlightDescriptor>,
    data: Inbound,
) -> Result<PutResult> {
    let descriptor = descriptor.ok_or_else(|| {
        Error::invalid("DoPut needs a PATH descriptor [name] on its first message")
    })?;
    let name = dataset_path(descriptor)?;
    let started = std::time::Instant::now();
    let series = read_series(data, upload_limits(state)).await?;
    let d = state.store.put(&name, series).await?;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(dataset = %name, rows = d.rows(), version = d.version, elapsed_ms, "stored");
    let metadata = serde_json::json!({
        "dataset": d.name, "rows": d.rows(), "bytes": d.bytes, "version": d.version,
    });
    Ok(PutResult {
        app_metadata: metadata.to_string().into(),
    })
}

/// What an upload (DoPut, or DoExchange's series) is checked against.
pub(super) fn upload_limits(state: &State) -> UploadLimits {
    UploadLimits {
        max_bytes: state.config.max_dataset_bytes,
    }
}
