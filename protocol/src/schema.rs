//! The sweep result schema: one row per combo (per series and combo on a keyed dataset).

use std::sync::{Arc, LazyLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::{Builtin, Error, ParamKind, Result, Strategy};

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

/// The columns after the parameters, in order (v1's `pnl` .. `max_drawdown`).
const METRIC_COLUMNS: usize = 5;

/// The v1.2 metric columns (strategies.md, "Metrics"), after `max_drawdown`: nullable float64,
/// null where a metric is undefined.
pub const V12_METRIC_COLUMNS: [&str; 9] = [
    "avg_trade",
    "best_trade",
    "worst_trade",
    "profit_factor",
    "exposure",
    "avg_bars",
    "sharpe",
    "sortino",
    "sqn",
];

/// The last column of every reply that carries metrics (strategies.md, v1.3): the compounded
/// return of the booked trades in percent, float64, 0.0 with no trade.
pub const TOTAL_RETURN_COLUMN: &str = "total_return";

/// A portfolio's metric columns (protocol v1.4, docs/portfolios.md "Metrics"), in order, with
/// their types and whether they may be null; `block_pnl` follows them with `blocks`.
pub const PORTFOLIO_METRIC_COLUMNS: [(&str, DataType, bool); 10] = [
    ("total_return", DataType::Float64, false),
    ("annual_return", DataType::Float64, true),
    ("volatility", DataType::Float64, true),
    ("sharpe", DataType::Float64, true),
    ("sortino", DataType::Float64, true),
    ("max_drawdown", DataType::Float64, false),
    ("turnover", DataType::Float64, false),
    ("fees", DataType::Float64, false),
    ("rebalances", DataType::Int64, false),
    ("avg_holdings", DataType::Float64, false),
];

/// `combo` and the strategy's parameter columns (int64 windows and counts, float64 numbers).
fn combo_and_params(strategy: &Strategy) -> Vec<Field> {
    std::iter::once(Field::new("combo", DataType::Int64, false))
        .chain(
            strategy
                .params()
                .iter()
                .map(|(name, kind)| Field::new(*name, param_type(*kind), false)),
        )
        .collect()
}

/// A portfolio's sweep schema: `combo`, its parameters, [`PORTFOLIO_METRIC_COLUMNS`], then
/// `block_pnl` with `blocks` (one row per combo: no `series`).
fn portfolio_schema(strategy: &Strategy, blocks: Option<u8>) -> SchemaRef {
    let mut fields = combo_and_params(strategy);
    fields.extend(
        PORTFOLIO_METRIC_COLUMNS
            .iter()
            .map(|(name, t, null)| Field::new(*name, t.clone(), *null)),
    );
    if let Some(b) = blocks {
        fields.push(block_pnl_field(b));
    }
    Arc::new(Schema::new(fields))
}

/// The `block_pnl` column of `b` blocks.
fn block_pnl_field(b: u8) -> Field {
    Field::new(
        BLOCK_PNL_COLUMN,
        DataType::FixedSizeList(
            Arc::new(Field::new("item", DataType::Float64, false)),
            i32::from(b),
        ),
        false,
    )
}

/// A portfolio's `trades` reply: `combo`, `row` (the fill's calendar row), `time` (the stored
/// type, when the calendar has one), `series` (on a keyed dataset), `shares`, `price`,
/// `value`, `fee`.
pub fn portfolio_trades_schema(keyed: bool, time: Option<&DataType>) -> SchemaRef {
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    let mut fields = vec![
        Field::new("combo", DataType::Int64, false),
        Field::new("row", DataType::Int64, false),
    ];
    fields.extend(time.map(|t| Field::new("time", t.clone(), false)));
    fields.extend(series_field(keyed));
    fields.extend([f("shares"), f("price"), f("value"), f("fee")]);
    Arc::new(Schema::new(fields))
}

/// A portfolio's `equity` reply: `combo`, `row` (calendar row), `time` (when the calendar has
/// one), `equity`, `cash`, `holdings` (int64).
pub fn portfolio_equity_schema(time: Option<&DataType>) -> SchemaRef {
    let mut fields = vec![
        Field::new("combo", DataType::Int64, false),
        Field::new("row", DataType::Int64, false),
    ];
    fields.extend(time.map(|t| Field::new("time", t.clone(), false)));
    fields.extend([
        Field::new("equity", DataType::Float64, false),
        Field::new("cash", DataType::Float64, false),
        Field::new("holdings", DataType::Int64, false),
    ]);
    Arc::new(Schema::new(fields))
}

/// One schema per strategy, unkeyed then keyed.
static SCHEMAS: LazyLock<Vec<[SchemaRef; 2]>> = LazyLock::new(|| {
    Strategy::builtins()
        .map(|s| [build(&s, false), build(&s, true)])
        .collect()
});

fn build(strategy: &Strategy, keyed: bool) -> SchemaRef {
    let mut fields = Vec::with_capacity(COMBO_COLUMNS.len() + 1);
    if keyed {
        fields.push(Field::new(SERIES_COLUMN, DataType::Utf8, false));
    }
    fields.extend(combo_and_params(strategy));
    fields.extend(
        COMBO_COLUMNS[COMBO_COLUMNS.len() - METRIC_COLUMNS..]
            .iter()
            .map(|(name, t)| Field::new(*name, t.clone(), false)),
    );
    fields.extend(
        V12_METRIC_COLUMNS
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, true)),
    );
    fields.push(Field::new(TOTAL_RETURN_COLUMN, DataType::Float64, false));
    Arc::new(Schema::new(fields))
}

