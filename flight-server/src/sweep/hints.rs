//! Hints for a parameter that looks like a mistyped column (docs/language.md v1.4, "Parameters
//! that look like typos"). A name a formula does not know is a parameter, so `clsoe` or a
//! column not listed in `inputs` reaches the server as a parameter without values; the
//! protocol crate refuses that without the dataset, and this adds what only the dataset can
//! say ([`sweepflight_protocol::column_hint`]).

use std::sync::Arc;

use crate::Error;
use crate::datasets::Dataset;

/// `e`, a refused sweep body `body`, with a hint when it names a parameter without values that
/// is within two edits of a column of the body's dataset (if that dataset exists).
pub(crate) fn with_hint(
    e: sweepflight_protocol::Error,
    body: &[u8],
    dataset: &dyn Fn(&str) -> Option<Arc<Dataset>>,
) -> Error {
    let value: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    // A portfolio's `rebalance` word that is not a period is read as a parameter's name.
    let period = e.unvalued_param().and_then(|name| {
        let given = value.as_ref()?.pointer("/strategy/rebalance")?.as_str()?;
        (given == name).then(|| {
            format!(
                "`rebalance: \"{name}\"` is read as a parameter named {name}; a period is \"daily\", \"weekly\" or \"monthly\", every K rows an integer (21 for about a month of daily bars)"
            )
        })
    });
    if let Some(h) = period {
        return Error::InvalidArgument(format!("{}; {h}", e.0));
    }
    // A function's name without its call (`close > weekly`) is read as a parameter's.
    if let Some(name) = e.unvalued_param()
        && sweepflight_kernel::expr::registry::is_function(name)
    {
        return Error::InvalidArgument(format!(
            "{}; `{name}` is a function, read here as a parameter's name: call it, e.g. \
             `{name}(close)`",
            e.0
        ));
    }
    let hint = e.unvalued_param().and_then(|name| {
        let value = value.as_ref()?;
        let d = dataset(value.get("dataset")?.as_str()?)?;
        let inputs: Vec<&str> = value
            .pointer("/strategy/inputs")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        sweepflight_protocol::column_hint(
            name,
            d.schema(),
            d.universe().map(|u| u.key.as_str()),
            &inputs,
        )
    });
    match hint {
        Some(h) => Error::InvalidArgument(format!("{}; {h}", e.0)),
        None => e.into(),
    }
}
