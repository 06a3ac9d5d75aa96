//! Which stored columns the contract recognises as bars (protocol.md v1.3, "Datasets: OHLCV
//! bars and time"; v1.4 adds pandas' unnamed index as a time), and the hint for a parameter
//! that looks like a mistyped column (docs/language.md v1.4): one definition for the server,
//! which checks the bars, and the clients, which word a refusal before it is sent.

use arrow_schema::{DataType, Schema};
use sweepflight_kernel::expr::registry::closest;

/// The bar columns a formula reads, in the contract's order.
pub const BAR_NAMES: [&str; 5] = ["open", "high", "low", "close", "volume"];

/// Names a `time` column may have (ignoring case), after the exact `time`.
const TIME_NAMES: [&str; 4] = ["time", "date", "datetime", "timestamp"];

/// What pyarrow names an unnamed pandas index (backtesting.py's frames, `DataFrame.to_parquet`).
pub const PANDAS_INDEX: &str = "__index_level_0__";

/// The index of the column recognised as `name`: the exact lower-case name, else the first
/// whose name matches it ignoring case (`Close` from yfinance is `close`).
pub fn recognise(schema: &Schema, name: &str) -> Option<usize> {
    schema.index_of(name).ok().or_else(|| {
        schema
            .fields()
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(name))
    })
}

/// The index of the `time` column: `time`, else the first named time, date, datetime or
/// timestamp ignoring case, else (protocol v1.4) an unnamed pandas index of a timestamp or date
/// type: a frame put as it comes keeps its dates.
pub fn time_index(schema: &Schema) -> Option<usize> {
    schema.index_of("time").ok().or_else(|| {
        schema
            .fields()
            .iter()
            .position(|f| TIME_NAMES.iter().any(|n| f.name().eq_ignore_ascii_case(n)))
            .or_else(|| {
                schema.index_of(PANDAS_INDEX).ok().filter(|&i| {
                    matches!(
                        schema.field(i).data_type(),
                        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
                    )
                })
            })
    })
}

/// The names a formula could use for the columns of `schema`, in its order: a recognised bar
/// column by its name in lower case (with `true`), any other as stored (not the time or the
/// key column).
fn names(schema: &Schema, key: Option<&str>) -> Vec<(String, bool)> {
    let time = time_index(schema);
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(i, f)| Some(*i) != time && Some(f.name().as_str()) != key)
        .map(
            |(i, f)| match BAR_NAMES.iter().find(|n| recognise(schema, n) == Some(i)) {
                Some(n) => ((*n).to_owned(), true),
                None => (f.name().clone(), false),
            },
        )
        .collect()
}

/// The hint for a parameter `name` that got no values, against the columns of a dataset of
/// `schema` (keyed by `key`) and the strategy's `inputs`: the closest column within two edits
/// (ties by the dataset's column order), and that a column of the dataset's own must be listed
/// in `inputs`. `None` when no column is that close.
pub fn column_hint(
    name: &str,
    schema: &Schema,
    key: Option<&str>,
    inputs: &[&str],
) -> Option<String> {
    let names = names(schema, key);
    let meant = closest(name, names.iter().map(|(n, _)| n.as_str()))?;
    let bar = names.iter().any(|(n, b)| n == meant && *b);
    // A bar column, or one `inputs` lists already, is read by its name alone.
    Some(if bar || inputs.contains(&meant) {
        format!("did you mean the column {meant}?")
    } else if meant == name {
        format!(
            "`{name}` is a column of the dataset: list it in the strategy's \"inputs\" \
             ([\"{name}\"]) to read it as a series"
        )
    } else {
        format!(
            "did you mean the column {meant}? list it in the strategy's \"inputs\" \
             ([\"{meant}\"]) to read it as a series"
        )
    })
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, Field, Schema};

    use super::column_hint as hint;

    fn schema(names: &[&str]) -> Schema {
        Schema::new(
            names
                .iter()
                .map(|n| Field::new(*n, DataType::Float64, false))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn hints_name_the_closest_column_and_inputs() {
        let s = schema(&[
            "Date", "Open", "High", "Low", "Close", "Volume", "vwap", "pred",
        ]);
        let h = |n: &str, inputs: &[&str]| hint(n, &s, None, inputs);
        assert_eq!(h("clsoe", &[]).unwrap(), "did you mean the column close?");
        assert_eq!(h("hihg", &[]).unwrap(), "did you mean the column high?");
        assert!(
            h("vwap", &[])
                .unwrap()
                .contains("list it in the strategy's \"inputs\"")
        );
        assert!(
            h("vwpa", &[])
                .unwrap()
                .starts_with("did you mean the column vwap? list it")
        );
        assert_eq!(
            h("vwpa", &["vwap"]).unwrap(),
            "did you mean the column vwap?"
        );
        // Three edits away, or the time column: no hint.
        assert_eq!(h("fast", &[]), None);
        assert_eq!(h("date", &[]), None);
        // Ties by the dataset's column order.
        let t = schema(&["close", "sig2", "sig1"]);
        assert!(
            hint("sig", &t, None, &[])
                .unwrap()
                .starts_with("did you mean the column sig2?")
        );
    }
}
