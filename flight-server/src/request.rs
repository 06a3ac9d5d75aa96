//! Typed decoding of everything a client sends as opaque bytes: sweep bodies, DoExchange
//! commands, descriptors and tickets. Each has one decoding function; handlers only see the
//! typed values.

use arrow_flight::FlightDescriptor;
use arrow_flight::flight_descriptor::DescriptorType;
use serde::{Deserialize, Serialize};
use sweepflight_kernel::{Combo, DEFAULT_FEE};

use crate::store::validate_name;
use crate::{Error, Result};

/// Largest window or length the contract accepts (`i32::MAX`).
pub const MAX_WINDOW: i64 = 2_147_483_647;

/// What to sweep: combos, derived or explicit, and the fee.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    /// Combos in request order.
    pub combos: Vec<Combo>,
    /// Round-trip fee as a fraction.
    pub fee: f64,
}

/// A `sweep` action: a stored dataset and what to run on it.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    /// Name of the dataset.
    pub dataset: String,
    /// The combos and fee.
    pub spec: SweepSpec,
}

/// A DoExchange command.
#[derive(Debug, Clone, PartialEq)]
pub enum ExchangeCommand {
    /// Send every batch back unchanged.
    Echo,
    /// Sweep the series streamed in this exchange; nothing is stored.
    Sweep(SweepSpec),
    /// Extension: a long-lived stream of params-only sweeps of stored datasets, one request
    /// per inbound message (a `sweep` body in its app_metadata), one result batch back each.
    Session,
}

/// The JSON fields shared by a sweep action and a DoExchange sweep.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepBody {
    #[serde(default)]
    dataset: Option<String>,
    #[serde(default)]
    op: Option<String>,
    #[serde(default)]
    lengths: Option<Vec<serde_json::Number>>,
    #[serde(default)]
    params: Option<Vec<Vec<serde_json::Number>>>,
    #[serde(default)]
    fee: Option<f64>,
}

/// Decodes a `sweep` action body.
///
/// # Errors
/// [`Error::InvalidArgument`] for anything the contract refuses, including more than
/// `max_combos` combos.
pub fn sweep_request(body: &[u8], max_combos: usize) -> Result<SweepRequest> {
    let body = parse_body(body)?;
    if body.op.is_some() {
        return Err(Error::invalid(
            "`op` belongs to DoExchange commands, not to the sweep action",
        ));
    }
    let dataset = body
        .dataset
        .clone()
        .ok_or_else(|| Error::invalid("sweep body needs `dataset`, a string"))?;
    validate_name(&dataset)?;
    Ok(SweepRequest {
        dataset,
        spec: sweep_spec(body, max_combos)?,
    })
}

/// Decodes the CMD of a DoExchange descriptor.
///
/// # Errors
/// [`Error::InvalidArgument`] for a non-CMD descriptor, a bad body or an unknown `op`.
pub fn exchange_command(
    descriptor: Option<&FlightDescriptor>,
    max_combos: usize,
) -> Result<ExchangeCommand> {
    let d = descriptor
        .ok_or_else(|| Error::invalid("DoExchange needs a CMD descriptor on its first message"))?;
    if d.r#type() != DescriptorType::Cmd {
        return Err(Error::invalid(
            "DoExchange needs a CMD descriptor, got a PATH one",
        ));
    }
    let body = parse_body(&d.cmd)?;
    if body.dataset.is_some() {
        return Err(Error::invalid(
            "a DoExchange command carries its series; `dataset` is not allowed",
        ));
    }
    match body.op.as_deref() {
        Some("echo") if body.lengths.is_none() && body.params.is_none() && body.fee.is_none() => {
            Ok(ExchangeCommand::Echo)
        }
        Some("echo") => Err(Error::invalid("`echo` takes no other fields")),
        Some("session")
            if body.lengths.is_none() && body.params.is_none() && body.fee.is_none() =>
        {
            Ok(ExchangeCommand::Session)
        }
        Some("session") => Err(Error::invalid(
            "`session` takes no other fields; each message's app_metadata is a sweep body",
        )),
        Some("sweep") => Ok(ExchangeCommand::Sweep(sweep_spec(body, max_combos)?)),
        Some(other) => Err(Error::invalid(format!(
            "unknown op {other:?}; expected \"echo\", \"sweep\" or \"session\""
        ))),
        None => Err(Error::invalid(
            "DoExchange command needs `op`: \"echo\" or \"sweep\"",
        )),
    }
}

/// The dataset name of a PATH descriptor `[name]`.
///
/// # Errors
/// [`Error::InvalidArgument`] for any other descriptor or a bad name.
pub fn dataset_path(d: &FlightDescriptor) -> Result<String> {
    if d.r#type() != DescriptorType::Path {
        return Err(Error::invalid(
            "expected a PATH descriptor [name], got a CMD one",
        ));
    }
    match d.path.as_slice() {
        [name] => {
            validate_name(name)?;
            Ok(name.clone())
        }
        p => Err(Error::invalid(format!(
            "expected a PATH descriptor with exactly one element [name], got {} elements",
            p.len()
        ))),
    }
}

