//! The built-in strategies, the one table of them in the kernel: each built-in's wire name, its
//! parameters (names, kinds, order) and its `long` and `short` formula text (docs/language.md,
//! "From conditions to trades"), the typed combos ([`Strategy`], [`Params`]) callers build and check values with, and each
//! built-in's plain oracle from strategies.md (its [`crate::oracle::Signals`]). A built-in runs as
//! its formula row, on the one sweep of every strategy ([`sweep_params`]); the tuned paths
//! serve it by the shapes of its formulas, as they serve any program of those shapes
//! (`eval`). The formulas' parameters, in the order of first appearance, are the built-in's own
//! parameter order (tested); the `strategies` action publishes these forms.
//!
//! Adding a built-in is a row here (its formulas, its parameters, its oracle); nothing else in
//! the kernel names one (`kernel/tests/layers.rs` holds that).

use std::sync::{Arc, LazyLock};

use crate::combos::{Combos, sweep_combos};
use crate::execution::Execution;
pub use crate::expr::ParamKind;
use crate::expr::{Field, Program};
use crate::lines::Bars;
use crate::sweep::SweepControl;
use crate::{Combo, ComboResult, Error, Result};

/// A built-in strategy: its name, parameters and expression form.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The wire name.
    pub name: &'static str,
    /// The parameters in wire order, with their kinds.
    pub params: &'static [(&'static str, ParamKind)],
    /// What it does, in one line (the `strategies` action).
    pub summary: &'static str,
    /// The `long` formula.
    pub long: &'static str,
    /// The `short` formula.
    pub short: &'static str,
}

use ParamKind::{Int, Number};

/// Every built-in, in the order the `strategies` action lists them (and [`Strategy`]'s).
pub static BUILTINS: [Builtin; 5] = [
    Builtin {
        name: "hma_sar",
        params: &[
            ("half", Int),
            ("full", Int),
            ("sqrt", Int),
            ("p3", Int),
            ("p2", Int),
            ("p", Int),
        ],
        summary: "HMA(half, full, sqrt) vs HMA3(p3, p2, p): +1 where HMA3 crosses above HMA, -1 below (the paper's kernel; `lengths` derives the six windows from one L)",
        long: "cross_below(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
        short: "cross_above(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
    },
    Builtin {
        name: "sma_cross",
        params: &[("fast", Int), ("slow", Int)],
        summary: "+1 where SMA(fast) crosses above SMA(slow), -1 where below",
        long: "cross_above(sma(close, fast), sma(close, slow))",
        short: "cross_below(sma(close, fast), sma(close, slow))",
    },
    Builtin {
        name: "ema_cross",
        params: &[("fast", Int), ("slow", Int)],
        summary: "+1 where EMA(fast) crosses above EMA(slow), -1 where below",
        long: "cross_above(ema(close, fast), ema(close, slow))",
        short: "cross_below(ema(close, fast), ema(close, slow))",
    },
    Builtin {
        name: "donchian",
        params: &[("n", Int)],
        summary: "+1 where the close is above the highest of the n closes before it, -1 where below the lowest",
        long: "close > lag(highest(close, n), 1)",
        short: "close < lag(lowest(close, n), 1)",
    },
    Builtin {
        name: "rsi_revert",
        params: &[("n", Int), ("lower", Number), ("upper", Number)],
        summary: "+1 where Wilder's RSI(n) rises through lower, -1 where it falls through upper (0 <= lower < upper <= 100)",
        long: "cross_above(rsi(close, n), lower)",
        short: "cross_below(rsi(close, n), upper)",
    },
];

impl Builtin {
    /// The built-in called `name`.
    pub fn named(name: &str) -> Option<&'static Self> {
        BUILTINS.iter().find(|b| b.name == name)
    }

    /// Its formula form as a program, bound once per process (every call on a built-in name
    /// starts from it).
    pub fn program(&self) -> Arc<Program> {
        static PROGRAMS: LazyLock<Vec<Arc<Program>>> = LazyLock::new(|| {
            BUILTINS
                .iter()
                .map(|b| {
                    let texts = [(Field::Long, b.long), (Field::Short, b.short)];
                    Arc::new(Program::new(&texts).expect("the built-in formulas are valid"))
                })
                .collect()
        });
        let at = BUILTINS
            .iter()
            .position(|b| b.name == self.name)
            .expect("a row of the table");
        Arc::clone(&PROGRAMS[at])
    }
}

/// The built-in strategies, in the order of [`BUILTINS`] (the order the protocol lists them).
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

