//! The library's configuration type, filled by the binary from its flags (or by tests).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// TCP (`grpc://HOST:PORT`, or `grpc+tls://` with TLS); port 0 picks a free port.
    Tcp(SocketAddr),
    /// A Unix domain socket (`grpc+unix://PATH`); a stale socket file is replaced.
    Unix(PathBuf),
}

/// Everything the server needs to know at start.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// Where to listen.
    pub listen: Listen,
    /// Largest gRPC message accepted or sent, in bytes.
    pub max_message_bytes: usize,
    /// Most combos one sweep call may ask for (series x combos on a keyed dataset); with
    /// `top`, most rows it may return.
    pub max_combos: usize,
    /// With `top`, most combos one sweep call may evaluate (series x combos).
    pub max_grid_combos: usize,
    /// Most combos (x series) a `trades` or `equity` call may return.
    pub max_trade_combos: usize,
    /// Result rows (series x combos) a sweep with `top` holds at once: larger grids run in
    /// steps of this many, each step's best merged into the best so far.
    pub top_step_rows: usize,
    /// Bytes the kernel cache may hold across calls (least recently used out first).
    pub cache_bytes: u64,
    /// Largest dataset a put may store, in bytes of decoded Arrow data.
    pub max_dataset_bytes: u64,
    /// Most bytes all stored datasets together may hold.
    pub max_total_bytes: u64,
    /// Where datasets persist; `None` keeps them in memory only.
    pub data_dir: Option<PathBuf>,
    /// When set, every call but Handshake must carry `authorization: Bearer <token>`.
    pub token: Option<String>,
    /// When set, serve grpc+tls with this certificate chain and key.
    pub tls: Option<TlsFiles>,
    /// After shutdown is requested, how long open calls may take before the server stops
    /// anyway.
    pub shutdown_grace: Duration,
    /// Sweep worker threads; `None` is one per CPU.
    pub threads: Option<usize>,
    /// Memory all running sweeps together may use, in bytes.
    pub sweep_memory_bytes: u64,
    /// Sweeps that may wait for memory; past it a sweep answers RESOURCE_EXHAUSTED.
    pub max_queued_sweeps: usize,
    /// Most open client connections; past it new ones are closed at once.
    pub max_connections: usize,
    /// A connection that has not sent its HTTP/2 preface and settings within this long is
    /// closed.
    pub handshake_timeout: Duration,
    /// A connection that sends nothing (not even an answer to the server's keep-alive pings)
    /// for this long is closed.
    pub idle_timeout: Duration,
    /// Serve Prometheus metrics over HTTP at `/metrics` on this address.
    pub metrics_listen: Option<SocketAddr>,
    /// Opt-in socket tuning: register connections for read readiness only (see
    /// `crate::transport::conn`); measured to help on one VM, off by default.
    pub read_wake: bool,
    /// Rewrite gRPC-core clients' percent-encoded `:authority` on Unix sockets (see
    /// `crate::transport::uds`); on by default, off only to test clients that set their own.
    pub unix_authority_fix: bool,
    /// Most jobs queued, running or holding a result at once; past it `submit` answers
    /// RESOURCE_EXHAUSTED.
    pub max_jobs: usize,
    /// How long a job is remembered after its result is fetched (or after it failed or was
    /// cancelled).
    pub job_ttl: Duration,
    /// The compression of DoGet replies (stored rows, job results) whose request did not ask
    /// for one; `None` sends them uncompressed.
    pub reply_compression: Option<sweepflight_protocol::Compression>,
}

/// PEM contents of the server's certificate chain and private key.
#[derive(Clone, PartialEq)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// Private key, PEM.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles").finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// The binary's default address.
    pub const DEFAULT_LISTEN: &str = "127.0.0.1:8815";
    /// 64 MiB: a 150k-row batch in one message fits with room to spare.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;
    /// One million combos per call.
    pub const DEFAULT_MAX_COMBOS: usize = 1_000_000;
    /// Result rows a sweep with `top` holds at once by default: a few hundred bytes a row, and
    /// a step large enough that ranking it costs little next to sweeping it.
    pub const DEFAULT_TOP_STEP_ROWS: usize = 25_000;
    /// 1 GiB of cached kernel arrays.
    pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;
    /// 16 GiB per dataset.
    pub const DEFAULT_MAX_DATASET_BYTES: u64 = 16 << 30;
    /// No limit on all datasets together beyond the machine's memory.
    pub const DEFAULT_MAX_TOTAL_BYTES: u64 = u64::MAX;
    /// Where the binary keeps datasets unless told otherwise.
    pub const DEFAULT_DATA_DIR: &str = "sweepflight-data";
    /// 30 s for open calls after a shutdown request.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    /// 64 sweeps may wait for memory.
    pub const DEFAULT_MAX_QUEUED_SWEEPS: usize = 64;
    /// 1,024 open connections.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    /// 10 s to send the HTTP/2 preface and settings.
    pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
    /// 5 minutes of silence.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    /// 64 jobs at once.
    pub const DEFAULT_MAX_JOBS: usize = 64;
    /// A job is remembered 10 minutes after its result is fetched.
    pub const DEFAULT_JOB_TTL: Duration = Duration::from_secs(600);

    /// The default sweep memory budget: a quarter of the machine's memory (at least 256 MiB),
    /// so the budget, the datasets and the cache fit together with room to spare.
    pub fn default_sweep_memory_bytes() -> u64 {
        (physical_memory_bytes() / 4).max(256 << 20)
    }
}

