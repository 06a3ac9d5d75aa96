//! The client's integration tests, one binary (each links the whole server it talks to):
//! the typed client, the CLI, concurrent load, Polars frames and TLS with a token, against
//! real servers in-process on port 0.

mod cli;
mod client;
mod load;
mod polars;
mod tls_auth;

/// What the tests compare the client's results with: the kernel's own types.
mod support {
    use sweepflight_client::SweepResult;
    use sweepflight_kernel::{Combo, ComboResult};

    /// A sweep result's rows as the kernel's result type (v1's columns; the rest default).
    pub(crate) fn results(r: &SweepResult) -> Vec<ComboResult> {
        r.rows()
            .iter()
            .map(|row| ComboResult {
                pnl: row.pnl,
                trades: row.trades as u64,
                wins: row.wins as u64,
                max_drawdown: row.max_drawdown,
                ..Default::default()
            })
            .collect()
    }

    /// Explicit combos as a request grid.
    pub(crate) fn params_of(combos: &[Combo]) -> Vec<[u32; 6]> {
        combos.iter().map(Combo::windows).collect()
    }
}