impl Strategy {
    /// Every strategy.
    pub const ALL: [Self; 5] = [
        Self::HmaSar,
        Self::SmaCross,
        Self::EmaCross,
        Self::Donchian,
        Self::RsiRevert,
    ];

    /// Its row of [`BUILTINS`] (the enum's order is the table's).
    pub fn builtin(self) -> &'static Builtin {
        &BUILTINS[self as usize]
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        self.builtin().name
    }

    /// The strategy of a wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The parameters in wire order, with their kinds.
    pub fn params(self) -> &'static [(&'static str, ParamKind)] {
        self.builtin().params
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

/// Each built-in's definition in strategies.md, written from it with [`crate::oracle`]'s plain
/// indicators: the tests' oracle of the built-ins, never the sweep's code.
impl crate::oracle::Signals for Params {
    fn signals(&self, x: &[f64]) -> Vec<i8> {
        use crate::oracle::{cross_signals, donchian_signals, ema, hma, hma3, rsi, sma};
        let len = x.len();
        match *self {
            Self::HmaSar(c) => {
                let [half, full, sqrt, p3, p2, p] = c.windows().map(|w| w as usize);
                cross_signals(&hma(x, half, full, sqrt), &hma3(x, p3, p2, p))
            }
            Self::SmaCross { fast, slow } => {
                // a = SMA(fast) above b = SMA(slow) goes long: "b crosses above a" with the roles
                // of cross_signals swapped.
                cross_signals(&sma(x, slow as usize), &sma(x, fast as usize))
            }
            Self::EmaCross { fast, slow } => {
                if fast as usize > len || slow as usize > len {
                    return vec![0; len];
                }
                cross_signals(&ema(x, slow as usize), &ema(x, fast as usize))
            }
            Self::Donchian { n } => donchian_signals(x, n as usize),
            Self::RsiRevert { n, lower, upper } => {
                let r = rsi(x, n as usize);
                let mut out = vec![0i8; len];
                for i in 1..len {
                    if r[i] > lower && r[i - 1] <= lower {
                        out[i] = 1;
                    } else if r[i] < upper && r[i - 1] >= upper {
                        out[i] = -1;
                    }
                }
                out
            }
        }
    }
}

/// Runs every typed combo over `close` under `exec`, in input order, each built-in's combos as
/// its formula row's ([`Builtin::program`]) on the one sweep of every strategy: the results
/// are the same for any thread count, grouping or cache state, and equal
/// [`crate::oracle::run`]'s trade for trade.
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
/// As [`sweep_params`], and [`Error::InvalidOption`] for an option whose column `bars` lacks
/// or records with a slot count other than the combos'.
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
    let run = |indices: &[usize], control: &SweepControl<'_>| {
        let strategy = params[indices[0]].strategy();
        let width = strategy.params().len();
        let values: Vec<f64> = indices
            .iter()
            .flat_map(|&i| (0..width).map(move |k| params[i].value(k)))
            .collect();
        let combos = Combos::of_program(strategy.builtin().program(), values, indices.len());
        sweep_combos(bars, &combos, exec, control)
    };
    let mut by_strategy: Vec<(Strategy, Vec<usize>)> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        match by_strategy.iter_mut().find(|(s, _)| *s == p.strategy()) {
            Some((_, at)) => at.push(i),
            None => by_strategy.push((p.strategy(), vec![i])),
        }
    }
    if by_strategy.len() <= 1 {
        let all: Vec<usize> = (0..params.len()).collect();
        return if all.is_empty() {
            Ok(Vec::new())
        } else {
            run(&all, control)
        };
    }
    // Mixed strategies: each one's combos in a sweep of their own, with their own record
    // slots, moved to the combos' positions after.
    let mut results = vec![ComboResult::default(); params.len()];
    for (_, at) in by_strategy {
        control.part(&at, &mut results, |sub| run(&at, sub))?;
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_params_validate() {
        for (k, s) in Strategy::ALL.into_iter().enumerate() {
            assert_eq!(Strategy::from_name(s.name()), Some(s));
            assert_eq!(s.builtin().name, BUILTINS[k].name);
            // The binder finds the table's parameters, in its order, of its kinds.
            let program = s.builtin().program();
            let binder: Vec<(&str, ParamKind)> = program
                .params
                .iter()
                .map(|p| (p.name.as_str(), p.kind))
                .collect();
            assert_eq!(binder, s.params(), "{}", s.name());
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
