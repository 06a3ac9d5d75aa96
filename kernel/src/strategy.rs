//! The built-in strategies' tuned paths: [`sweep_params`] runs typed combos
//! ([`crate::builtins::Params`]) of any built-in, `hma_sar` on the paper kernel
//! ([`crate::sweep`]), the others on `run`, which computes each distinct indicator array of a
//! call once ([`crate::lines::indicators`]) and crosses them.
//!
//! Everything after the signal (the side filter, stops, warm-up, booking, metrics) is the
//! shared [`crate::execution`] loop and [`crate::Ledger`].

use crate::builtins::Params;
use crate::execution::Execution;
use crate::lines::Bars;
use crate::sweep::SweepControl;
use crate::{Combo, ComboResult, Error, Result};

mod run;

pub use run::{line_bytes, memory_bytes, scratch_bytes, work};

impl Params {
    /// The arrays of this combo that a sweep over a row range can cut from the same arrays
    /// over the whole series ([`crate::ArrayKey::of_range`]): the HMA and HMA3 lines and the
    /// combo's own sign bytes (which of the two a sweep keeps depends on its grid alone, so it
    /// is the same for the whole series and its ranges), the SMAs.
    /// A sweep of combos that between them have every such array of a grid, on the whole
    /// series, leaves them in a cache for every range of it.
    pub fn cuttable_lines(&self) -> Vec<crate::ArrayKey> {
        use crate::ArrayKey;
        let keys = match *self {
            Self::HmaSar(c) => vec![
                ArrayKey::Hma([c.half(), c.full(), c.sqrt()]),
                ArrayKey::Hma3([c.p3(), c.p2(), c.p()]),
                ArrayKey::Signs([c.half(), c.full(), c.sqrt(), c.p3(), c.p2(), c.p()]),
            ],
            Self::SmaCross { fast, slow } => vec![ArrayKey::Sma(fast), ArrayKey::Sma(slow)],
            Self::EmaCross { .. } | Self::Donchian { .. } | Self::RsiRevert { .. } => Vec::new(),
        };
        debug_assert!(keys.iter().all(|k| k.of_range(&[], 0, 0).is_some()));
        keys
    }
}

/// Runs every combo over `close` under `exec`, in input order: `hma_sar` combos on the paper
/// kernel, the others on the indicator sweep. The results are the same for any thread count,
/// grouping or cache state, and equal [`crate::oracle::run`]'s trade for trade.
///
/// # Errors
/// As [`Execution::validate`]; [`Error::Cancelled`] once `control.cancelled` answers true.
pub fn sweep_params(
    close: &[f64],
    params: &[Params],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    sweep_params_on(&Bars::closes(close), params, exec, control)
}

/// [`sweep_params`] over bars: the execution options of v1.3 read their opens, highs and
/// lows (the strategies themselves read the closes).
///
/// # Errors
/// As [`sweep_params`], and [`Error::InvalidOption`] for an option whose column `bars` lacks.
pub fn sweep_params_on(
    bars: &Bars<'_>,
    params: &[Params],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    exec.validate()?;
    exec.check_bars(bars)?;
    if let Some(records) = control.records.filter(|r| r.len() != params.len()) {
        return Err(Error::InvalidOption {
            name: "records",
            message: format!("has {} slots for {} combos", records.len(), params.len()),
        });
    }
    let hma: Vec<(usize, Combo)> = params
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Params::HmaSar(c) => Some((i, *c)),
            _ => None,
        })
        .collect();
    if hma.len() == params.len() {
        let combos: Vec<Combo> = hma.into_iter().map(|(_, c)| c).collect();
        return crate::sweep::sweep_executed_on(bars, &combos, exec, control);
    }
    // Mixed strategies: each kind runs on its own path with its own record slots, moved to the
    // combos' positions after.
    let mut results = vec![ComboResult::default(); params.len()];
    let part = |indices: &[usize],
                run: &dyn Fn(&SweepControl<'_>) -> Result<Vec<ComboResult>>,
                results: &mut [ComboResult]|
     -> Result<()> {
        let records = control.records.map(|r| r.like(indices.len()));
        let sub = SweepControl {
            records: records.as_ref(),
            ..*control
        };
        for (&i, r) in indices.iter().zip(run(&sub)?) {
            results[i] = r;
        }
        if let (Some(all), Some(part)) = (control.records, records) {
            for (&i, record) in indices.iter().zip(part.into_records()) {
                all.put(i, record);
            }
        }
        Ok(())
    };
    let combos: Vec<Combo> = hma.iter().map(|&(_, c)| c).collect();
    let at: Vec<usize> = hma.iter().map(|&(i, _)| i).collect();
    if !at.is_empty() {
        part(
            &at,
            &|c| crate::sweep::sweep_executed_on(bars, &combos, exec, c),
            &mut results,
        )?;
    }
    let others: Vec<usize> = (0..params.len())
        .filter(|&i| !matches!(params[i], Params::HmaSar(_)))
        .collect();
    let picked: Vec<Params> = others.iter().map(|&i| params[i]).collect();
    part(
        &others,
        &|c| run::sweep(bars, &picked, exec, c),
        &mut results,
    )?;
    Ok(results)
}
