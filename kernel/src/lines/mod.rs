//! The computations of the strategy language's functions (docs/language.md's table): arrays in,
//! arrays out, each value in the order the spec writes it. Nothing here knows formulas, plans
//! or sweeps; the function registry (`crate::expr::registry`) points at these.
//!
//! Two implementations of every function, kept apart on purpose: [`series`], the fast one the
//! sweep runs (loops blocked across outputs, monotone queues, one pass per recurrence), and
//! [`plain`], the test oracle, written bar by bar from the spec's table and sharing no code
//! with the fast one. The tests hold the two equal bit for bit. [`multi`] holds the shared
//! passes that compute one function for many windows of one input at once, over the tuned
//! computations below them: [`wma`] (the paper kernel's register-blocked, prefix-sharing WMA)
//! [`indicators`] (the built-in strategies' shared SMA / EMA / channel passes and RSI), and
//! `vector` (the SIMD helpers: the sign bytes two lines make, block maxima, HMA differences).

pub mod indicators;
pub mod multi;
pub mod plain;
pub mod series;
pub(crate) mod vector;
pub mod wma;

/// A shared line of `len` copies of `fill`, written in place (no copy into the `Arc`): the
/// computations fill it through `Arc::get_mut`, and it is what a cache keeps.
pub(crate) fn filled_line(len: usize, fill: f64) -> std::sync::Arc<[f64]> {
    let mut line = std::sync::Arc::<[f64]>::new_uninit_slice(len);
    std::sync::Arc::get_mut(&mut line)
        .expect("just allocated, not shared")
        .fill(std::mem::MaybeUninit::new(fill));
    // SAFETY: every element was just written.
    unsafe { line.assume_init() }
}

/// The columns of one series' bars over the computed range (bar 0 is the range's first).
/// `close` is always there; the others when the dataset has them usable.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bars<'a> {
    /// Opens.
    pub open: Option<&'a [f64]>,
    /// Highs.
    pub high: Option<&'a [f64]>,
    /// Lows.
    pub low: Option<&'a [f64]>,
    /// Closes.
    pub close: &'a [f64],
    /// Volumes.
    pub volume: Option<&'a [f64]>,
    /// The strategy's own columns (protocol v1.4, `inputs`), in its `inputs` order (a null
    /// read as NaN); bar 0 is row `inputs_from` of each ([`Bars::input`]), so a slice of the
    /// bars needs no new list.
    pub inputs: &'a [std::sync::Arc<[f64]>],
    /// The row of each input that is bar 0.
    pub inputs_from: usize,
    /// Each bar's UTC date as days since 1970-01-01, where the series has a time of a
    /// timestamp or date type (protocol v1.4: the periods of `daily`, `weekly`, `monthly`).
    pub days: Option<&'a [i64]>,
}

impl<'a> Bars<'a> {
    /// Bars of closes only.
    pub fn closes(close: &'a [f64]) -> Self {
        Self {
            close,
            ..Self::default()
        }
    }

    /// Bars of opens, highs, lows and closes (no volume).
    pub fn ohlc(open: &'a [f64], high: &'a [f64], low: &'a [f64], close: &'a [f64]) -> Self {
        Self {
            open: Some(open),
            high: Some(high),
            low: Some(low),
            close,
            volume: None,
            ..Self::default()
        }
    }

    /// Input `k` over the bars, if the bars have it.
    pub fn input(&self, k: usize) -> Option<&'a [f64]> {
        let from = self.inputs_from;
        self.inputs
            .get(k)
            .and_then(|c| c.get(from..from + self.close.len()))
    }

    /// The number of bars.
    pub fn len(&self) -> usize {
        self.close.len()
    }

    /// True with no bar.
    pub fn is_empty(&self) -> bool {
        self.close.is_empty()
    }

    /// The high, low and close, which the true range reads (the binder has checked they are
    /// there before anything runs).
    pub(crate) fn hlc(&self) -> (&'a [f64], &'a [f64], &'a [f64]) {
        (
            self.high.expect("the binder checks `high` is present"),
            self.low.expect("the binder checks `low` is present"),
            self.close,
        )
    }

    /// The bars `[from, to)` as bars of their own.
    pub fn slice(&self, from: usize, to: usize) -> Self {
        let cut = |c: Option<&'a [f64]>| c.map(|c| &c[from..to]);
        Self {
            open: cut(self.open),
            high: cut(self.high),
            low: cut(self.low),
            close: &self.close[from..to],
            volume: cut(self.volume),
            inputs: self.inputs,
            inputs_from: self.inputs_from + from,
            days: self.days.map(|d| &d[from..to]),
        }
    }
}

/// One argument of a function over a computed range.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A series, one value per bar.
    Series(&'a [f64]),
    /// A constant: the same value at every bar.
    Const(f64),
    /// A window length (>= 1).
    Window(usize),
    /// A condition, one byte (0 or 1) per bar.
    Cond(&'a [u8]),
}

impl Input<'_> {
    /// The value at bar `i` of a series or constant argument.
    #[inline(always)]
    pub fn at(&self, i: usize) -> f64 {
        match self {
            Self::Series(s) => s[i],
            Self::Const(v) => *v,
            Self::Window(_) | Self::Cond(_) => unreachable!("not a number argument"),
        }
    }

    /// A window argument.
    pub fn window(&self) -> usize {
        match self {
            Self::Window(n) => *n,
            _ => unreachable!("not a window argument"),
        }
    }

    /// A condition argument at bar `i`.
    #[inline(always)]
    pub fn cond(&self, i: usize) -> bool {
        match self {
            Self::Cond(c) => c[i] != 0,
            _ => unreachable!("not a condition argument"),
        }
    }
}

/// A line of the closes that a tuned computation makes, by its structure: what the paper
/// kernel's passes ([`wma`]) and the certified lines compute and recompute exactly, and what the
/// shapes recognise a crossing of. It is the language's call [`Line::call`] names, bit for bit;
/// its cache key is that call's node key (`crate::plan::line_key`), never a name of its own,
/// so a line a tuned pass made and the same call in any formula are one cached array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Line {
    /// `sma(close, n)`.
    Sma(u32),
    /// `wma(close, n)`.
    Wma(u32),
    /// `hma(close, half, full, sqrt)`.
    Hma([u32; 3]),
    /// `hma3(close, p3, p2, p)`.
    Hma3([u32; 3]),
}

impl Line {
    /// The language's function that computes the line over the closes, and its windows.
    pub fn call(self) -> (&'static str, Vec<u32>) {
        match self {
            Self::Sma(n) => ("sma", vec![n]),
            Self::Wma(n) => ("wma", vec![n]),
            Self::Hma(w) => ("hma", w.to_vec()),
            Self::Hma3(w) => ("hma3", w.to_vec()),
        }
    }

    /// The line a call of the closes is, from its function's name and windows (full forms).
    pub fn of_call(name: &str, windows: &[u32]) -> Option<Self> {
        Some(match (name, windows) {
            ("sma", &[n]) => Self::Sma(n),
            ("wma", &[n]) => Self::Wma(n),
            ("hma", &[h, f, s]) => Self::Hma([h, f, s]),
            ("hma3", &[a, b, c]) => Self::Hma3([a, b, c]),
            _ => return None,
        })
    }
}
