//! `sweepflight-server`: parses flags into a [`ServerConfig`], sets up logging, binds and
//! serves until SIGINT or SIGTERM. Everything else is the library's ([`Server`]).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use sweepflight_server::{Listen, Server, ServerConfig, TlsFiles, parse_bytes};
use tracing_subscriber::EnvFilter;

// A pooled allocator: uploads and sweeps allocate and free large arrays at a high rate, and
// mimalloc reuses freed memory (and returns it to the OS when idle) where glibc's malloc kept
// it or faulted in fresh zeroed pages for every message.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Arrow Flight service for backtest parameter sweeps: push a series once, sweep it many times.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// TCP address to serve on (grpc://HOST:PORT). Port 0 picks a free port; the address
    /// actually bound is printed on the first line of stdout.
    #[arg(long, default_value = ServerConfig::DEFAULT_LISTEN)]
    listen: SocketAddr,

    /// Serve on this Unix domain socket (grpc+unix://PATH) instead of TCP.
    #[arg(long, conflicts_with = "listen")]
    unix: Option<PathBuf>,

    /// Largest gRPC message accepted or sent, in bytes (units allowed: 64MiB).
    #[arg(long, value_parser = parse_bytes, default_value_t = ServerConfig::DEFAULT_MAX_MESSAGE_BYTES as u64)]
    max_message_bytes: u64,

    /// Most combos one sweep call may ask for (series x combos on a keyed dataset); with
    /// `top`, most rows it may return.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_COMBOS)]
    max_combos: usize,

    /// With `top`, most combos one sweep call may evaluate (series x combos).
    #[arg(long, default_value_t = sweepflight_protocol::DEFAULT_MAX_GRID_COMBOS)]
    max_grid_combos: usize,

    /// Most combos (x series) one `trades` or `equity` call may return.
    #[arg(long, default_value_t = sweepflight_protocol::DEFAULT_MAX_TRADE_COMBOS)]
    max_trade_combos: usize,

    /// Result rows (series x combos) a sweep with `top` holds at once: larger grids run in
    /// steps of this many (smaller: less memory, more per-step overhead).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_TOP_STEP_ROWS as u64, value_parser = clap::value_parser!(u64).range(1..))]
    top_step_rows: u64,

    /// Bytes of kernel arrays cached across sweeps (least recently used evicted first); 0
    /// disables.
    #[arg(long, value_parser = parse_bytes, default_value_t = ServerConfig::DEFAULT_CACHE_BYTES)]
    cache_bytes: u64,

    /// Largest dataset one put may store, in bytes of decoded Arrow data.
    #[arg(long, value_parser = parse_bytes, default_value_t = ServerConfig::DEFAULT_MAX_DATASET_BYTES)]
    max_dataset_bytes: u64,

    /// Most bytes all datasets together may hold (puts past it: RESOURCE_EXHAUSTED); a size or
    /// `unlimited`.
    #[arg(long, value_parser = parse_bytes, default_value = "unlimited")]
    max_total_bytes: u64,

    /// Directory where datasets persist (created if missing; one server per directory).
    #[arg(long, default_value = ServerConfig::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,

    /// Keep datasets in memory only: nothing is read from or written to disk.
    #[arg(long)]
    in_memory: bool,

    /// Require `authorization: Bearer TOKEN` on every call but Handshake.
    #[arg(long, env = "SWEEPFLIGHT_TOKEN", hide_env_values = true)]
    token: Option<String>,

    /// Serve grpc+tls with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key", conflicts_with = "unix")]
    tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// After SIGTERM/SIGINT, how long in-flight calls and open connections may take to finish
    /// before the server exits anyway, in seconds.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_SHUTDOWN_GRACE.as_secs())]
    shutdown_grace_secs: u64,

    /// Sweep worker threads [default: one per CPU].
    #[arg(long)]
    threads: Option<usize>,

    /// Memory all running sweeps together may use; sweeps beyond it wait in a fair queue
    /// [default: a quarter of the machine's memory].
    #[arg(long, value_parser = parse_bytes)]
    sweep_memory_bytes: Option<u64>,

    /// Sweeps that may wait for sweep memory; past it a sweep answers RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_QUEUED_SWEEPS)]
    max_queued_sweeps: usize,

    /// Most open client connections; past it new connections are closed at once.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,

    /// Seconds a new connection has to send the HTTP/2 preface before it is closed.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_HANDSHAKE_TIMEOUT.as_secs_f64())]
    handshake_timeout_secs: f64,

    /// Seconds of silence after which a connection is closed (live clients answer the
    /// server's keep-alive pings well within it).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_IDLE_TIMEOUT.as_secs_f64())]
    idle_timeout_secs: f64,

    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,

    /// Opt-in socket tuning: register connections for read readiness only, which saved ~11%
    /// of a params-only call on one VM (docs/perf-notes.md). Off by default.
    #[arg(long)]
    read_wake: bool,

    /// Do not rewrite the percent-encoded `:authority` that gRPC-core clients (pyarrow, grpcio)
    /// send over Unix sockets; for testing clients that set their own authority.
    #[arg(long, hide = true)]
    no_unix_authority_fix: bool,

    /// Most jobs (`submit`, PollFlightInfo) queued, running or holding a result at once; past
    /// it `submit` answers RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_JOBS as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_jobs: u64,

    /// Seconds a job is remembered after its result is fetched, or after it failed or was
    /// cancelled (a done job is kept until fetched).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_JOB_TTL.as_secs_f64())]
    job_ttl: f64,

    /// Compress DoGet replies (stored rows, job results) whose request asks for nothing:
    /// `zstd` or `lz4` (pays on slow links; costs CPU on fast ones). Default: uncompressed.
    #[arg(long, value_parser = |s: &str| sweepflight_protocol::Compression::from_name(s).map_err(|e| e.to_string()))]
    reply_compression: Option<sweepflight_protocol::Compression>,
}

