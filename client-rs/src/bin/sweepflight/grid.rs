//! Parsing `--lengths` specs, `--grid` specs and `--params` files.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use sweepflight_protocol::{Grid, Selection, Strategy};

use crate::input::InputError;

/// A parameter the command line gave no values (`--grid` without it, a `--params` row too
/// short): an input error the command words with the dataset's columns
/// ([`sweepflight_protocol::column_hint`]), since a typo of a column becomes a parameter.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Unvalued {
    pub(crate) message: String,
    pub(crate) param: String,
}

/// `6,8,10`, `6..20`, `6..200:80`, or any comma-separated mix.
pub(crate) fn parse_lengths(spec: &str) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            InputError(format!(
                "bad length spec {part:?}: expected N, A..B or A..B:COUNT"
            ))
        };
        match part.split_once("..") {
            None => out.push(part.parse().map_err(|_| bad())?),
            Some((a, rest)) => {
                let a: u32 = a.parse().map_err(|_| bad())?;
                match rest.split_once(':') {
                    None => {
                        let b: u32 = rest.parse().map_err(|_| bad())?;
                        ensure!(a <= b, bad());
                        out.extend(a..=b);
                    }
                    Some((b, n)) => {
                        let (b, n): (u32, usize) =
                            (b.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
                        out.extend(linspace_trunc(f64::from(a), f64::from(b), n));
                    }
                }
            }
        }
    }
    if out.is_empty() {
        bail!(InputError(format!("no lengths in {spec:?}")));
    }
    Ok(out)
}

/// `numpy.linspace(a, b, n).astype(int)`.
fn linspace_trunc(a: f64, b: f64, n: usize) -> Vec<u32> {
    match n {
        0 => vec![],
        1 => vec![a as u32],
        _ => {
            let step = (b - a) / (n - 1) as f64;
            (0..n)
                .map(|i| if i + 1 == n { b } else { i as f64 * step + a } as u32)
                .collect()
        }
    }
}