/// The column type of a parameter.
pub fn param_type(kind: ParamKind) -> DataType {
    match kind {
        ParamKind::Int => DataType::Int64,
        ParamKind::Number => DataType::Float64,
    }
}

/// The hma_sar result schema: with `keyed`, `series` (utf8) first, then the v1 columns.
pub fn result_schema(keyed: bool) -> SchemaRef {
    strategy_schema(&Strategy::default(), keyed)
}

/// The result schema of `strategy`: \[`series`\], `combo`, the strategy's parameter columns
/// (int64 windows, float64 numbers), then `pnl`, `trades`, `wins`, `win_rate`,
/// `max_drawdown`, then the v1.2 metrics ([`V12_METRIC_COLUMNS`]). For hma_sar it is
/// [`result_schema`].
pub fn strategy_schema(strategy: &Strategy, keyed: bool) -> SchemaRef {
    // A built-in's schema is made once; a formula strategy's parameters are its own.
    match strategy {
        Strategy::Builtin(b) => Arc::clone(&SCHEMAS[*b as usize][usize::from(keyed)]),
        Strategy::Formulas(_) => build(strategy, keyed),
        Strategy::Portfolio(_) => portfolio_schema(strategy, None),
    }
}

/// The column a body with `"blocks": B` adds after the metrics: the equity's change over each
/// of B blocks of the evaluated rows (strategies.md, "Blocks").
pub const BLOCK_PNL_COLUMN: &str = "block_pnl";

/// [`strategy_schema`], with the `block_pnl` column (`fixed_size_list<float64>[B]`) before
/// `total_return` when `blocks` is given.
pub fn sweep_schema(strategy: &Strategy, keyed: bool, blocks: Option<u8>) -> SchemaRef {
    if let Strategy::Portfolio(_) = strategy {
        return portfolio_schema(strategy, blocks);
    }
    let base = strategy_schema(strategy, keyed);
    let Some(b) = blocks else { return base };
    let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
    let total = fields.pop().expect("total_return is last");
    fields.push(block_pnl_field(b));
    fields.push(total);
    Arc::new(Schema::new(fields))
}

/// The `trades` action's reply: \[`series`\], `combo`, `trade`, `side` (int8), `entry_row`,
/// `exit_row` (rows of the series), `entry_price`, `exit_price`, `pnl` (net, percentage
/// points), then `exit_reason` (utf8, v1.3), ordered by series, combo, trade.
pub fn trades_schema(keyed: bool) -> SchemaRef {
    trades_schema_timed(keyed, None)
}

/// [`trades_schema`] of a dataset with a usable time column of type `time` (v1.3): then
/// `entry_time` and `exit_time` of that type follow `exit_reason`.
pub fn trades_schema_timed(keyed: bool, time: Option<&DataType>) -> SchemaRef {
    let i = |n: &str| Field::new(n, DataType::Int64, false);
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    let mut fields = series_field(keyed);
    fields.extend([
        i("combo"),
        i("trade"),
        Field::new("side", DataType::Int8, false),
        i("entry_row"),
        i("exit_row"),
        f("entry_price"),
        f("exit_price"),
        f("pnl"),
        Field::new(EXIT_REASON_COLUMN, DataType::Utf8, false),
    ]);
    if let Some(t) = time {
        fields.extend([
            Field::new("entry_time", t.clone(), false),
            Field::new("exit_time", t.clone(), false),
        ]);
    }
    Arc::new(Schema::new(fields))
}

