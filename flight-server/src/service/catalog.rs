//! Reading the catalog: ListFlights, GetFlightInfo, GetSchema and DoGet.

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{
    FlightData, FlightDescriptor, FlightEndpoint, FlightInfo, SchemaAsIpc, SchemaResult,
};
use arrow_ipc::writer::IpcWriteOptions;
use futures::{Stream, TryStreamExt};

use super::State;
use crate::request::{Ticket, dataset_path};
use crate::store::Dataset;
use crate::{Error, Result};

/// One FlightInfo per dataset, by name.
pub(super) fn list(state: &State) -> Result<Vec<FlightInfo>> {
    state.store.list().iter().map(|d| flight_info(d)).collect()
}

/// The FlightInfo of the dataset a PATH descriptor names.
pub(super) fn info(state: &State, descriptor: &FlightDescriptor) -> Result<FlightInfo> {
    flight_info(&*state.store.get(&dataset_path(descriptor)?)?)
}

/// The schema of the dataset a PATH descriptor names.
pub(super) fn schema(state: &State, descriptor: &FlightDescriptor) -> Result<SchemaResult> {
    let d = state.store.get(&dataset_path(descriptor)?)?;
    Ok(SchemaAsIpc::new(&d.schema, &IpcWriteOptions::default()).try_into()?)
}

/// The stored rows for a ticket, as Flight data.
pub(super) fn rows(
    state: &State,
    ticket: &[u8],
) -> Result<impl Stream<Item = Result<FlightData>> + Send + 'static> {
    let Ticket::Dataset { name, .. } = Ticket::decode(ticket)?;
    let d = state.store.get(&name)?;
    let batches: Vec<_> = d.batches.iter().cloned().map(Ok).collect();
    Ok(FlightDataEncoderBuilder::new()
        .with_schema(d.schema.clone())
        .build(futures::stream::iter(batches))
        .map_err(Error::from))
}

fn flight_info(d: &Dataset) -> Result<FlightInfo> {
    let endpoint = FlightEndpoint::new()
        .with_ticket(arrow_flight::Ticket::new(Ticket::dataset(&d.name).encode()));
    let metadata = serde_json::json!({"version": d.version});
    Ok(FlightInfo::new()
        .try_with_schema(&d.schema)?
        .with_descriptor(FlightDescriptor::new_path(vec![d.name.clone()]))
        .with_total_records(d.rows() as i64)
        .with_total_bytes(d.bytes as i64)
        .with_ordered(true)
        .with_endpoint(endpoint)
        .with_app_metadata(metadata.to_string()))
}
