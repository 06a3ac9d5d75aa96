//! What the kernel's test binaries share.

/// A small deterministic generator (xorshift*), so failures replay.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A booked trade as two runs compare it: side, entry and exit bars, the exit price's and the
/// net's bits.
pub(crate) type TradeKey = (i8, usize, usize, u64, u64);

/// `program` swept over `combos` (each its parameter values) on `bars` under `exec`, in one
/// group on the pool or, `tight`, a group per combo on one thread, beside the plain
/// interpreter's run of each combo: per combo, the booked trades, the interpreter's, and the
/// result's trade count.
#[allow(dead_code, reason = "used by the formula test binaries only")]
pub(crate) fn swept_and_interpreted(
    bars: &sweepflight_kernel::lines::Bars<'_>,
    program: &sweepflight_kernel::expr::Program,
    combos: &[Vec<f64>],
    exec: &sweepflight_kernel::Execution,
    tight: bool,
) -> Vec<(Vec<TradeKey>, Vec<TradeKey>, usize)> {
    use sweepflight_kernel::eval::{oracle, sweep_program};
    use sweepflight_kernel::{Records, SweepControl};
    let records = Records::new(combos.len(), bars.len(), exec.start, true, 0).unwrap();
    let control = SweepControl {
        records: Some(&records),
        working_set_bytes: if tight { 1 } else { 512 << 20 },
        parallel: Some(!tight),
        ..SweepControl::default()
    };
    let flat = combos.concat();
    let results = sweep_program(bars, program, &flat, combos.len(), exec, &control).unwrap();
    let kept = records.into_records();
    combos
        .iter()
        .enumerate()
        .map(|(i, values)| {
            let want = oracle::run(bars, program, values, exec);
            let key = |side, entry, exit, price: f64, net: f64| {
                (side, entry, exit, price.to_bits(), net.to_bits())
            };
            (
                kept[i]
                    .trades
                    .iter()
                    .map(|t| key(t.side, t.entry_row, t.exit_row, t.exit_price, t.net))
                    .collect(),
                want.iter()
                    .map(|t| key(t.side, t.entry_row, t.exit_row, t.exit_price, t.net))
                    .collect(),
                results[i].trades as usize,
            )
        })
        .collect()
}
