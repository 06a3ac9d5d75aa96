//! The `sweep` action body, the DoExchange commands and the `session` messages.
//!
//! All three share one JSON vocabulary (`lengths` | `params`, `fee`, `series`, `rows`), decoded
//! by one function ([`decode_fields`]) into typed values; each form then says which fields it
//! needs and which it refuses.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::{Error, Result, validate_name};

/// Largest window or length the contract accepts (`i32::MAX`).
pub const MAX_WINDOW: u32 = 2_147_483_647;

/// The fee a request without `"fee"` gets: 0.09% per round trip, as a fraction.
pub const DEFAULT_FEE: f64 = 0.0009;

/// The DoExchange command that opens a `session`.
pub const SESSION_COMMAND: &[u8] = br#"{"op": "session"}"#;

/// Body versions this crate decodes (`"v"`, optional, absent means 1).
const BODY_VERSION: u64 = 1;

/// The combos of a request, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grid {
    /// Lengths `L`; each expands to six windows by the paper rule (`spec/kernel.md`).
    Lengths(Vec<u32>),
    /// Explicit `[half, full, sqrt, p3, p2, p]` tuples.
    Params(Vec<[u32; 6]>),
}

impl Grid {
    /// Number of combos.
    pub fn len(&self) -> usize {
        match self {
            Self::Lengths(l) => l.len(),
            Self::Params(p) => p.len(),
        }
    }

    /// True if there is no combo.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The combos `start..end` (clipped to the grid).
    pub fn slice(&self, start: usize, end: usize) -> Self {
        let range = |len: usize| start.min(len)..end.min(len);
        match self {
            Self::Lengths(l) => Self::Lengths(l[range(l.len())].to_vec()),
            Self::Params(p) => Self::Params(p[range(p.len())].to_vec()),
        }
    }
}

/// Rows `start..end` of each series (0-based, half-open); `end` past a series' length is
/// clipped by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowRange {
    /// First row.
    pub start: u64,
    /// One past the last row.
    pub end: u64,
}

impl RowRange {
    /// `start..end`.
    ///
    /// # Errors
    /// Unless `start < end`.
    pub fn new(start: u64, end: u64) -> Result<Self> {
        if start >= end {
            return Err(Error::new(format!(
                "`rows` must be [start, end] with 0 <= start < end, got [{start}, {end}]"
            )));
        }
        Ok(Self { start, end })
    }
}

/// A `sweep` action body (and a `session` message): a stored dataset and what to run on it.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    /// The dataset.
    pub dataset: String,
    /// The combos.
    pub grid: Grid,
    /// Round-trip fee as a fraction; [`DEFAULT_FEE`] when `None`.
    pub fee: Option<f64>,
    /// On a keyed dataset, the series to run on, in this order (all of them when `None`).
    pub series: Option<Vec<String>>,
    /// Only these rows of each series.
    pub rows: Option<RowRange>,
}

impl SweepRequest {
    /// Combos derived from lengths by the paper rule.
    pub fn lengths(dataset: impl Into<String>, lengths: impl IntoIterator<Item = u32>) -> Self {
        Self::new(dataset, Grid::Lengths(lengths.into_iter().collect()))
    }

    /// Explicit `[half, full, sqrt, p3, p2, p]` combos.
    pub fn params(dataset: impl Into<String>, params: impl IntoIterator<Item = [u32; 6]>) -> Self {
        Self::new(dataset, Grid::Params(params.into_iter().collect()))
    }

    /// A request for `grid` on `dataset`, every option at its default.
    pub fn new(dataset: impl Into<String>, grid: Grid) -> Self {
        Self {
            dataset: dataset.into(),
            grid,
            fee: None,
            series: None,
            rows: None,
        }
    }

    /// The same request with a fee.
    #[must_use]
    pub fn with_fee(mut self, fee: f64) -> Self {
        self.fee = Some(fee);
        self
    }

