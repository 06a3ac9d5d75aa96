//! Running a group's items on the rayon pool or on the calling thread, each worker with scratch
//! of its own: the one shape every sweep path shares (the paper kernel's phases, the indicator
//! strategies' combos, a formula group's combos).

use rayon::prelude::*;

use crate::Result;

/// `f` over `items` in order, on the pool if `parallel` (each worker reusing one `S`), else
/// inline with one `S`; the first error stops it.
pub(crate) fn map<S: Default, T: Sync, R: Send>(
    parallel: bool,
    items: &[T],
    f: impl Fn(&mut S, &T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if parallel {
        items
            .par_iter()
            .map_init(S::default, |s, item| f(s, item))
            .collect()
    } else {
        let mut s = S::default();
        items.iter().map(|item| f(&mut s, item)).collect()
    }
}
