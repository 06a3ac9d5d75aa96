//! grpc+tls and `--token` from the Rust client (calls and a session) and the CLI, against the
//! real server with a certificate made here (a test CA and a leaf for 127.0.0.1 / localhost).

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use sweepflight_client::{Client, ConnectOptions, SweepRequest};
use sweepflight_server::testing::TestServer;
use tonic::Code;

/// Writes `ca.pem`, `server.pem`, `server.key` into `dir`; returns the CA PEM.
fn make_certs(dir: &Path) -> Vec<u8> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("server.key"), leaf_key.serialize_pem()).unwrap();
    ca.pem().into_bytes()
}

#[tokio::test]
async fn tls_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let ca = make_certs(dir.path());
    let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    let tls = sweepflight_server::TlsFiles {
        cert_pem: std::fs::read(&cert).unwrap(),
        key_pem: std::fs::read(&key).unwrap(),
    };
    let server = TestServer::start(|c| {
        c.tls = Some(tls);
        c.token = Some("s3cret".into());
    })
    .await;
    assert!(
        server.uri().starts_with("grpc+tls://127.0.0.1:"),
        "{}",
        server.uri()
    );

    let options = ConnectOptions {
        token: Some("s3cret".into()),
        tls_ca_pem: Some(ca.clone()),
        ..Default::default()
    };
    let mut c = Client::connect_with(server.uri(), &options).await.unwrap();
    c.put_closes("x", &[100.0, 101.0, 99.0, 102.0])
        .await
        .unwrap();
    assert_eq!(
        c.sweep(&SweepRequest::lengths("x", [1, 2]))
            .await
            .unwrap()
            .batch
            .num_rows(),
        2
    );
    let mut session = c.session().await.unwrap();
    let on_session = session.sweep(&SweepRequest::lengths("x", [1, 2])).await;
    assert_eq!(on_session.unwrap().batch.num_rows(), 2);

    // Right certificate, no token: refused by the service, not the transport.
    let no_token = ConnectOptions {
        tls_ca_pem: Some(ca),
        ..Default::default()
    };
    let mut anon = Client::connect_with(server.uri(), &no_token).await.unwrap();
    assert_eq!(
        anon.list().await.unwrap_err().code(),
        Some(Code::Unauthenticated)
    );
    assert_eq!(
        anon.session().await.unwrap_err().code(),
        Some(Code::Unauthenticated)
    );

    // Plain text against a TLS port fails.
    let plain = server.uri().replace("grpc+tls://", "grpc://");
    let failed = match Client::connect(&plain).await {
        Ok(mut c) => c.list().await.is_err(),
        Err(_) => true,
    };
    assert!(failed, "plain text must not talk to a TLS server");

    // The CLI with --tls-ca and the token from the environment.
    let ca_path = dir.path().join("ca.pem");
    // The server runs on this test's runtime: the CLI is waited for off it.
    let cli = |token: &'static str, args: &'static [&'static str]| {
        let (uri, ca) = (server.uri().to_owned(), ca_path.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sweepflight"))
                .args(["--uri", &uri, "--tls-ca", ca.to_str().unwrap()])
                .args(args)
                .env("SWEEPFLIGHT_TOKEN", token)
                .output()
                .unwrap()
        })
    };
    let out = cli("s3cret", &["ls", "--output", "csv"]).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("x,4,"));
    let out = cli("wrong", &["ls"]).await.unwrap();
    assert_eq!(out.status.code(), Some(5), "unauthenticated exit code");
}
