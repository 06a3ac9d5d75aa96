//! Parsing `--lengths` specs and `--params` files.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use sweepflight_kernel::Combo;

use crate::input::InputError;

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

/// Explicit combos from a CSV (header optional) or JSON file.
pub(crate) fn read_params(path: &Path) -> anyhow::Result<Vec<Combo>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let rows: Vec<Vec<u32>> = if text.trim_start().starts_with('[') {
        serde_json::from_str(&text).map_err(|e| InputError(format!("{}: {e}", path.display())))?
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter(|l| !l.starts_with(|c: char| c.is_ascii_alphabetic()))
            .map(|l| {
                l.split(',')
                    .map(|v| v.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()
            .map_err(|e| InputError(format!("{}: {e}", path.display())))?
    };
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let w: [u32; 6] = r.try_into().map_err(|r: Vec<u32>| {
                InputError(format!("params row {i} has {} values, expected 6", r.len()))
            })?;
            Combo::new(w).map_err(|e| InputError(format!("params row {i}: {e}")).into())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
