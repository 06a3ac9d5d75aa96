//! DoPut: receive a whole series, validate it, then store it in one step.

use arrow_flight::error::FlightError;
use arrow_flight::{FlightData, PutResult};
use futures::{Stream, StreamExt};

use super::State;
use crate::ingest::{UploadLimits, read_series};
use crate::request::dataset_path;
use crate::{Error, Result};

/// Reads the upload; stores it only once the stream has ended and every row passed.
pub(super) async fn put(
    state: &State,
    mut stream: impl Stream<Item = std::result::Result<FlightData, FlightError>>
    + Send
    + Unpin
    + 'static,
) -> Result<PutResult> {
    let first = stream.next().await.ok_or_else(|| {
        Error::invalid("empty DoPut stream: expected a descriptor and a schema")
    })??;
    let descriptor = first.flight_descriptor.as_ref().ok_or_else(|| {
        Error::invalid("DoPut needs a PATH descriptor [name] on its first message")
    })?;
    let name = dataset_path(descriptor)?;
    let limits = UploadLimits {
        max_bytes: state.config.max_dataset_bytes,
    };
    let series = read_series(futures::stream::iter([Ok(first)]).chain(stream), limits).await?;
    let d = state.store.insert(&name, series);
    tracing::info!(dataset = %name, rows = d.rows(), version = d.version, "stored");
    let metadata = serde_json::json!({
        "dataset": d.name, "rows": d.rows(), "bytes": d.bytes, "version": d.version,
    });
    Ok(PutResult {
        app_metadata: metadata.to_string().into(),
    })
}
