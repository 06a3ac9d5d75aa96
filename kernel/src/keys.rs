//! The arrays a sweep computes over one close series, by key, and the cache a sweep asks for
//! them: the names every layer shares (the server's cache keeps lines under these keys), below
//! the code that computes or keeps them.

use std::sync::Arc;

use crate::lines::vector::UNDEFINED;

/// An array the sweep computes over one close series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArrayKey {
    /// `WMA(close, n)`.
    Wma(u32),
    /// The HMA line `WMA(2*WMA(close, half) - WMA(close, full), sqrt)`: `[half, full, sqrt]`.
    Hma([u32; 3]),
    /// The HMA3 line `WMA(3*WMA(close, p3) - WMA(close, p2) - WMA(close, p), p)`:
    /// `[p3, p2, p]`.
    Hma3([u32; 3]),
    /// The closes' moves for the per-bar metrics ([`crate::Moves`]), two values a bar.
    Moves,
    /// `SMA(close, n)`: the line `sma(close, n)` of any formula.
    Sma(u32),
    /// `EMA(close, n)`: the line `ema(close, n)` where the first close is defined.
    Ema(u32),
    /// A function's series in a strategy of formulas, by the 128-bit fingerprint of its
    /// canonical node key (the plan's: function, operands, windows, constants), so equal
    /// calls of any two formulas, combos or calls are one array.
    Node(u128),
    /// The state bytes of one pair of the paper kernel's lines (see `crate::signal`): its HMA
    /// line's windows `[half, full, sqrt]`, then its HMA3 line's `[p3, p2, p]`. One byte a bar
    /// where its two lines take sixteen, and all a repeated sweep of the pair's crossings
    /// reads: kept by the cache through [`ArrayCache::get_bytes`], never as a line.
    Signs([u32; 6]),
}

impl ArrayKey {
    /// True for a line of f64 values a cache may keep (not a combo's state bytes).
    pub fn is_line(self) -> bool {
        !matches!(self, Self::Signs(_))
    }

    /// Leading bars of a line computed fresh over a range that are NaN: its value at bar `i`
    /// of the range reads the closes of bars `i - warm ..= i` only. `None` for arrays whose
    /// values depend on where the range starts (EMA and RSI recurrences, the moves' sums).
    fn warm_up(self) -> Option<usize> {
        let w = |n: u32| n as usize;
        Some(match self {
            Self::Wma(n) | Self::Sma(n) => w(n).saturating_sub(1),
            // WMA(sqrt) of a difference of WMAs: defined once the longer WMA is, then `sqrt` of
            // those (strategies.md; kernel.md).
            Self::Hma([half, full, sqrt]) => {
                w(half.max(full)).saturating_sub(1) + w(sqrt).saturating_sub(1)
            }
            Self::Hma3([p3, p2, p]) => {
                w(p3.max(p2).max(p)).saturating_sub(1) + w(p).saturating_sub(1)
            }
            // Undefined wherever either line is.
            Self::Signs([h, f, s, p3, p2, p]) => Self::Hma([h, f, s])
                .warm_up()?
                .max(Self::Hma3([p3, p2, p]).warm_up()?),
            Self::Moves | Self::Ema(_) | Self::Node(_) => {
                return None;
            }
        })
    }

    /// The array a sweep over the computed range `from..to` of a series would compute, made
    /// from the same array over the whole series (`whole`): its values at those bars, with the
    /// range's own warm-up NaN. Bit for bit the fresh computation, because every value of these
    /// lines is a fresh sum over its own window (no running state): the folds of a walk-forward
    /// share one computation of their lines this way. `None` for arrays that depend on where
    /// the range starts ([`ArrayKey::Ema`], [`ArrayKey::Moves`], a formula's [`ArrayKey::Node`]) or a range
    /// past `whole`.
    pub fn of_range(self, whole: &[f64], from: usize, to: usize) -> Option<Arc<[f64]>> {
        self.cut(whole, from, to, f64::NAN)
    }

    /// [`Self::of_range`] of a combo's state bytes ([`ArrayKey::Signs`]): undefined over the
    /// range's warm-up, the whole series' bytes after it (they compare the same values).
    pub fn bytes_of_range(self, whole: &[u8], from: usize, to: usize) -> Option<Arc<[u8]>> {
        self.cut(whole, from, to, UNDEFINED)
    }

    fn cut<T: Copy>(self, whole: &[T], from: usize, to: usize, undefined: T) -> Option<Arc<[T]>> {
        let warm = self.warm_up()?;
        let values = whole.get(from..to)?;
        let cut = warm.min(values.len());
        Some(
            std::iter::repeat_n(undefined, cut)
                .chain(values[cut..].iter().copied())
                .collect(),
        )
    }
}

/// A cache of arrays over one close series, shared by sweeps over it.
///
/// The sweep asks for each array it needs and offers back each one it computed; the cache
/// decides what to keep. Implementations must be thread-safe: the sweep calls them from rayon.
pub trait ArrayCache: Sync {
    /// The array if the cache holds it.
    fn get(&self, key: ArrayKey) -> Option<Arc<[f64]>>;
    /// Offers a freshly computed array; the cache may keep or drop it.
    fn insert(&self, key: ArrayKey, array: Arc<[f64]>);
    /// The bytes under `key` ([`ArrayKey::Signs`]) if the cache holds them.
    fn get_bytes(&self, _key: ArrayKey) -> Option<Arc<[u8]>> {
        None
    }
    /// Offers freshly computed bytes ([`ArrayKey::Signs`]); the cache may keep or drop them.
    fn insert_bytes(&self, _key: ArrayKey, _bytes: Arc<[u8]>) {}
    /// Whether offered arrays may be kept. A cache that keeps nothing answers false, and the
    /// sweep then never writes out a whole array only to offer it.
    fn keeps(&self) -> bool {
        true
    }
    /// Whether the cache may hold any array: one that never does answers false, and a sweep
    /// then never names its arrays to ask (a formula plan's fingerprints cost a hash a node).
    fn may_hold(&self) -> bool {
        true
    }
}

/// A cache that keeps nothing: every sweep computes everything it needs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCache;

impl ArrayCache for NoCache {
    fn get(&self, _key: ArrayKey) -> Option<Arc<[f64]>> {
        None
    }
    fn insert(&self, _key: ArrayKey, _array: Arc<[f64]>) {}
    fn keeps(&self) -> bool {
        false
    }
    fn may_hold(&self) -> bool {
        false
    }
}