impl TryFrom<&Cli> for ServerConfig {
    type Error = anyhow::Error;

    fn try_from(cli: &Cli) -> anyhow::Result<Self> {
        anyhow::ensure!(
            cli.max_message_bytes >= 1 << 20,
            "--max-message-bytes must be at least 1 MiB"
        );
        anyhow::ensure!(cli.max_combos >= 1, "--max-combos must be at least 1");
        anyhow::ensure!(cli.threads != Some(0), "--threads must be at least 1");
        anyhow::ensure!(
            cli.max_connections >= 1,
            "--max-connections must be at least 1"
        );
        let secs = |name: &str, v: f64| {
            anyhow::ensure!(v.is_finite() && v > 0.0, "{name} must be a positive number");
            Ok(Duration::from_secs_f64(v))
        };
        if let Some(token) = &cli.token {
            anyhow::ensure!(!token.is_empty(), "--token must not be empty");
        }
        let tls = match (&cli.tls_cert, &cli.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert_pem: std::fs::read(cert)
                    .with_context(|| format!("read {}", cert.display()))?,
                key_pem: std::fs::read(key).with_context(|| format!("read {}", key.display()))?,
            }),
            _ => None,
        };
        Ok(Self {
            listen: match &cli.unix {
                Some(path) => Listen::Unix(path.clone()),
                None => Listen::Tcp(cli.listen),
            },
            token: cli.token.clone(),
            tls,
            max_message_bytes: usize::try_from(cli.max_message_bytes)?,
            max_combos: cli.max_combos,
            max_grid_combos: cli.max_grid_combos,
            max_trade_combos: cli.max_trade_combos,
            top_step_rows: usize::try_from(cli.top_step_rows)?,
            cache_bytes: cli.cache_bytes,
            max_dataset_bytes: cli.max_dataset_bytes,
            max_total_bytes: cli.max_total_bytes,
            data_dir: (!cli.in_memory).then(|| cli.data_dir.clone()),
            shutdown_grace: Duration::from_secs(cli.shutdown_grace_secs),
            threads: cli.threads,
            sweep_memory_bytes: cli
                .sweep_memory_bytes
                .unwrap_or_else(ServerConfig::default_sweep_memory_bytes),
            max_queued_sweeps: cli.max_queued_sweeps,
            max_connections: cli.max_connections,
            handshake_timeout: secs("--handshake-timeout-secs", cli.handshake_timeout_secs)?,
            idle_timeout: secs("--idle-timeout-secs", cli.idle_timeout_secs)?,
            metrics_listen: cli.metrics_listen,
            read_wake: cli.read_wake,
            unix_authority_fix: !cli.no_unix_authority_fix,
            max_jobs: usize::try_from(cli.max_jobs)?,
            job_ttl: secs("--job-ttl", cli.job_ttl)?,
            reply_compression: cli.reply_compression,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: a log file or a collector gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    let config = ServerConfig::try_from(&cli)?;
    let server = Server::bind(config).await?;
    // The first stdout line is the contract with scripts and tests that start us on port 0:
    // printed only once every dataset is loaded and the address bound.
    println!("sweepflight-server listening on {}", server.uri());
    server.serve(shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}
