//! Reading the catalog: ListFlights, GetFlightInfo, GetSchema and DoGet.

use arrow_array::RecordBatch;
use arrow_flight::{
    FlightData, FlightDescriptor, FlightEndpoint, FlightInfo, SchemaAsIpc, SchemaResult,
};
use arrow_ipc::writer::IpcWriteOptions;
use futures::Stream;
use sweepflight_protocol::{DatasetMeta, Ticket, dataset_path};

use super::State;
use crate::datasets::Dataset;
use crate::{Error, Result};

/// One FlightInfo per dataset, by name.
pub(super) fn list(state: &State) -> Result<Vec<FlightInfo>> {
    state
        .engine
        .store
        .list()
        .iter()
        .map(|d| flight_info(d))
        .collect()
}

/// The FlightInfo of the dataset a PATH descriptor names.
pub(super) fn info(state: &State, descriptor: &FlightDescriptor) -> Result<FlightInfo> {
    flight_info(&*state.engine.store.get(&dataset_path(descriptor)?)?)
}

/// The schema of the dataset a PATH descriptor names.
pub(super) fn schema(state: &State, descriptor: &FlightDescriptor) -> Result<SchemaResult> {
    let d = state.engine.store.get(&dataset_path(descriptor)?)?;
    SchemaAsIpc::new(d.schema(), &IpcWriteOptions::default())
        .try_into()
        .map_err(|e| Error::internal("encode the schema", e))
}

/// The rows a ticket names, as Flight data: a stored dataset's, or a done job's result
/// (compressed as the job's body asked, else as `--reply-compression` says).
pub(super) fn rows(
    state: &State,
    ticket: &[u8],
) -> Result<impl Stream<Item = Result<FlightData>> + Send + 'static> {
    let default = state.engine.config.reply_compression;
    let data = match Ticket::decode(ticket)? {
        Ticket::Dataset { name, .. } => {
            let d = state.engine.store.get(&name)?;
            super::download::encode(d.schema(), d.data.batches.clone(), default)?
        }
        Ticket::Job(job) => {
            let reply = state.engine.jobs.get(&job.job)?.fetch()?;
            let batch = RecordBatch::clone(&reply.result);
            super::download::encode(&batch.schema(), vec![batch], reply.compression.or(default))?
        }
    };
    Ok(futures::stream::iter(data))
}

fn flight_info(d: &Dataset) -> Result<FlightInfo> {
    let endpoint = FlightEndpoint::new()
        .with_ticket(arrow_flight::Ticket::new(Ticket::dataset(&d.name).encode()));
    let metadata = DatasetMeta {
        version: d.version,
        key: d.universe().map(|u| u.key.clone()),
        series: d.universe().map(|u| u.len() as u64),
        columns: d.data.bars.columns(),
        unusable: d.data.bars.unusable.clone(),
    };
    Ok(FlightInfo::new()
        .try_with_schema(d.schema())
        .map_err(|e| Error::internal("encode the schema", e))?
        .with_descriptor(FlightDescriptor::new_path(vec![d.name.clone()]))
        .with_total_records(d.rows() as i64)
        .with_total_bytes(d.bytes() as i64)
        .with_ordered(true)
        .with_endpoint(endpoint)
        .with_app_metadata(serde_json::to_vec(&metadata).expect("metadata serialises")))
}
