//! `sweepflight-server`: parses flags, sets up logging, binds the listener and runs
//! [`sweepflight_server::serve`] until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use sweepflight_server::store::DatasetStore;
use sweepflight_server::{Listener, ServerConfig, TlsFiles, serve};
use tracing_subscriber::EnvFilter;

/// Arrow Flight service for backtest parameter sweeps: push a series once, sweep it many times.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// TCP address to serve on (grpc://HOST:PORT). Port 0 picks a free port; the address
    /// actually bound is printed on the first line of stdout.
    #[arg(long, default_value = "127.0.0.1:8815")]
    listen: SocketAddr,

    /// Serve on this Unix domain socket (grpc+unix://PATH) instead of TCP.
    #[arg(long, conflicts_with = "listen")]
    unix: Option<PathBuf>,

    /// Largest gRPC message accepted or sent, in bytes.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,

    /// Most combos one sweep call may ask for.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_COMBOS)]
    max_combos: usize,

    /// Bytes of WMA arrays cached across sweeps (least recently used evicted first); 0 disables.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_CACHE_BYTES)]
    cache_bytes: u64,

    /// Largest dataset one put may store, in bytes of decoded Arrow data.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_DATASET_BYTES)]
    max_dataset_bytes: u64,

    /// Most bytes all datasets together may hold (puts past it: RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_TOTAL_BYTES)]
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

    /// After SIGTERM/SIGINT, how long in-flight calls and open connections may take to finish
    /// before the server exits anyway, in seconds.
    #[arg(long, default_value_t = 30)]
    shutdown_grace_secs: u64,

    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl TryFrom<&Cli> for ServerConfig {
    type Error = anyhow::Error;

    fn try_from(cli: &Cli) -> anyhow::Result<Self> {
        anyhow::ensure!(
            cli.max_message_bytes >= 1 << 20,
            "--max-message-bytes must be at least 1 MiB"
        );
        anyhow::ensure!(cli.max_combos >= 1, "--max-combos must be at least 1");
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
            token: cli.token.clone(),
            tls,
            max_message_bytes: cli.max_message_bytes,
            max_combos: cli.max_combos,
            cache_bytes: cli.cache_bytes,
            max_dataset_bytes: cli.max_dataset_bytes,
            max_total_bytes: cli.max_total_bytes,
            data_dir: (!cli.in_memory).then(|| cli.data_dir.clone()),
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
        .init();
    let cli = Cli::parse();
    let config = ServerConfig::try_from(&cli)?;
    let store = Arc::new(open_store(&config)?);
    let (listener, uri) = bind(&cli).await?;
    // The first stdout line is the contract with scripts and tests that start us on port 0.
    println!("sweepflight-server listening on {uri}");
    tracing::info!(%uri, ?config, "serving");
    // Graceful shutdown waits for clients to close their connections; one that never does
    // must not keep the server up, so the grace period starts with the signal.
    let (signalled_tx, mut signalled) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown_signal().await;
        let _ = signalled_tx.send(true);
    };
    let grace = std::time::Duration::from_secs(cli.shutdown_grace_secs);
    let deadline = async move {
        let _ = signalled.wait_for(|&s| s).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        served = serve(listener, config, store, shutdown) => served?,
        () = deadline => tracing::warn!(?grace, "calls still open after the grace period; exiting"),
    }
    if let Some(path) = &cli.unix {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("stopped");
    Ok(())
}

/// Loads the data directory before binding, so "listening" means every dataset is served.
fn open_store(config: &ServerConfig) -> anyhow::Result<DatasetStore> {
    let started = std::time::Instant::now();
    let store = DatasetStore::open(config).context("open the data directory")?;
    if let Some(dir) = &config.data_dir {
        tracing::info!(
            dir = %dir.display(),
            datasets = store.list().len(),
            bytes = store.total_bytes(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "loaded"
        );
    }
    Ok(store)
}

async fn bind(cli: &Cli) -> anyhow::Result<(Listener, String)> {
    if let Some(path) = &cli.unix {
        remove_stale_socket(path)?;
        let l = tokio::net::UnixListener::bind(path)
            .with_context(|| format!("bind {}", path.display()))?;
        return Ok((Listener::Unix(l), format!("grpc+unix://{}", path.display())));
    }
    let l = tokio::net::TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("bind {}", cli.listen))?;
    let addr = l.local_addr()?;
    let scheme = if cli.tls_cert.is_some() {
        "grpc+tls"
    } else {
        "grpc"
    };
    Ok((Listener::Tcp(l), format!("{scheme}://{addr}")))
}

/// A socket file left by a previous run would make bind fail; anything else at that path is
/// not ours to delete.
fn remove_stale_socket(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).context("remove stale socket")
        }
        Ok(_) => anyhow::bail!("{} exists and is not a socket", path.display()),
        Err(_) => Ok(()),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested");
}