fn parse_body(body: &[u8]) -> Result<SweepBody> {
    let text =
        std::str::from_utf8(body).map_err(|e| Error::invalid(format!("body is not UTF-8: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error::invalid("body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| Error::invalid(format!("bad sweep body: {e}")))
}

fn sweep_spec(body: SweepBody, max_combos: usize) -> Result<SweepSpec> {
    let fee = body.fee.unwrap_or(DEFAULT_FEE);
    if !fee.is_finite() || fee < 0.0 {
        return Err(Error::invalid(format!(
            "`fee` must be a finite number >= 0, got {fee}"
        )));
    }
    let count = match (&body.lengths, &body.params) {
        (Some(l), None) => l.len(),
        (None, Some(p)) => p.len(),
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "give exactly one of `lengths` and `params`, not both",
            ));
        }
        (None, None) => return Err(Error::invalid("give exactly one of `lengths` and `params`")),
    };
    if count > max_combos {
        return Err(Error::invalid(format!(
            "{count} combos requested; this server allows at most {max_combos} per call (--max-combos)"
        )));
    }
    let combos = match (body.lengths, body.params) {
        (Some(lengths), None) => lengths
            .iter()
            .enumerate()
            .map(|(i, l)| Ok(Combo::from_length(window(l, || format!("lengths[{i}]"))?)?))
            .collect::<Result<_>>()?,
        (None, Some(params)) => params
            .iter()
            .enumerate()
            .map(|(i, t)| explicit_combo(i, t))
            .collect::<Result<_>>()?,
        _ => unreachable!("checked above"),
    };
    Ok(SweepSpec { combos, fee })
}

fn explicit_combo(i: usize, tuple: &[serde_json::Number]) -> Result<Combo> {
    let windows: [serde_json::Number; 6] = tuple.to_vec().try_into().map_err(|_| {
        Error::invalid(format!(
            "params[{i}] has {} values; each tuple is [half, full, sqrt, p3, p2, p]",
            tuple.len()
        ))
    })?;
    let mut out = [0u32; 6];
    for (j, w) in windows.iter().enumerate() {
        out[j] = window(w, || format!("params[{i}][{j}] ({})", Combo::FIELDS[j]))?;
    }
    Ok(Combo::new(out)?)
}

/// A JSON number that must be an integer in `1..=MAX_WINDOW`.
fn window(n: &serde_json::Number, what: impl Fn() -> String) -> Result<u32> {
    match n.as_i64() {
        Some(v) if (1..=MAX_WINDOW).contains(&v) => Ok(v as u32),
        _ => Err(Error::invalid(format!(
            "{} must be an integer in 1..={MAX_WINDOW}, got {n}",
            what()
        ))),
    }
}

/// The DoGet ticket: versioned JSON, opaque to clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Ticket {
    /// The rows of a stored dataset.
    Dataset {
        /// Ticket format version; 1.
        v: u32,
        /// Dataset name.
        name: String,
    },
}

impl Ticket {
    /// The ticket for a dataset's rows.
    pub fn dataset(name: &str) -> Self {
        Self::Dataset {
            v: 1,
            name: name.to_owned(),
        }
    }

    /// Serialised form carried in `arrow_flight::Ticket::ticket`.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("ticket serialises")
    }

    /// Parses a ticket this server issued.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for anything else.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let t: Self = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid(format!("not a sweepflight ticket: {e}")))?;
        match &t {
            Self::Dataset { v: 1, name } => validate_name(name).map(|()| t),
            Self::Dataset { v, .. } => {
                Err(Error::invalid(format!("unsupported ticket version {v}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        sweep_request(body.as_bytes(), 10).unwrap_err().to_string()
    }

    #[test]
    fn lengths_and_params() {
        let r = sweep_request(br#"{"dataset": "paper", "lengths": [6, 8]}"#, 10).unwrap();
        assert_eq!(r.dataset, "paper");
        assert_eq!(r.spec.combos[0].windows(), [3, 6, 2, 1, 2, 3]);
        assert_eq!(r.spec.fee, DEFAULT_FEE);
        let r = sweep_request(
            br#"{"dataset": "p", "params": [[1,2,3,4,5,6]], "fee": 0}"#,
            10,
        )
        .unwrap();
        assert_eq!(r.spec.combos[0].windows(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(r.spec.fee, 0.0);
        let r = sweep_request(br#"{"dataset": "p", "lengths": [2147483647]}"#, 10).unwrap();
        assert_eq!(r.spec.combos[0].full(), 2_147_483_647);
    }

    #[test]
    fn refusals() {
        assert!(
            sweep_request(b"\xff", 10)
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
    }

    #[test]
    fn exchange_commands() {
        let cmd = |s: &str| FlightDescriptor::new_cmd(s.as_bytes().to_vec());
        assert_eq!(
            exchange_command(Some(&cmd(r#"{"op": "echo"}"#)), 10).unwrap(),
            ExchangeCommand::Echo
        );
        match exchange_command(Some(&cmd(r#"{"op": "sweep", "lengths": [6]}"#)), 10).unwrap() {
            ExchangeCommand::Sweep(s) => assert_eq!(s.combos.len(), 1),
            other => panic!("{other:?}"),
        }
        assert!(exchange_command(Some(&cmd(r#"{"op": "dance"}"#)), 10).is_err());
        assert!(exchange_command(Some(&cmd(r#"{"lengths": [6]}"#)), 10).is_err());
        assert!(exchange_command(Some(&FlightDescriptor::new_path(vec!["x".into()])), 10).is_err());
        assert!(exchange_command(None, 10).is_err());
    }

    #[test]
    fn paths_and_tickets() {
        assert_eq!(
            dataset_path(&FlightDescriptor::new_path(vec!["paper".into()])).unwrap(),
            "paper"
        );
        assert!(dataset_path(&FlightDescriptor::new_path(vec!["a".into(), "b".into()])).is_err());
        assert!(dataset_path(&FlightDescriptor::new_path(vec![])).is_err());
        assert!(dataset_path(&FlightDescriptor::new_cmd(b"paper".to_vec())).is_err());
        let t = Ticket::dataset("paper");
        assert_eq!(Ticket::decode(&t.encode()).unwrap(), t);
        assert!(Ticket::decode(b"paper").is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":2,"name":"p"}"#).is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":1,"name":"../x"}"#).is_err());
    }
}