    /// The same request on these series of a keyed dataset only.
    #[must_use]
    pub fn with_series<S: Into<String>>(mut self, series: impl IntoIterator<Item = S>) -> Self {
        self.series = Some(series.into_iter().map(Into::into).collect());
        self
    }

    /// The same request on rows `range` of each series.
    #[must_use]
    pub fn with_rows(mut self, range: RowRange) -> Self {
        self.rows = Some(range);
        self
    }

    /// The fee, or [`DEFAULT_FEE`].
    pub fn fee(&self) -> f64 {
        self.fee.unwrap_or(DEFAULT_FEE)
    }

    /// Number of combos asked for (per series).
    pub fn len(&self) -> usize {
        self.grid.len()
    }

    /// True if no combo is asked for.
    pub fn is_empty(&self) -> bool {
        self.grid.is_empty()
    }

    /// Splits into requests of at most `max` combos each, in order (never fewer than one).
    pub fn chunks(&self, max: usize) -> Vec<Self> {
        let max = max.max(1);
        let len = self.len();
        if len <= max {
            return vec![self.clone()];
        }
        (0..len)
            .step_by(max)
            .map(|start| Self {
                grid: self.grid.slice(start, start + max),
                ..self.clone()
            })
            .collect()
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            dataset: Some(self.dataset.clone()),
            ..Wire::from_fields(&self.grid, self.fee, self.series.as_deref(), self.rows)
        };
        serde_json::to_vec(&wire).expect("a sweep body serialises")
    }

    /// Decodes a `sweep` action body or `session` message.
    ///
    /// # Errors
    /// [`Error`] for anything the contract refuses: not UTF-8, not a JSON object, unknown
    /// fields, `op`, a missing or bad `dataset`, both or neither of `lengths` / `params`, a
    /// length or window outside `1..=2147483647`, a bad fee, `series` or `rows`.
    pub fn decode(body: &[u8]) -> Result<Self> {
        let wire = parse(body)?;
        if wire.op.is_some() {
            return Err(Error::new(
                "`op` belongs to DoExchange commands, not to the sweep action",
            ));
        }
        if wire.key.is_some() {
            return Err(Error::new(
                "`key` belongs to keyed puts and exchange commands; a stored dataset keeps its own",
            ));
        }
        if wire.keyed.is_some() {
            return Err(Error::new("`keyed` belongs to `session` commands"));
        }
        let dataset = wire
            .dataset
            .clone()
            .ok_or_else(|| Error::new("sweep body needs `dataset`, a string"))?;
        validate_name(&dataset)?;
        let fields = decode_fields(wire)?;
        Ok(Self {
            dataset,
            grid: fields.grid,
            fee: fields.fee,
            series: fields.series,
            rows: fields.rows,
        })
    }

    /// Refuses more than `max` combos per series.
    ///
    /// # Errors
    /// [`Error`] naming the count and the limit (`--max-combos`).
    pub fn check_combos(&self, max: usize) -> Result<()> {
        check_count(self.len(), max)
    }
}

/// A DoExchange command (the CMD of the first message's descriptor).
#[derive(Debug, Clone, PartialEq)]
pub enum ExchangeCommand {
    /// `{"op": "echo"}`: every batch sent comes back unchanged.
    Echo,
    /// `{"op": "sweep", ...}`: sweep the series streamed in this exchange; nothing is stored.
    Sweep(ExchangeSweep),
    /// `{"op": "session"}` (extension): a long-lived stream of params-only sweeps of stored
    /// datasets, one [`SweepRequest`] per inbound message (its app_metadata), one result batch
    /// back each. A stream has one schema, so a session is for unkeyed datasets, or, opened
    /// with `"keyed": true`, for keyed ones (replies start with the `series` column).
    Session {
        /// Replies carry the keyed result schema.
        keyed: bool,
    },
}

/// The stateless sweep of a DoExchange: the grid and options; the series travels in the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeSweep {
    /// The combos.
    pub grid: Grid,
    /// Round-trip fee; [`DEFAULT_FEE`] when `None`.
    pub fee: Option<f64>,
    /// Group the streamed rows into series by this column (as a keyed put does).
    pub key: Option<String>,
    /// With `key`: only these series, in this order.
    pub series: Option<Vec<String>>,
    /// Only these rows of each series.
    pub rows: Option<RowRange>,
}

