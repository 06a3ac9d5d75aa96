//! The strategies of protocol v1.2 (strategies.md): what each one's parameters are, the typed
//! combo [`Params`], and [`sweep_params`], the one entry point that runs any of them.
//!
//! A strategy is its indicators and its signal rule; everything after the signal (the side
//! filter, stops, warm-up, booking, metrics) is the shared [`crate::execution`] loop and
//! [`crate::Ledger`]. `hma_sar` runs on the paper kernel ([`crate::sweep`]); the others on
//! [`indicators`], which computes each distinct indicator array of a call once.

use crate::execution::Execution;
use crate::lines::Bars;
use crate::sweep::SweepControl;
use crate::{Combo, ComboResult, Error, Result};

pub mod indicators;
mod run;

pub use run::{line_bytes, memory_bytes, scratch_bytes, work};

/// The strategies, in the order the protocol lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// The paper's HMA / HMA3 stop-and-reverse (kernel.md).
    HmaSar,
    /// Fast SMA crossing the slow SMA.
    SmaCross,
    /// Fast EMA crossing the slow EMA.
    EmaCross,
    /// The close breaking out of the channel of the `n` closes before it.
    Donchian,
    /// Wilder's RSI leaving the `lower` / `upper` band.
    RsiRevert,
}

/// Whether a parameter is a JSON integer (a window) or any number (a threshold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// An integer >= 1.
    Int,
    /// A finite number.
    Number,
}

impl Strategy {
    /// Every strategy.
    pub const ALL: [Self; 5] = [
        Self::HmaSar,
        Self::SmaCross,
        Self::EmaCross,
        Self::Donchian,
        Self::RsiRevert,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::HmaSar => "hma_sar",
            Self::SmaCross => "sma_cross",
            Self::EmaCross => "ema_cross",
            Self::Donchian => "donchian",
            Self::RsiRevert => "rsi_revert",
        }
    }

    /// The strategy of a wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The parameters in wire order, with their kinds.
    pub fn params(self) -> &'static [(&'static str, ParamKind)] {
        use ParamKind::{Int, Number};
        match self {
            Self::HmaSar => &[
                ("half", Int),
                ("full", Int),
                ("sqrt", Int),
                ("p3", Int),
                ("p2", Int),
                ("p", Int),
            ],
            Self::SmaCross | Self::EmaCross => &[("fast", Int), ("slow", Int)],
            Self::Donchian => &[("n", Int)],
            Self::RsiRevert => &[("n", Int), ("lower", Number), ("upper", Number)],
        }
    }
}

/// One combo of any strategy, validated: windows >= 1, and for `rsi_revert`
/// `0 <= lower < upper <= 100`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Params {
    /// `hma_sar`: the paper's six windows.
    HmaSar(Combo),
    /// `sma_cross`: +1 where SMA(fast) crosses above SMA(slow), -1 where below.
    SmaCross {
        /// Window of the fast average.
        fast: u32,
        /// Window of the slow average.
        slow: u32,
    },
    /// `ema_cross`: as `sma_cross` with EMAs.
    EmaCross {
        /// Window of the fast average.
        fast: u32,
        /// Window of the slow average.
        slow: u32,
    },
    /// `donchian`: +1 where the close is above the highest of the `n` closes before it, -1
    /// where below the lowest.
    Donchian {
        /// Channel length.
        n: u32,
    },
    /// `rsi_revert`: +1 where RSI(n) rises through `lower`, -1 where it falls through `upper`.
    RsiRevert {
        /// RSI window.
        n: u32,
        /// Lower band (0..100).
        lower: f64,
        /// Upper band (lower..=100).
        upper: f64,
    },
}