/// `--grid` values, one `NAME=VALUES` per parameter of `strategy`: VALUES a comma-separated
/// mix of numbers and integer ranges in Rust's syntax (`5..50` is 5 to 49, `20..200:5` steps
/// by 5, `..=` includes the end). The lists go in the strategy's parameter order.
pub(crate) fn parse_grid(strategy: &Strategy, specs: &[String]) -> anyhow::Result<Grid> {
    let names: Vec<&str> = strategy.params().iter().map(|p| p.0).collect();
    let mut lists: Vec<Option<Vec<f64>>> = vec![None; names.len()];
    for spec in specs.iter().flat_map(|s| s.split_whitespace()) {
        let bad = |why: &str| InputError(format!("bad --grid part {spec:?}: {why}"));
        let (name, values) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=VALUES"))?;
        let k = names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| bad(&format!("{strategy} takes {}", names.join(", "))))?;
        let mut out = Vec::new();
        for part in values.split(',').filter(|p| !p.is_empty()) {
            match part.split_once("..") {
                None => out.push(part.parse::<f64>().map_err(|_| bad("not a number"))?),
                Some((a, rest)) => {
                    let (rest, step) = match rest.split_once(':') {
                        Some((b, s)) => (b, s.parse::<i64>().map_err(|_| bad("bad step"))?),
                        None => (rest, 1),
                    };
                    let (inclusive, b) = match rest.strip_prefix('=') {
                        Some(b) => (true, b),
                        None => (false, rest),
                    };
                    let a: i64 = a.parse().map_err(|_| bad("range ends must be integers"))?;
                    let b: i64 = b.parse().map_err(|_| bad("range ends must be integers"))?;
                    ensure!(step >= 1, bad("the step must be >= 1"));
                    let end = if inclusive { b + 1 } else { b };
                    out.extend((a..end).step_by(step as usize).map(|v| v as f64));
                }
            }
        }
        ensure!(!out.is_empty(), bad("no values"));
        // Each value checked as the server would, so a window of 5.9 is refused here by name,
        // never rounded or cut to an integer on its way.
        for &v in &out {
            strategy
                .check_value(k, v)
                .map_err(|e| bad(&format!("`{name}` {e}")))?;
        }
        lists[k] = Some(out);
    }
    let lists = lists
        .into_iter()
        .zip(&names)
        .map(|(l, n)| {
            l.ok_or_else(|| Unvalued {
                message: format!("--grid needs values for `{n}`"),
                param: (*n).to_owned(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Grid::Product(lists))
}

/// `--where` bounds (`COLUMN>=V`, `COLUMN<=V`; two on one column make a range), `--order-by`,
/// `--ascending` and `--top` as the body's selection.
pub(crate) fn parse_selection(
    filters: &[String],
    order_by: Option<String>,
    ascending: bool,
    top: Option<u64>,
) -> anyhow::Result<Selection> {
    let mut out = Selection {
        order_by,
        descending: !ascending,
        top,
        ..Selection::default()
    };
    for f in filters {
        let bad = || {
            InputError(format!(
                "bad --where {f:?}: expected COLUMN>=V or COLUMN<=V"
            ))
        };
        let (name, value, lower) = if let Some((n, v)) = f.split_once(">=") {
            (n, v, true)
        } else if let Some((n, v)) = f.split_once("<=") {
            (n, v, false)
        } else {
            bail!(bad());
        };
        let v: f64 = value.trim().parse().map_err(|_| bad())?;
        let name = name.trim().to_owned();
        let slot = match out.filters.iter_mut().find(|(n, ..)| *n == name) {
            Some(slot) => slot,
            None => {
                out.filters.push((name, None, None));
                out.filters.last_mut().expect("just pushed")
            }
        };
        if lower {
            slot.1 = Some(v);
        } else {
            slot.2 = Some(v);
        }
    }
    Ok(out)
}

/// Explicit combos of `strategy` from a CSV (header optional) or JSON file: rows of values in
/// the strategy's parameter order.
pub(crate) fn read_params(path: &Path, strategy: &Strategy) -> anyhow::Result<Grid> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let rows: Vec<Vec<f64>> = if text.trim_start().starts_with('[') {
        serde_json::from_str(&text).map_err(|e| InputError(format!("{}: {e}", path.display())))?
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter(|l| !l.starts_with(|c: char| c.is_ascii_alphabetic()))
            .map(|l| {
                l.split(',')
                    .map(|v| v.trim().parse::<f64>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()
            .map_err(|e| InputError(format!("{}: {e}", path.display())))?
    };
    let arity = strategy.params().len();
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != arity) {
        let message = format!(
            "params row {i} has {} values; a {strategy} row has {arity}",
            r.len()
        );
        // A row too short leaves its next parameter without a value.
        match strategy.params().get(r.len()) {
            Some((param, _)) => bail!(Unvalued {
                message,
                param: (*param).to_owned(),
            }),
            None => bail!(InputError(message)),
        }
    }
    if !strategy.is_hma_sar() {
        return Ok(Grid::Tuples(rows));
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut w = [0u32; 6];
            for (slot, v) in w.iter_mut().zip(&r) {
                ensure!(
                    v.fract() == 0.0 && *v >= 1.0 && *v <= f64::from(u32::MAX),
                    InputError(format!(
                        "params row {i}: windows are integers >= 1, got {v}"
                    ))
                );
                *slot = *v as u32;
            }
            Ok(w)
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(Grid::Params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweepflight_protocol::Builtin;

    #[test]
    fn specs() {
        assert_eq!(parse_lengths("6,8, 10").unwrap(), [6, 8, 10]);
        assert_eq!(parse_lengths("3..5,9").unwrap(), [3, 4, 5, 9]);
        assert_eq!(
            parse_lengths("6..200:80").unwrap(),
            sweepflight_kernel::paper::lengths()
        );
        for bad in ["", "x", "5..3", "1..2:x", "-1"] {
            assert!(parse_lengths(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selections() {
        let s = parse_selection(
            &[
                "trades>=30".into(),
                "max_drawdown<=25".into(),
                "trades<=900".into(),
            ],
            Some("sharpe".into()),
            false,
            Some(20),
        )
        .unwrap();
        assert_eq!(s.filters[0], ("trades".into(), Some(30.0), Some(900.0)));
        assert_eq!(s.filters[1], ("max_drawdown".into(), None, Some(25.0)));
        assert!(s.descending && s.top == Some(20));
        assert!(parse_selection(&["trades>30".into()], None, false, None).is_err());
        assert!(parse_selection(&["trades>=x".into()], None, false, None).is_err());
    }

    #[test]
    fn grids() {
        let g = parse_grid(
            &Strategy::Builtin(Builtin::SmaCross),
            &["fast=5..8 slow=20..=40:10,55".to_owned()],
        )
        .unwrap();
        assert_eq!(
            g,
            Grid::Product(vec![vec![5.0, 6.0, 7.0], vec![20.0, 30.0, 40.0, 55.0]])
        );
        let g = parse_grid(
            &Strategy::Builtin(Builtin::RsiRevert),
            &["n=14".into(), "lower=25,30.5".into(), "upper=70".into()],
        )
        .unwrap();
        assert_eq!(g.len(), 2);
        for bad in [
            &["fast=5"][..],
            &["fast=5", "mid=3"],
            &["fast=x", "slow=2"],
            &["fast=1..9:0", "slow=3"],
        ] {
            let specs: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
            assert!(
                parse_grid(&Strategy::Builtin(Builtin::SmaCross), &specs).is_err(),
                "{bad:?}"
            );
        }
    }
}