/// The trades reply's column of why each trade closed (v1.3).
pub const EXIT_REASON_COLUMN: &str = "exit_reason";

/// The `equity` action's reply: \[`series`\], `combo`, `row` (of the series), `position` (int8,
/// after the bar), `equity` (`Q` of strategies.md): one row per evaluated bar per combo.
pub fn equity_schema(keyed: bool) -> SchemaRef {
    equity_schema_timed(keyed, None)
}

/// [`equity_schema`] of a dataset with a usable time column of type `time` (v1.3): then
/// `time` of that type follows `equity`.
pub fn equity_schema_timed(keyed: bool, time: Option<&DataType>) -> SchemaRef {
    let mut fields = series_field(keyed);
    fields.extend([
        Field::new("combo", DataType::Int64, false),
        Field::new("row", DataType::Int64, false),
        Field::new("position", DataType::Int8, false),
        Field::new("equity", DataType::Float64, false),
    ]);
    if let Some(t) = time {
        fields.push(Field::new("time", t.clone(), false));
    }
    Arc::new(Schema::new(fields))
}

/// The `walk_forward` action's reply: \[`series`\], `fold`, `train_start`, `train_end`,
/// `test_start`, `test_end` (int64, rows of the series), then the chosen `combo` and the
/// strategy's parameter columns, `train_score` (float64: the selection column's in-sample
/// value), then the test run's `pnl` through `sqn` (v1's metrics as in a sweep, then the v1.2
/// ones). Everything from `combo` on is null for a fold where no combo passed `where`.
pub fn walk_forward_schema(strategy: &Strategy, keyed: bool) -> SchemaRef {
    let sweep = strategy_schema(strategy, false);
    // A portfolio's folds are the book's: no `series`.
    let keyed = keyed && strategy.portfolio().is_none();
    let mut fields = series_field(keyed);
    fields.extend(
        ["fold", "train_start", "train_end", "test_start", "test_end"]
            .map(|n| Field::new(n, DataType::Int64, false)),
    );
    let params = 1 + strategy.params().len();
    fields.extend(
        sweep.fields()[..params]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true)),
    );
    fields.push(Field::new("train_score", DataType::Float64, true));
    fields.extend(
        sweep.fields()[params..]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true)),
    );
    Arc::new(Schema::new(fields))
}

fn series_field(keyed: bool) -> Vec<Field> {
    keyed
        .then(|| Field::new(SERIES_COLUMN, DataType::Utf8, false))
        .into_iter()
        .collect()
}

/// A portfolio's result (`combo`, its parameters, [`PORTFOLIO_METRIC_COLUMNS`], then
/// `block_pnl` when asked for), never keyed.
fn check_portfolio_schema(fields: &[arrow_schema::FieldRef]) -> Result<()> {
    let first = fields
        .iter()
        .position(|f| f.name() == "total_return")
        .ok_or_else(|| Error::new("a portfolio's result has no `total_return` column"))?;
    for f in &fields[1..first] {
        if !matches!(f.data_type(), DataType::Int64 | DataType::Float64) {
            return Err(Error::new(format!(
                "parameter column `{}` has type {}, expected Int64 or Float64",
                f.name(),
                f.data_type()
            )));
        }
    }
    for (i, (name, t, _)) in PORTFOLIO_METRIC_COLUMNS.iter().enumerate() {
        match fields.get(first + i) {
            Some(f) if f.name() == name && f.data_type() == t => {}
            _ => {
                return Err(Error::new(format!(
                    "result column {} should be `{name}` ({t})",
                    first + i
                )));
            }
        }
    }
    Ok(())
}

