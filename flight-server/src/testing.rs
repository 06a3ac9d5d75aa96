//! Test support (feature `testing`), used by this crate's and the clients' integration tests:
//!
//! - [`TestServer`]: the server in-process on 127.0.0.1 port 0 (or a Unix socket), in memory
//!   unless configured otherwise, with the shutdown trigger and the serving task owned by the
//!   fixture (arrow-flight's `tests/common/fixture.rs` pattern). Most tests use it.
//! - [`ServerProcess`]: the real `sweepflight-server` binary, for the few tests that need a
//!   process (signals, `kill -9`, the binary's flags).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::{Listen, Server, ServerConfig};

/// A server running in this process on its own tokio task.
#[derive(Debug)]
pub struct TestServer {
    uri: String,
    metrics: Option<std::net::SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<crate::Result<()>>>,
}

impl TestServer {
    /// The configuration tests start from: 127.0.0.1 port 0, in memory, two sweep workers, a
    /// 1 GiB sweep budget and a short grace period; everything else at its default.
    pub fn config() -> ServerConfig {
        ServerConfig {
            listen: Listen::Tcp("127.0.0.1:0".parse().expect("an address")),
            data_dir: None,
            threads: Some(2),
            sweep_memory_bytes: 1 << 30,
            shutdown_grace: std::time::Duration::from_secs(5),
            ..ServerConfig::default()
        }
    }

    /// Starts a server on [`TestServer::config`] changed by `configure`.
    ///
    /// # Panics
    /// If the server cannot bind.
    pub async fn start(configure: impl FnOnce(&mut ServerConfig)) -> Self {
        let mut config = Self::config();
        configure(&mut config);
        let server = Server::bind(config).await.expect("bind the test server");
        let uri = server.uri().to_owned();
        let metrics = server.metrics_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async {
            let _ = rx.await;
        }));
        Self {
            uri,
            metrics,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// [`TestServer::start`] with the test configuration as it is.
    pub async fn start_default() -> Self {
        Self::start(|_| {}).await
    }

    /// `grpc://127.0.0.1:PORT` (or `grpc+unix://PATH`, `grpc+tls://...`).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The metrics endpoint's address, if configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics
    }

    /// Requests shutdown and waits for the server to return.
    ///
    /// # Errors
    /// What the server returned.
    ///
    /// # Panics
    /// If the serving task panicked.
    pub async fn stop(mut self) -> crate::Result<()> {
        self.trigger_shutdown();
        let task = self.task.take().expect("not stopped yet");
        task.await.expect("the server task panicked")
    }

    /// Requests shutdown without waiting (sessions end, new calls are refused).
    pub fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Waits for the server to return after [`TestServer::trigger_shutdown`].
    ///
    /// # Panics
    /// If the serving task panicked.
    pub async fn finished(mut self) -> crate::Result<()> {
        let task = self.task.take().expect("not stopped yet");
        task.await.expect("the server task panicked")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.trigger_shutdown();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The real `sweepflight-server` binary on 127.0.0.1 port 0 or a Unix socket (in memory unless
/// the flags name a `--data-dir`), killed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// The address it printed: `grpc://127.0.0.1:PORT` or `grpc+unix://PATH`.
    pub uri: String,
}

impl ServerProcess {
    /// Starts `binary` on `127.0.0.1:0` with extra flags.
    ///
    /// # Panics
    /// If the binary cannot be started or does not print its address.
    pub fn start(binary: &Path, extra: &[&str]) -> Self {
        Self::spawn(binary, &[&["--listen", "127.0.0.1:0"], extra].concat())
    }

    /// Starts `binary` on a Unix socket at `path` with extra flags.
    ///
    /// # Panics
    /// As [`ServerProcess::start`].
    pub fn start_unix(binary: &Path, path: &Path, extra: &[&str]) -> Self {
        let path = path.to_str().expect("UTF-8 socket path");
        Self::spawn(binary, &[&["--unix", path], extra].concat())
    }

    fn spawn(binary: &Path, args: &[&str]) -> Self {
        // Tests that do not ask for a data directory must not write one into the cwd.
        let storage: &[&str] = if args.contains(&"--data-dir") {
            &[]
        } else {
            &["--in-memory"]
        };
        let mut child = Command::new(binary)
            .args(args)
            .args(storage)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the address line");
        let uri = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_owned();
        assert!(uri.starts_with("grpc"), "unexpected first line {line:?}");
        Self { child, uri }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit; its status, or `None`
    /// if it is still running (it is then killed on drop).
    ///
    /// # Panics
    /// If `kill` cannot be run.
    pub fn terminate(&mut self, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// Kills the process with SIGKILL (no chance to clean up) and waits for it.
    ///
    /// # Panics
    /// If the process cannot be signalled.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the server");
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
