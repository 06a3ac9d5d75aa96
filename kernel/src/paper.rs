//! The paper's parameter grid: `numpy.linspace(6, 200, 80).astype(int64)`.
//!
//! The paper's price series is data, not code: it lives in the test fixture and in the Python
//! package (`sweepflight.paper.series()`), both made by numpy's generator.

/// The 80 lengths of the paper grid, `6, 8, 10, 13, ..., 197, 200`.
pub fn lengths() -> Vec<u32> {
    linspace_trunc(6.0, 200.0, 80)
}

/// `numpy.linspace(start, stop, num).astype(int64)` for `num >= 2`: `start + i * step`, with the
/// last value exactly `stop`, truncated towards zero.
fn linspace_trunc(start: f64, stop: f64, num: usize) -> Vec<u32> {
    let step = (stop - start) / (num - 1) as f64;
    (0..num)
        .map(|i| if i + 1 == num { stop } else { i as f64 * step + start } as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn grid_has_80_lengths_from_6_to_200() {
        let l = super::lengths();
        assert_eq!(l.len(), 80);
        assert_eq!(&l[..5], &[6, 8, 10, 13, 15]);
        assert_eq!(&l[78..], &[197, 200]);
    }
}
