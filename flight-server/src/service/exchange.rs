//! DoExchange: `echo` (every message back unchanged) and the stateless `sweep` (the series
//! travels with the parameters; nothing is stored).

use std::sync::Arc;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightData, FlightDescriptor};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::put::upload_limits;
use super::{Inbound, State};
use crate::compute::{self, Series};
use crate::ingest::read_series;
use crate::request::{ExchangeCommand, exchange_command};
use crate::results::to_batch;
use crate::{Error, Result};

/// Answers an exchange whose first message carried `descriptor`.
pub(super) async fn exchange(
    state: &State,
    descriptor: Option<&FlightDescriptor>,
    data: Inbound,
) -> Result<BoxStream<'static, Result<FlightData>>> {
    match exchange_command(descriptor, state.config.max_combos)? {
        ExchangeCommand::Echo => Ok(data.map_err(Error::from).boxed()),
        ExchangeCommand::Sweep(spec) => {
            let series = read_series(data, upload_limits(state)).await?;
            let results = compute::run(
                &state.sweeps,
                Series::Transient(Arc::new(series.close)),
                &spec,
            )
            .await?;
            let batch = to_batch(&spec.combos, &results)?;
            let out = FlightDataEncoderBuilder::new()
                .with_schema(batch.schema())
                .build(futures::stream::iter([Ok(batch)]))
                .map_err(Error::from);
            Ok(out.boxed())
        }
    }
}