impl ExchangeSweep {
    /// The fee, or [`DEFAULT_FEE`].
    pub fn fee(&self) -> f64 {
        self.fee.unwrap_or(DEFAULT_FEE)
    }
}

impl ExchangeCommand {
    /// Decodes a DoExchange CMD.
    ///
    /// # Errors
    /// [`Error`] for a body that is not a JSON object, an unknown or missing `op`, `dataset`
    /// (the series travels in the stream), or fields the `op` does not take.
    pub fn decode(cmd: &[u8]) -> Result<Self> {
        let wire = parse(cmd)?;
        if wire.dataset.is_some() {
            return Err(Error::new(
                "a DoExchange command carries its series; `dataset` is not allowed",
            ));
        }
        let bare = wire.lengths.is_none()
            && wire.params.is_none()
            && wire.fee.is_none()
            && wire.series.is_none()
            && wire.rows.is_none()
            && wire.key.is_none();
        match wire.op.as_deref() {
            Some("echo") if bare && wire.keyed.is_none() => Ok(Self::Echo),
            Some("echo") => Err(Error::new("`echo` takes no other fields")),
            Some("session") if bare => Ok(Self::Session {
                keyed: wire.keyed.unwrap_or(false),
            }),
            Some("session") => Err(Error::new(
                "`session` takes only `keyed`; each message's app_metadata is a sweep body",
            )),
            Some(_) if wire.keyed.is_some() => {
                Err(Error::new("`keyed` belongs to `session` commands"))
            }
            Some("sweep") => {
                let key = wire.key.clone();
                if key.as_deref() == Some("") {
                    return Err(Error::new("`key` must name a column"));
                }
                let fields = decode_fields(wire)?;
                if fields.series.is_some() && key.is_none() {
                    return Err(Error::new(
                        "`series` needs `key`: an unkeyed upload is one series",
                    ));
                }
                Ok(Self::Sweep(ExchangeSweep {
                    grid: fields.grid,
                    fee: fields.fee,
                    key,
                    series: fields.series,
                    rows: fields.rows,
                }))
            }
            Some(other) => Err(Error::new(format!(
                "unknown op {other:?}; expected \"echo\", \"sweep\" or \"session\""
            ))),
            None => Err(Error::new(
                "DoExchange command needs `op`: \"echo\", \"sweep\" or \"session\"",
            )),
        }
    }

    /// The JSON command.
    pub fn encode(&self) -> Vec<u8> {
        let wire = match self {
            Self::Echo => Wire {
                op: Some("echo".into()),
                ..Wire::default()
            },
            Self::Session { keyed: false } => return SESSION_COMMAND.to_vec(),
            Self::Session { keyed: true } => Wire {
                op: Some("session".into()),
                keyed: Some(true),
                ..Wire::default()
            },
            Self::Sweep(s) => Wire {
                op: Some("sweep".into()),
                key: s.key.clone(),
                ..Wire::from_fields(&s.grid, s.fee, s.series.as_deref(), s.rows)
            },
        };
        serde_json::to_vec(&wire).expect("an exchange command serialises")
    }
}

/// The JSON shape shared by every form, as it travels.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dataset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lengths: Option<Vec<Number>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<Vec<Vec<Number>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fee: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    series: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<Number>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keyed: Option<bool>,
}

impl Wire {
    fn from_fields(
        grid: &Grid,
        fee: Option<f64>,
        series: Option<&[String]>,
        rows: Option<RowRange>,
    ) -> Self {
        let numbers = |v: &[u32]| v.iter().map(|&x| Number::from(x)).collect::<Vec<_>>();
        let (lengths, params) = match grid {
            Grid::Lengths(l) => (Some(numbers(l)), None),
            Grid::Params(p) => (None, Some(p.iter().map(|t| numbers(t)).collect())),
        };
        Self {
            lengths,
            params,
            fee,
            series: series.map(<[String]>::to_vec),
            rows: rows.map(|r| vec![Number::from(r.start), Number::from(r.end)]),
            ..Self::default()
        }
    }
}

