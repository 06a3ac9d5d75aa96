//! DoExchange: `echo` (every message back unchanged) and the stateless `sweep` (the series
//! travels with the parameters; nothing is stored).

use std::sync::Arc;

use arrow_flight::FlightData;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};

use super::State;
use crate::compute::{self, Series};
use crate::ingest::{UploadLimits, read_series};
use crate::request::{ExchangeCommand, exchange_command};
use crate::results::to_batch;
use crate::{Error, Result};

/// Starts an exchange: reads the command from the first message, then answers.
pub(super) async fn exchange(
    state: &State,
    mut stream: impl Stream<Item = std::result::Result<FlightData, FlightError>>
    + Send
    + Unpin
    + 'static,
) -> Result<BoxStream<'static, Result<FlightData>>> {
    let mut first = stream
        .next()
        .await
        .ok_or_else(|| Error::invalid("empty DoExchange stream: expected a CMD descriptor"))??;
    let command = exchange_command(first.flight_descriptor.as_ref(), state.config.max_combos)?;
    match command {
        ExchangeCommand::Echo => {
            first.flight_descriptor = None;
            let head = futures::stream::iter([Ok(first)]);
            Ok(head.chain(stream).map_err(Error::from).boxed())
        }
        ExchangeCommand::Sweep(spec) => {
            let limits = UploadLimits {
                max_bytes: state.config.max_dataset_bytes,
            };
            let series =
                read_series(futures::stream::iter([Ok(first)]).chain(stream), limits).await?;
            let results = compute::run(Series::Transient(Arc::new(series.close)), &spec).await?;
            let batch = to_batch(&spec.combos, &results)?;
            let out = FlightDataEncoderBuilder::new()
                .with_schema(batch.schema())
                .build(futures::stream::iter([Ok(batch)]))
                .map_err(Error::from);
            Ok(out.boxed())
        }
    }
}