/// Checks a received result schema: `series` (utf8) first or not at all, `combo`, the
/// strategy's parameter columns (int64 or float64: hma_sar's six windows in v1, a built-in's,
/// or a formula strategy's), `pnl` and `trades` with their types; extension columns, when
/// present, with theirs. Returns whether the result is keyed.
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
    // The parameter columns are those between `combo` and `pnl`: the reply carries its
    // strategy's (a built-in's, or the formulas' as the server's binder numbers them), so
    // nothing is guessed from their names.
    let at = usize::from(keyed);
    match rest.first() {
        Some(f) if f.name() == "combo" && f.data_type() == &DataType::Int64 => {}
        _ => {
            return Err(Error::new(format!(
                "result column {at} should be `combo` (Int64)"
            )));
        }
    }
    if schema.field_with_name("pnl").is_err() && schema.field_with_name("turnover").is_ok() {
        return check_portfolio_schema(rest).map(|()| false);
    }
    let pnl = rest.iter().position(|f| f.name() == "pnl").ok_or_else(|| {
        Error::new("the result has no `pnl` column (Float64) after its parameter columns")
    })?;
    for f in &rest[1..pnl] {
        if !matches!(f.data_type(), DataType::Int64 | DataType::Float64) {
            return Err(Error::new(format!(
                "parameter column `{}` has type {}, expected Int64 or Float64",
                f.name(),
                f.data_type()
            )));
        }
    }
    // The columns from `pnl` on, as every strategy's reply has them: `pnl` and `trades`
    // required, the later ones checked where present.
    let tail = strategy_schema(&Strategy::Builtin(Builtin::Donchian), false);
    let expected = &tail.fields()[1 + Strategy::Builtin(Builtin::Donchian).params().len()..];
    for (i, want) in expected.iter().enumerate() {
        let (name, t) = (want.name(), want.data_type());
        match rest.get(pnl + i) {
            Some(f) if f.name() == name && f.data_type() == t => {}
            Some(f) if f.name() == name => {
                return Err(Error::new(format!(
                    "result column `{name}` has type {}, expected {t}",
                    f.data_type()
                )));
            }
            _ if i >= 2 && schema.field_with_name(name).is_err() => {}
            _ => {
                return Err(Error::new(format!(
                    "result column {} should be `{name}` ({t})",
                    at + pnl + i
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
        assert_eq!(result_schema(false).fields().len(), 12 + 9 + 1);
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
        // Every strategy's schema checks; its parameter columns come after `combo`.
        for s in Strategy::builtins() {
            for keyed in [false, true] {
                let schema = strategy_schema(&s, keyed);
                assert_eq!(check_result_schema(&schema).unwrap(), keyed);
                let first = schema.field(usize::from(keyed) + 1);
                assert_eq!(first.name(), s.params()[0].0);
            }
        }
        // A formula strategy's parameters, whatever their names; a parameter column that is not
        // a number is refused.
        let formulas = Strategy::decode(
            Some(&serde_json::json!({"long": "close > sma(close, n) + k"})),
            None,
        )
        .unwrap();
        assert!(!check_result_schema(&strategy_schema(&formulas, false)).unwrap());
        let mut odd: Vec<_> = strategy_schema(&formulas, false)
            .fields()
            .iter()
            .cloned()
            .collect();
        odd[2] = Arc::new(Field::new("k", DataType::Utf8, false));
        let e = check_result_schema(&Schema::new(odd)).unwrap_err();
        assert!(e.to_string().contains("parameter column `k`"), "{e}");
        let rsi = strategy_schema(&Strategy::Builtin(Builtin::RsiRevert), false);
        assert_eq!(
            rsi.field_with_name("upper").unwrap().data_type(),
            &DataType::Float64
        );
        assert_eq!(rsi.fields().len(), 1 + 3 + 5 + 9 + 1);
        assert!(rsi.field_with_name("sharpe").unwrap().is_nullable());
        let wf = walk_forward_schema(&Strategy::Builtin(Builtin::SmaCross), true);
        let names: Vec<&str> = wf.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names[..11],
            [
                "series",
                "fold",
                "train_start",
                "train_end",
                "test_start",
                "test_end",
                "combo",
                "fast",
                "slow",
                "train_score",
                "pnl"
            ]
        );
        assert_eq!(names.last(), Some(&"total_return"));
        assert!(wf.field_with_name("trades").unwrap().is_nullable());
    }

    #[test]
    fn reply_columns_are_names_no_parameter_may_take() {
        let reserved = sweepflight_kernel::expr::bind::RESERVED;
        let sweep = sweep_schema(&Strategy::Builtin(Builtin::HmaSar), true, Some(4));
        let walk = walk_forward_schema(&Strategy::Builtin(Builtin::HmaSar), true);
        let params: Vec<String> = Strategy::Builtin(Builtin::HmaSar)
            .params()
            .iter()
            .map(|p| p.0.to_owned())
            .collect();
        for f in sweep.fields().iter().chain(walk.fields().iter()) {
            if !params.contains(f.name()) {
                assert!(
                    reserved.contains(&f.name().as_str()),
                    "{} is not reserved",
                    f.name()
                );
            }
        }
    }
}