/// The fields every sweep form shares, decoded and checked.
struct Fields {
    grid: Grid,
    fee: Option<f64>,
    series: Option<Vec<String>>,
    rows: Option<RowRange>,
}

fn parse(body: &[u8]) -> Result<Wire> {
    let text =
        std::str::from_utf8(body).map_err(|e| Error::new(format!("body is not UTF-8: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::new(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error::new("body must be a JSON object"));
    }
    let wire: Wire =
        serde_json::from_value(value).map_err(|e| Error::new(format!("bad sweep body: {e}")))?;
    match &wire.v {
        None => {}
        Some(v) if v.as_u64() == Some(BODY_VERSION) => {}
        Some(v) => {
            return Err(Error::new(format!(
                "unsupported body version {v}; this server speaks \"v\": {BODY_VERSION}"
            )));
        }
    }
    Ok(wire)
}

fn decode_fields(wire: Wire) -> Result<Fields> {
    if let Some(fee) = wire.fee
        && (!fee.is_finite() || fee < 0.0)
    {
        return Err(Error::new(format!(
            "`fee` must be a finite number >= 0, got {fee}"
        )));
    }
    let grid = match (wire.lengths, wire.params) {
        (Some(lengths), None) => Grid::Lengths(
            lengths
                .iter()
                .enumerate()
                .map(|(i, l)| window(l, || format!("lengths[{i}]")))
                .collect::<Result<_>>()?,
        ),
        (None, Some(params)) => Grid::Params(
            params
                .iter()
                .enumerate()
                .map(|(i, t)| tuple(i, t))
                .collect::<Result<_>>()?,
        ),
        (Some(_), Some(_)) => {
            return Err(Error::new(
                "give exactly one of `lengths` and `params`, not both",
            ));
        }
        (None, None) => return Err(Error::new("give exactly one of `lengths` and `params`")),
    };
    let series = wire.series.map(check_series).transpose()?;
    let rows = wire
        .rows
        .map(|r| {
            let bad = || {
                Error::new(format!(
                    "`rows` must be [start, end], two integers with 0 <= start < end, got {}",
                    serde_json::to_string(&r).unwrap_or_default()
                ))
            };
            match r.as_slice() {
                [s, e] => RowRange::new(s.as_u64().ok_or_else(bad)?, e.as_u64().ok_or_else(bad)?),
                _ => Err(bad()),
            }
        })
        .transpose()?;
    Ok(Fields {
        grid,
        fee: wire.fee,
        series,
        rows,
    })
}

fn check_series(series: Vec<String>) -> Result<Vec<String>> {
    if series.is_empty() {
        return Err(Error::new(
            "`series` must list at least one series (leave it out for all of them)",
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(series.len());
    if let Some(dup) = series.iter().find(|s| !seen.insert(s.as_str())) {
        return Err(Error::new(format!("series {dup:?} is listed twice")));
    }
    Ok(series)
}

fn check_count(count: usize, max: usize) -> Result<()> {
    if count > max {
        return Err(Error::new(format!(
            "{count} combos requested; this server allows at most {max} per call (--max-combos)"
        )));
    }
    Ok(())
}

fn tuple(i: usize, t: &[Number]) -> Result<[u32; 6]> {
    if t.len() != 6 {
        return Err(Error::new(format!(
            "params[{i}] has {} values; each tuple is [half, full, sqrt, p3, p2, p]",
            t.len()
        )));
    }
    const FIELDS: [&str; 6] = ["half", "full", "sqrt", "p3", "p2", "p"];
    let mut out = [0u32; 6];
    for (j, w) in t.iter().enumerate() {
        out[j] = window(w, || format!("params[{i}][{j}] ({})", FIELDS[j]))?;
    }
    Ok(out)
}

/// A JSON number that must be an integer in `1..=MAX_WINDOW`.
fn window(n: &Number, what: impl Fn() -> String) -> Result<u32> {
    match n.as_u64() {
        Some(v) if (1..=u64::from(MAX_WINDOW)).contains(&v) => Ok(v as u32),
        _ => Err(Error::new(format!(
            "{} must be an integer in 1..={MAX_WINDOW}, got {n}",
            what()
        ))),
    }
}

/// Checks the runs of a request on a keyed dataset (`series` x `combos`) against `max`
/// (`--max-combos` counts series x combos).
///
/// # Errors
/// [`Error`] naming the count and the limit.
pub fn check_runs(series: usize, combos: usize, max: usize) -> Result<()> {
    let total = series.saturating_mul(combos);
    if total > max {
        return Err(Error::new(format!(
            "{series} series x {combos} combos = {total} runs requested; this server allows at most {max} per call (--max-combos)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        SweepRequest::decode(body.as_bytes())
            .and_then(|r| r.check_combos(10).map(|()| r))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn lengths_params_and_options() {
        let r = SweepRequest::decode(br#"{"dataset": "paper", "lengths": [6, 8]}"#).unwrap();
        assert_eq!(r, SweepRequest::lengths("paper", [6, 8]));
        assert_eq!(r.fee(), DEFAULT_FEE);
        let r = SweepRequest::decode(
            br#"{"dataset": "p", "params": [[1,2,3,4,5,6]], "fee": 0, "series": ["A", "B"], "rows": [10, 20], "v": 1}"#,
        )
        .unwrap();
        assert_eq!(r.grid, Grid::Params(vec![[1, 2, 3, 4, 5, 6]]));
        assert_eq!(r.fee, Some(0.0));
        assert_eq!(
            r.series.as_deref(),
            Some(&["A".to_owned(), "B".to_owned()][..])
        );
        assert_eq!(r.rows, Some(RowRange { start: 10, end: 20 }));
        let r = SweepRequest::decode(br#"{"dataset": "p", "lengths": [2147483647]}"#).unwrap();
        assert_eq!(r.grid, Grid::Lengths(vec![MAX_WINDOW]));
    }

    #[test]
    fn encode_decode_round_trip() {
        let cases = [
            SweepRequest::lengths("p", [6, 8, 10]).with_fee(0.001),
            SweepRequest::params("x.y", [[3, 6, 2, 1, 2, 3]])
                .with_series(["AAPL", "MSFT"])
                .with_rows(RowRange::new(0, 100_000).unwrap()),
        ];
        for r in cases {
            assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        }
        assert_eq!(
            String::from_utf8(SweepRequest::lengths("p", [6]).encode()).unwrap(),
            r#"{"dataset":"p","lengths":[6]}"#
        );
    }

    #[test]
    fn refusals() {
        assert!(
            SweepRequest::decode(b"\xff")
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
        assert!(err("{").contains("not valid JSON"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err(r#"{"dataset": "p"}"#).contains("exactly one"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "params": []}"#).contains("not both"));
        assert!(err(r#"{"dataset": 5, "lengths": [6]}"#).contains("bad sweep body"));
        assert!(err(r#"{"lengths": [6]}"#).contains("needs `dataset`"));
        assert!(err(r#"{"dataset": "p", "lengths": [0]}"#).contains("lengths[0]"));
        assert!(err(r#"{"dataset": "p", "lengths": [6.5]}"#).contains("lengths[0]"));
        assert!(err(r#"{"dataset": "p", "lengths": [2147483648]}"#).contains("1..=2147483647"));
        assert!(err(r#"{"dataset": "p", "lengths": ["6"]}"#).contains("bad sweep body"));
        assert!(err(r#"{"dataset": "p", "params": [[1,2,3]]}"#).contains("has 3 values"));
        assert!(
            err(r#"{"dataset": "p", "params": [[1,2,3,4,5,-6]]}"#).contains("params[0][5] (p)")
        );
        assert!(err(r#"{"dataset": "p", "lengths": [6], "fee": -0.1}"#).contains("fee"));
        assert!(
            err(r#"{"dataset": "p", "lengths": [6,6,6,6,6,6,6,6,6,6,6]}"#).contains("at most 10")
        );
        assert!(err(r#"{"dataset": "p", "lengths": [6], "fees": 1}"#).contains("unknown field"));
        assert!(err(r#"{"dataset": "a b", "lengths": [6]}"#).contains("character"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "op": "sweep"}"#).contains("`op`"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "v": 2}"#).contains("version"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "key": "s"}"#).contains("`key`"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": []}"#).contains("at least one"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": ["A", "A"]}"#).contains("twice"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": [1]}"#).contains("bad sweep"));
        for rows in [
            "[5, 5]",
            "[6, 5]",
            "[-1, 5]",
            "[1]",
            "[1, 2, 3]",
            "[0.5, 2]",
            "\"0:5\"",
        ] {
            let e = err(&format!(
                r#"{{"dataset": "p", "lengths": [6], "rows": {rows}}}"#
            ));
            assert!(e.contains("rows") || e.contains("bad sweep"), "{rows}: {e}");
        }
    }

    #[test]
    fn series_times_combos_limit() {
        assert!(check_runs(3, 3, 9).is_ok());
        let e = check_runs(3, 4, 9).unwrap_err().to_string();
        assert!(e.contains("3 series x 4 combos = 12"), "{e}");
    }

    #[test]
    fn chunks_keep_options() {
        let r = SweepRequest::lengths("p", [6, 8, 10])
            .with_fee(0.001)
            .with_rows(RowRange::new(1, 9).unwrap());
        let parts = r.chunks(2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].grid, Grid::Lengths(vec![10]));
        assert_eq!((parts[1].fee, parts[1].rows), (r.fee, r.rows));
        assert_eq!(r.chunks(5), vec![r.clone()]);
    }

    #[test]
    fn exchange_commands() {
        let cmd = |s: &str| ExchangeCommand::decode(s.as_bytes());
        assert_eq!(cmd(r#"{"op": "echo"}"#).unwrap(), ExchangeCommand::Echo);
        let plain = ExchangeCommand::Session { keyed: false };
        let keyed = ExchangeCommand::Session { keyed: true };
        assert_eq!(cmd(r#"{"op": "session"}"#).unwrap(), plain);
        assert_eq!(ExchangeCommand::decode(SESSION_COMMAND).unwrap(), plain);
        assert_eq!(cmd(r#"{"op": "session", "keyed": true}"#).unwrap(), keyed);
        assert_eq!(ExchangeCommand::decode(&keyed.encode()).unwrap(), keyed);
        match cmd(
            r#"{"op": "sweep", "lengths": [6], "key": "sym", "series": ["A"], "rows": [0, 9]}"#,
        )
        .unwrap()
        {
            ExchangeCommand::Sweep(s) => {
                assert_eq!(s.grid.len(), 1);
                assert_eq!(s.key.as_deref(), Some("sym"));
                assert_eq!(s.rows, Some(RowRange { start: 0, end: 9 }));
                let again = ExchangeCommand::Sweep(s.clone()).encode();
                assert_eq!(
                    ExchangeCommand::decode(&again).unwrap(),
                    ExchangeCommand::Sweep(s)
                );
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"op": "dance"}"#,
            r#"{"lengths": [6]}"#,
            r#"{"op": "echo", "fee": 0}"#,
            r#"{"op": "session", "lengths": [6]}"#,
            r#"{"op": "sweep", "dataset": "p", "lengths": [6]}"#,
            r#"{"op": "sweep", "lengths": [6], "series": ["A"]}"#,
            r#"{"op": "sweep", "lengths": [6], "key": ""}"#,
            r#"{"op": "echo", "keyed": true}"#,
            r#"{"op": "sweep", "lengths": [6], "keyed": true}"#,
        ] {
            assert!(cmd(bad).is_err(), "{bad}");
        }
    }
}
