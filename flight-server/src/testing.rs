//! Test support (feature `testing`): the real `sweepflight-server` binary on 127.0.0.1 port 0
//! or a Unix socket (in memory unless the flags name a `--data-dir`), killed when dropped. Used by this crate's and the clients' integration
//! tests, so every test talks to the same binary users run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running server process.
#[derive(Debug)]
pub struct TestServer {
    child: Child,
    /// The address it printed: `grpc://127.0.0.1:PORT` or `grpc+unix://PATH`.
    pub uri: String,
}

impl TestServer {
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
    /// As [`TestServer::start`].
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

    /// The binary in the same target directory as the running test executable
    /// (`target/<profile>/sweepflight-server`), built first if it is not there.
    ///
    /// # Panics
    /// If it is missing and `cargo build` fails.
    pub fn binary_beside_current_exe() -> PathBuf {
        let exe = std::env::current_exe().expect("current exe");
        // target/<profile>/deps/<test>-<hash> -> target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let binary = profile_dir.join("sweepflight-server");
        if !binary.exists() {
            let release = profile_dir.ends_with("release");
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.args([
                "build",
                "-q",
                "-p",
                "sweepflight-server",
                "--bin",
                "sweepflight-server",
            ]);
            if release {
                cmd.arg("--release");
            }
            assert!(
                cmd.status().expect("run cargo").success(),
                "cargo build sweepflight-server"
            );
        }
        binary
    }
}

impl TestServer {
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
}

impl TestServer {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
