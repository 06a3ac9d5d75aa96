//! The arrays a sweep computes over one close series, by key, and the cache a sweep asks for
//! them: the names every layer shares (the server's cache keeps arrays under these keys), below
//! the code that computes or keeps them.

use std::sync::Arc;

use crate::lines::vector::UNDEFINED;

/// An array the sweep computes over one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArrayKey {
    /// The closes' moves for the per-bar metrics ([`crate::Moves`]), two values a bar.
    Moves,
    /// A function's series, by its node key (the plan's canonical key of the call: function,
    /// operands, windows, constants, timeframe): equal calls of any two formulas, combos or
    /// calls are one array, and a line a tuned pass makes (the paper kernel's WMA, HMA and
    /// HMA3 lines, the certified SMA lines) is keyed as the call that computes it.
    Node(NodeKey),
    /// The state bytes of a crossing's two lines (see `crate::signal`), by the pair's key
    /// ([`NodeKey::pair`]): one byte a bar where the two lines take sixteen, and all a
    /// repeated sweep of the pair's crossings reads. Kept by the cache through
    /// [`ArrayCache::get_bytes`], never as a line.
    Signs(NodeKey),
}

/// A node's canonical key: a 128-bit fingerprint, and the warm-up its values have wherever the
/// series starts, where they are fresh over a window of their inputs (see
/// [`ArrayKey::of_range`]), from the plan. Two keys of one node are equal: the warm-up is a
/// function of the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeKey {
    fingerprint: u128,
    warm_up: Option<u32>,
}

impl NodeKey {
    /// The key of a node with this fingerprint and warm-up (`None`: its values depend on where
    /// the series starts: a recurrence, a higher timeframe's periods).
    pub const fn new(fingerprint: u128, warm_up: Option<u32>) -> Self {
        Self {
            fingerprint,
            warm_up,
        }
    }

    /// The key of the ordered pair `(a, b)` (a crossing's state bytes): its own fingerprint,
    /// undefined wherever either line is.
    pub fn pair(a: Self, b: Self) -> Self {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let half = |salt: u64| {
            let mut h = DefaultHasher::new();
            (salt, a.fingerprint, b.fingerprint).hash(&mut h);
            h.finish()
        };
        let warm_up = a.warm_up.zip(b.warm_up).map(|(x, y)| x.max(y));
        Self::new((u128::from(half(3)) << 64) | u128::from(half(4)), warm_up)
    }

    /// The fingerprint.
    pub fn fingerprint(self) -> u128 {
        self.fingerprint
    }
}

impl ArrayKey {
    /// True for a line of f64 values a cache may keep (not a combo's state bytes).
    pub fn is_line(self) -> bool {
        !matches!(self, Self::Signs(_))
    }

    /// Leading bars of an array computed fresh over a range that are undefined: its value at
    /// bar `i` of the range reads bars `i - warm ..= i` only. `None` for arrays whose values
    /// depend on where the range starts (recurrences, the moves' sums).
    fn warm_up(self) -> Option<usize> {
        match self {
            Self::Node(k) | Self::Signs(k) => k.warm_up.map(|w| w as usize),
            Self::Moves => None,
        }
    }

    /// The array a sweep over the computed range `from..to` of a series would compute, made
    /// from the same array over the whole series (`whole`): its values at those bars, with the
    /// range's own warm-up NaN. Bit for bit the fresh computation, because every value of such
    /// an array is computed afresh from its window (no running state; the registry marks the
    /// functions that are): the folds of a walk-forward share one computation of their lines
    /// this way. `None` for arrays that depend on where the range starts (a key without a
    /// warm-up: recurrences such as `ema`, higher timeframes, [`ArrayKey::Moves`]) or a range
    /// past `whole`.
    pub fn of_range(self, whole: &[f64], from: usize, to: usize) -> Option<Arc<[f64]>> {
        self.cut(whole, from, to, f64::NAN)
    }

    /// [`Self::of_range`] of a crossing's state bytes ([`ArrayKey::Signs`]): undefined over the
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
