//! A put that fills the disk: RESOURCE_EXHAUSTED (the operator's limit, not a bad request, not
//! a server bug), nothing half-stored, and the server still serving and storing once there is
//! room. The disk is a 16 MiB tmpfs when the test may mount one (root); otherwise the binary runs
//! under a 16 MiB file-size limit (RLIMIT_FSIZE, which fails writes with EFBIG).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;
use tonic::Code;

const LIMIT: u64 = 16 << 20;

/// A tmpfs of `LIMIT` bytes mounted at a temporary directory, unmounted when dropped.
struct Tmpfs(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl Tmpfs {
    fn mount() -> Option<Self> {
        // SWEEPFLIGHT_TEST_NO_TMPFS=1 takes the other path, to check it where both work.
        if std::env::var_os("SWEEPFLIGHT_TEST_NO_TMPFS").is_some() {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={LIMIT}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.path().to_owned(), dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The binary with a file-size limit: its first stdout line is its address.
struct Limited(Child, String);

impl Limited {
    fn start(data_dir: &Path) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sweepflight-server"));
        cmd.args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped());
        // SAFETY: between fork and exec only async-signal-safe calls: setrlimit and signal.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: LIMIT,
                    rlim_max: LIMIT,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
                // A write past the limit then fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let uri = line.trim().rsplit(' ').next().unwrap().to_owned();
        Self(child, uri)
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn check(uri: &str, data_dir: &Path) {
    let mut c = connect(uri).await;
    put(&mut c, "small", vec![close_batch(&series(10_000))])
        .await
        .unwrap();
    // 20 MB of closes in five messages: more than the disk holds, found while streaming.
    let big = close_batch(&series(2_500_000));
    let parts = (0..5).map(|i| big.slice(i * 500_000, 500_000)).collect();
    let err = put(&mut c, "big", parts).await.unwrap_err();
    assert_eq!(code(&err), Code::ResourceExhausted, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("No space left") || message.contains("too large"),
        "{message}"
    );
    // Nothing half-stored: the catalog and the directory hold `small` only.
    assert_eq!(names(&mut c).await, ["small"]);
    let entries = |sub: &str| -> Vec<String> {
        std::fs::read_dir(data_dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    assert!(entries("tmp").is_empty(), "{:?}", entries("tmp"));
    let stored = entries("datasets");
    assert!(
        stored.len() == 1 && stored[0].starts_with("small."),
        "{stored:?}"
    );
    // The partial file's space came back: another put fits, and sweeps still run.
    put(&mut c, "again", vec![close_batch(&series(10_000))])
        .await
        .unwrap();
    let b = sweep(
        &mut c,
        serde_json::json!({"dataset": "again", "lengths": [6]}),
    )
    .await
    .unwrap();
    assert_eq!(b.num_rows(), 1);
}

#[tokio::test]
async fn a_full_disk_answers_resource_exhausted_and_stores_nothing() {
    if let Some(disk) = Tmpfs::mount() {
        let data_dir = disk.0.join("data");
        let server = TestServer::with(|c| c.data_dir = Some(data_dir.clone())).await;
        check(server.uri(), &data_dir).await;
        drop(server);
        return;
    }
    eprintln!("cannot mount a tmpfs here; using the binary under RLIMIT_FSIZE");
    let dir = tempfile::tempdir().unwrap();
    let server = Limited::start(dir.path());
    check(&server.1, dir.path()).await;
}