impl Params {
    /// A combo of `strategy` from its values in wire order (integers as f64).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] naming the parameter: wrong arity, a window that is not an
    /// integer in `1..=2147483647`, a band outside `0..=100`, or `lower >= upper`.
    pub fn new(strategy: Strategy, values: &[f64]) -> Result<Self> {
        let specs = strategy.params();
        if values.len() != specs.len() {
            return Err(Error::InvalidParam {
                param: "params",
                message: format!(
                    "{} takes {} values ({}), got {}",
                    strategy.name(),
                    specs.len(),
                    specs.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
                    values.len()
                ),
            });
        }
        let window = |k: usize| -> Result<u32> {
            let v = values[k];
            if v.fract() == 0.0 && (1.0..=2_147_483_647.0).contains(&v) {
                Ok(v as u32)
            } else {
                Err(Error::InvalidParam {
                    param: specs[k].0,
                    message: format!("must be an integer in 1..=2147483647, got {v}"),
                })
            }
        };
        Ok(match strategy {
            Strategy::HmaSar => {
                let mut w = [0u32; 6];
                for (k, slot) in w.iter_mut().enumerate() {
                    *slot = window(k)?;
                }
                Self::HmaSar(Combo::new(w)?)
            }
            Strategy::SmaCross => Self::SmaCross {
                fast: window(0)?,
                slow: window(1)?,
            },
            Strategy::EmaCross => Self::EmaCross {
                fast: window(0)?,
                slow: window(1)?,
            },
            Strategy::Donchian => Self::Donchian { n: window(0)? },
            Strategy::RsiRevert => {
                let n = window(0)?;
                let (lower, upper) = (values[1], values[2]);
                for (param, v) in [("lower", lower), ("upper", upper)] {
                    if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
                        return Err(Error::InvalidParam {
                            param,
                            message: format!("must be a number in 0..=100, got {v}"),
                        });
                    }
                }
                if lower >= upper {
                    return Err(Error::InvalidParam {
                        param: "lower",
                        message: format!("must be below upper, got {lower} >= {upper}"),
                    });
                }
                Self::RsiRevert { n, lower, upper }
            }
        })
    }

    /// The strategy this combo belongs to.
    pub fn strategy(&self) -> Strategy {
        match self {
            Self::HmaSar(_) => Strategy::HmaSar,
            Self::SmaCross { .. } => Strategy::SmaCross,
            Self::EmaCross { .. } => Strategy::EmaCross,
            Self::Donchian { .. } => Strategy::Donchian,
            Self::RsiRevert { .. } => Strategy::RsiRevert,
        }
    }

    /// The lines of this combo that a sweep over a row range can cut from the same lines over
    /// the whole series ([`crate::ArrayKey::of_range`]): the HMA and HMA3 lines, the SMAs.
    /// A sweep of combos that between them have every such line of a grid, on the whole
    /// series, leaves them in a cache for every range of it.
    pub fn cuttable_lines(&self) -> Vec<crate::ArrayKey> {
        use crate::ArrayKey;
        let keys = match *self {
            Self::HmaSar(c) => vec![
                ArrayKey::Hma([c.half(), c.full(), c.sqrt()]),
                ArrayKey::Hma3([c.p3(), c.p2(), c.p()]),
            ],
            Self::SmaCross { fast, slow } => vec![ArrayKey::Sma(fast), ArrayKey::Sma(slow)],
            Self::EmaCross { .. } | Self::Donchian { .. } | Self::RsiRevert { .. } => Vec::new(),
        };
        debug_assert!(keys.iter().all(|k| k.of_range(&[], 0, 0).is_some()));
        keys
    }

    /// Parameter `k` in wire order, as f64 (windows are exact).
    pub fn value(&self, k: usize) -> f64 {
        match *self {
            Self::HmaSar(c) => f64::from(c.windows()[k]),
            Self::SmaCross { fast, slow } | Self::EmaCross { fast, slow } => {
                f64::from([fast, slow][k])
            }
            Self::Donchian { n } => {
                debug_assert_eq!(k, 0);
                f64::from(n)
            }
            Self::RsiRevert { n, lower, upper } => [f64::from(n), lower, upper][k],
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_params_validate() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::from_name(s.name()), Some(s));
        }
        assert_eq!(Strategy::from_name("macd"), None);
        let p = Params::new(Strategy::RsiRevert, &[14.0, 30.0, 70.0]).unwrap();
        assert_eq!((p.value(0), p.value(1), p.value(2)), (14.0, 30.0, 70.0));
        let err = |s, v: &[f64]| Params::new(s, v).unwrap_err().to_string();
        assert!(err(Strategy::SmaCross, &[5.0]).contains("takes 2 values (fast, slow)"));
        assert!(err(Strategy::SmaCross, &[0.0, 5.0]).contains("`fast`"));
        assert!(err(Strategy::EmaCross, &[5.0, 2.5]).contains("`slow`"));
        assert!(err(Strategy::Donchian, &[3e9]).contains("`n`"));
        assert!(err(Strategy::RsiRevert, &[14.0, 70.0, 30.0]).contains("below upper"));
        assert!(err(Strategy::RsiRevert, &[14.0, 30.0, 30.0]).contains("below upper"));
        assert!(err(Strategy::RsiRevert, &[14.0, -1.0, 30.0]).contains("`lower`"));
        assert!(err(Strategy::RsiRevert, &[14.0, 1.0, f64::NAN]).contains("`upper`"));
        assert!(err(Strategy::HmaSar, &[3.0, 6.0, 0.0, 1.0, 2.0, 3.0]).contains("sqrt"));
    }
}
