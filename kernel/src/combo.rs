//! [`Combo`]: the six window lengths of one strategy run, and the paper's rule that derives
//! them from a single length `L`.

use crate::{Error, Result};

/// The window lengths of one run: `a = WMA(2*WMA(x, half) - WMA(x, full), sqrt)` and
/// `b = WMA(3*WMA(x, p3) - WMA(x, p2) - WMA(x, p), p)`.
///
/// Every window is at least 1; the constructors check it, so a `Combo` in hand is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Combo {
    half: u32,
    full: u32,
    sqrt: u32,
    p3: u32,
    p2: u32,
    p: u32,
}

/// Python's `round`: to nearest, ties to even, then clamped to >= 1 as the paper does.
fn round_clamped(v: f64) -> u32 {
    (v.round_ties_even() as u32).max(1)
}

impl Combo {
    /// The window names in wire order, as used in error messages and result schemas.
    pub const FIELDS: [&str; 6] = ["half", "full", "sqrt", "p3", "p2", "p"];

    /// A combo from explicit windows in wire order `[half, full, sqrt, p3, p2, p]`.
    ///
    /// # Errors
    /// [`Error::InvalidWindow`] naming the first window below 1.
    pub fn new(windows: [u32; 6]) -> Result<Self> {
        if let Some(i) = windows.iter().position(|&w| w == 0) {
            return Err(Error::InvalidWindow {
                field: Self::FIELDS[i],
                value: 0,
            });
        }
        let [half, full, sqrt, p3, p2, p] = windows;
        Ok(Self {
            half,
            full,
            sqrt,
            p3,
            p2,
            p,
        })
    }

    /// The paper's derivation from one length `L`: `half = R(L/2)`, `full = L`,
    /// `sqrt = R(sqrt(L))`, `p = R(L/2)`, `p3 = R(p/3)`, `p2 = R(p/2)`, where `R` rounds half to
    /// even and every value is clamped to at least 1.
    ///
    /// # Errors
    /// [`Error::InvalidWindow`] when `length` is 0.
    pub fn from_length(length: u32) -> Result<Self> {
        if length == 0 {
            return Err(Error::InvalidWindow {
                field: "length",
                value: 0,
            });
        }
        let l = f64::from(length);
        let p = round_clamped(l / 2.0);
        Self::new([
            round_clamped(l / 2.0),
            length,
            round_clamped(l.sqrt()),
            round_clamped(f64::from(p) / 3.0),
            round_clamped(f64::from(p) / 2.0),
            p,
        ])
    }

    /// The windows in wire order `[half, full, sqrt, p3, p2, p]`.
    pub fn windows(&self) -> [u32; 6] {
        [self.half, self.full, self.sqrt, self.p3, self.p2, self.p]
    }

    /// Window of the fast leg of the HMA.
    pub fn half(&self) -> u32 {
        self.half
    }
    /// Window of the slow leg of the HMA.
    pub fn full(&self) -> u32 {
        self.full
    }
    /// Smoothing window of the HMA.
    pub fn sqrt(&self) -> u32 {
        self.sqrt
    }
    /// Fastest leg of the HMA3.
    pub fn p3(&self) -> u32 {
        self.p3
    }
    /// Middle leg of the HMA3.
    pub fn p2(&self) -> u32 {
        self.p2
    }
    /// Slow leg and smoothing window of the HMA3.
    pub fn p(&self) -> u32 {
        self.p
    }

    /// The windows applied to the raw close series; the sweep computes each distinct one once.
    pub(crate) fn close_windows(&self) -> [u32; 5] {
        [self.half, self.full, self.p3, self.p2, self.p]
    }

    /// Multiply-adds per bar, for ordering work largest first.
    pub(crate) fn cost(&self) -> u64 {
        self.windows().iter().map(|&w| u64::from(w)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_rule_matches_reference_rows() {
        // Rows of spec/reference-80.csv, including ties that round to even.
        let cases = [
            (6, [3, 6, 2, 1, 2, 3]),
            (8, [4, 8, 3, 1, 2, 4]),
            (10, [5, 10, 3, 2, 2, 5]),
            (13, [6, 13, 4, 2, 3, 6]),
            (200, [100, 200, 14, 33, 50, 100]),
        ];
        for (l, want) in cases {
            assert_eq!(Combo::from_length(l).unwrap().windows(), want, "L = {l}");
        }
    }

    #[test]
    fn tiny_lengths_clamp_to_one() {
        assert_eq!(Combo::from_length(1).unwrap().windows(), [1, 1, 1, 1, 1, 1]);
        assert_eq!(Combo::from_length(2).unwrap().windows(), [1, 2, 1, 1, 1, 1]);
        assert_eq!(Combo::from_length(3).unwrap().windows(), [2, 3, 2, 1, 1, 2]);
    }

    #[test]
    fn zero_is_rejected_with_the_field_name() {
        assert_eq!(
            Combo::from_length(0),
            Err(Error::InvalidWindow {
                field: "length",
                value: 0
            })
        );
        assert_eq!(
            Combo::new([3, 6, 0, 1, 2, 3]),
            Err(Error::InvalidWindow {
                field: "sqrt",
                value: 0
            })
        );
    }
}