/// The machine's physical memory (or 4 GiB if it cannot be read).
fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(size)) {
        (Ok(p), Ok(s)) if p > 0 && s > 0 => p * s,
        _ => 4 << 30,
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: Listen::Tcp(Self::DEFAULT_LISTEN.parse().expect("valid address")),
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            max_combos: Self::DEFAULT_MAX_COMBOS,
            max_grid_combos: sweepflight_protocol::DEFAULT_MAX_GRID_COMBOS,
            max_trade_combos: sweepflight_protocol::DEFAULT_MAX_TRADE_COMBOS,
            top_step_rows: Self::DEFAULT_TOP_STEP_ROWS,
            cache_bytes: Self::DEFAULT_CACHE_BYTES,
            max_dataset_bytes: Self::DEFAULT_MAX_DATASET_BYTES,
            max_total_bytes: Self::DEFAULT_MAX_TOTAL_BYTES,
            data_dir: None,
            token: None,
            tls: None,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
            threads: None,
            sweep_memory_bytes: Self::default_sweep_memory_bytes(),
            max_queued_sweeps: Self::DEFAULT_MAX_QUEUED_SWEEPS,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            handshake_timeout: Self::DEFAULT_HANDSHAKE_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            metrics_listen: None,
            read_wake: false,
            unix_authority_fix: true,
            max_jobs: Self::DEFAULT_MAX_JOBS,
            job_ttl: Self::DEFAULT_JOB_TTL,
            reply_compression: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never log the token.
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_combos", &self.max_combos)
            .field("max_grid_combos", &self.max_grid_combos)
            .field("max_trade_combos", &self.max_trade_combos)
            .field("top_step_rows", &self.top_step_rows)
            .field("cache_bytes", &self.cache_bytes)
            .field("max_dataset_bytes", &self.max_dataset_bytes)
            .field(
                "max_total_bytes",
                &(self.max_total_bytes != u64::MAX).then_some(self.max_total_bytes),
            )
            .field("data_dir", &self.data_dir)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("tls", &self.tls.is_some())
            .field("shutdown_grace", &self.shutdown_grace)
            .field("threads", &self.threads)
            .field("sweep_memory_bytes", &self.sweep_memory_bytes)
            .field("max_queued_sweeps", &self.max_queued_sweeps)
            .field("max_connections", &self.max_connections)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("metrics_listen", &self.metrics_listen)
            .field("read_wake", &self.read_wake)
            .field("unix_authority_fix", &self.unix_authority_fix)
            .field("max_jobs", &self.max_jobs)
            .field("job_ttl", &self.job_ttl)
            .field("reply_compression", &self.reply_compression)
            .finish()
    }
}

/// Parses a byte size: a plain number of bytes, or one with a unit (`KB`, `MB`, `GB`, `TB` in
/// powers of 1000; `KiB`, `MiB`, `GiB`, `TiB` in powers of 1024; `K`, `M`, `G`, `T` are the
/// binary ones). Used for the binary's byte flags (`--sweep-memory-bytes 512MiB`).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text == "unlimited" {
        return Ok(u64::MAX);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        other => return Err(format!("unknown unit {other:?} in {text:?}")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 1073741824, 512MiB, 2GB)"))?;
    let bytes = value * scale as f64;
    if !(0.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_is_a_size() {
        assert_eq!(parse_bytes("unlimited"), Ok(u64::MAX));
        assert_eq!(parse_bytes(" 2GiB "), Ok(2 << 30));
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn default_budget_is_a_share_of_the_machine() {
        let b = ServerConfig::default_sweep_memory_bytes();
        assert!(b >= 256 << 20 && b <= physical_memory_bytes().max(1 << 30));
    }
}
