//! The sweep result schema: one row per combo (per series and combo on a keyed dataset).

use std::sync::{Arc, LazyLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::{Error, Result};

/// The first column of a keyed dataset's result: the key value as text.
pub const SERIES_COLUMN: &str = "series";

/// The combo's windows, in wire order.
pub const WINDOW_COLUMNS: [&str; 6] = ["half", "full", "sqrt", "p3", "p2", "p"];

/// Every column of a v1 result, in order, with its type. The first nine are the contract's;
/// `wins`, `win_rate` and `max_drawdown` are extensions (more may follow in later versions).
pub const COMBO_COLUMNS: [(&str, DataType); 12] = [
    ("combo", DataType::Int64),
    ("half", DataType::Int64),
    ("full", DataType::Int64),
    ("sqrt", DataType::Int64),
    ("p3", DataType::Int64),
    ("p2", DataType::Int64),
    ("p", DataType::Int64),
    ("pnl", DataType::Float64),
    ("trades", DataType::Int64),
    ("wins", DataType::Int64),
    ("win_rate", DataType::Float64),
    ("max_drawdown", DataType::Float64),
];

/// Columns a client may rely on: the contract's first nine.
const REQUIRED: usize = 9;

static UNKEYED: LazyLock<SchemaRef> = LazyLock::new(|| build(false));
static KEYED: LazyLock<SchemaRef> = LazyLock::new(|| build(true));

fn build(keyed: bool) -> SchemaRef {
    let mut fields = Vec::with_capacity(COMBO_COLUMNS.len() + 1);
    if keyed {
        fields.push(Field::new(SERIES_COLUMN, DataType::Utf8, false));
    }
    fields.extend(
        COMBO_COLUMNS
            .iter()
            .map(|(name, t)| Field::new(*name, t.clone(), false)),
    );
    Arc::new(Schema::new(fields))
}

/// The result schema: with `keyed`, `series` (utf8) first, then the v1 columns.
pub fn result_schema(keyed: bool) -> SchemaRef {
    Arc::clone(if keyed { &KEYED } else { &UNKEYED })
}

/// Checks a received result schema: `series` (utf8) first or not at all, then the contract's
/// nine columns in order with their types; extension columns, when present, with theirs.
/// Returns whether the result is keyed.
///
/// # Errors
/// [`Error`] naming the first column that is missing or of another type.
pub fn check_result_schema(schema: &Schema) -> Result<bool> {
    let fields = schema.fields();
    let keyed = fields.first().map(|f| f.name().as_str()) == Some(SERIES_COLUMN);
    if keyed && !matches!(fields[0].data_type(), DataType::Utf8 | DataType::LargeUtf8) {
        return Err(Error::new(format!(
            "result column `{SERIES_COLUMN}` has type {}, expected utf8",
            fields[0].data_type()
        )));
    }
    let rest = &fields[usize::from(keyed)..];
    for (i, (name, t)) in COMBO_COLUMNS.iter().enumerate() {
        match rest.get(i) {
            Some(f) if f.name() == name && f.data_type() == t => {}
            Some(f) if f.name() == name => {
                return Err(Error::new(format!(
                    "result column `{name}` has type {}, expected {t}",
                    f.data_type()
                )));
            }
            _ if i >= REQUIRED && schema.field_with_name(name).is_err() => {}
            _ => {
                return Err(Error::new(format!(
                    "result column {} should be `{name}` ({t})",
                    i + usize::from(keyed)
                )));
            }
        }
    }
    Ok(keyed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_check() {
        assert!(!check_result_schema(&result_schema(false)).unwrap());
        assert!(check_result_schema(&result_schema(true)).unwrap());
        assert_eq!(result_schema(true).field(0).name(), SERIES_COLUMN);
        assert_eq!(result_schema(false).fields().len(), 12);
        // The contract's nine columns alone are a valid result.
        let nine = Schema::new(result_schema(false).fields()[..9].to_vec());
        assert!(!check_result_schema(&nine).unwrap());
        let eight = Schema::new(result_schema(false).fields()[..8].to_vec());
        assert!(
            check_result_schema(&eight)
                .unwrap_err()
                .to_string()
                .contains("trades")
        );
        let mut wrong: Vec<_> = result_schema(false).fields().iter().cloned().collect();
        wrong[7] = Arc::new(Field::new("pnl", DataType::Int64, false));
        let e = check_result_schema(&Schema::new(wrong)).unwrap_err();
        assert!(e.to_string().contains("`pnl` has type Int64"), "{e}");
    }
}
