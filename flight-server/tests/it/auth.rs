//! `--token`: every call but Handshake needs `authorization: Bearer T`; Handshake trades Basic
//! credentials for it, as pyarrow and arrow-rs clients expect. The check is a layer in front of
//! the service: every RPC is refused the same way, and a refused request's body is not read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::*;
use arrow_flight::{FlightClient, FlightData, FlightDescriptor, Ticket};
use base64::Engine;
use futures::TryStreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

fn basic(password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("user:{password}"))
    )
}

/// Every RPC of the Flight service but Handshake, each answered by this client: the code it got
/// (`None` if it succeeded).
async fn every_rpc(c: &mut FlightClient) -> Vec<(&'static str, Option<Code>)> {
    let path = FlightDescriptor::new_path(vec!["x".into()]);
    let exchange = || {
        futures::stream::iter([Ok(
            FlightData::new().with_descriptor(FlightDescriptor::new_cmd(r#"{"op": "echo"}"#))
        )])
    };
    let code_of = |r: Result<(), arrow_flight::error::FlightError>| r.err().map(|e| code(&e));
    vec![
        (
            "ListFlights",
            code_of(c.list_flights(bytes::Bytes::new()).await.map(|_| ())),
        ),
        (
            "GetFlightInfo",
            code_of(c.get_flight_info(path.clone()).await.map(|_| ())),
        ),
        (
            "PollFlightInfo",
            code_of(c.poll_flight_info(path.clone()).await.map(|_| ())),
        ),
        ("GetSchema", code_of(c.get_schema(path).await.map(|_| ()))),
        (
            "DoGet",
            code_of(c.do_get(Ticket::new("x")).await.map(|_| ())),
        ),
        (
            "DoPut",
            code_of(put(c, "x", vec![close_batch(&[1.0])]).await.map(|_| ())),
        ),
        (
            "DoExchange",
            code_of(match c.do_exchange(exchange()).await {
                Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()),
                Err(e) => Err(e),
            }),
        ),
        (
            "DoAction",
            code_of(action(c, "echo", "x").await.map(|_| ())),
        ),
        ("ListActions", code_of(c.list_actions().await.map(|_| ()))),
    ]
}

async fn unauthenticated_everywhere(c: &mut FlightClient) {
    let answers = every_rpc(c).await;
    assert_eq!(answers.len(), 9, "every RPC but Handshake");
    for (rpc, code) in answers {
        assert_eq!(code, Some(Code::Unauthenticated), "{rpc}");
    }
}

#[tokio::test]
async fn every_call_needs_the_token() {
    let server = TestServer::with(|c| c.token = Some("s3cret".into())).await;
    let mut anonymous = server.client().await;
    unauthenticated_everywhere(&mut anonymous).await;

    let mut wrong = server.client().await;
    wrong.add_header("authorization", "Bearer guess").unwrap();
    unauthenticated_everywhere(&mut wrong).await;

    let mut ok = server.client().await;
    ok.add_header("authorization", "Bearer s3cret").unwrap();
    // With the token, no RPC is refused for authentication (some fail for their own reasons:
    // no dataset `x` yet, a PATH descriptor for PollFlightInfo).
    for (rpc, code) in every_rpc(&mut ok).await {
        assert_ne!(code, Some(Code::Unauthenticated), "{rpc}");
    }
    put(&mut ok, "x", vec![close_batch(&series(50))])
        .await
        .unwrap();
    assert_eq!(names(&mut ok).await, ["x"]);
    let b = sweep(&mut ok, serde_json::json!({"dataset": "x", "lengths": [6]}))
        .await
        .unwrap();
    assert_eq!(b.num_rows(), 1);
    let info = ok
        .get_flight_info(FlightDescriptor::new_path(vec!["x".into()]))
        .await
        .unwrap();
    assert_eq!(rows(&mut ok, &info).await.num_rows(), 50);
}

#[tokio::test]
async fn handshake_trades_basic_credentials_for_the_bearer_token() {
    let server = TestServer::with(|c| c.token = Some("s3cret".into())).await;
    let mut c = server.client().await;
    c.add_header("authorization", &basic("s3cret")).unwrap();
    assert_eq!(c.handshake("hello").await.unwrap(), "Bearer s3cret");

    // The raw call: the bearer value also comes back as a response header.
    let mut raw = server.client().await.into_inner();
    let mut request = tonic::Request::new(futures::stream::iter([
        arrow_flight::HandshakeRequest::default(),
    ]));
    request
        .metadata_mut()
        .insert("authorization", basic("s3cret").parse().unwrap());
    let response = raw.handshake(request).await.unwrap();
    assert_eq!(
        response.metadata().get("authorization").unwrap(),
        "Bearer s3cret"
    );

    let mut bad = server.client().await;
    bad.add_header("authorization", &basic("nope")).unwrap();
    assert_eq!(
        code(&bad.handshake("hello").await.unwrap_err()),
        Code::Unauthenticated
    );
    let mut none = server.client().await;
    assert_eq!(
        code(&none.handshake("hello").await.unwrap_err()),
        Code::Unauthenticated
    );
}

/// A TCP proxy in front of `target` that counts the bytes it forwards from the client to the
/// server; its address and the counter.
async fn counting_proxy(target: std::net::SocketAddr) -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let forwarded = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&forwarded);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(target).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    count.fetch_add(n as u64, Ordering::SeqCst);
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    (format!("grpc://{addr}"), forwarded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_body_is_refused_without_being_read() {
    let server = TestServer::with(|c| c.token = Some("s3cret".into())).await;
    let target = server.uri().trim_start_matches("grpc://").parse().unwrap();
    let (uri, forwarded) = counting_proxy(target).await;
    let mut anonymous = connect(&uri).await;
    let body = vec![7u8; 60 << 20];
    let started = std::time::Instant::now();
    let err = action(&mut anonymous, "echo", body).await.unwrap_err();
    assert_eq!(code(&err), Code::Unauthenticated, "{err}");
    // The server answered from the headers and never granted the stream more than its first
    // flow-control window (8 MiB), so most of the 60 MiB never crossed the proxy.
    let sent = forwarded.load(Ordering::SeqCst);
    eprintln!("refused call: {sent} bytes reached the server");
    assert!(
        sent < 24 << 20,
        "{sent} bytes reached the server for a refused call ({:?})",
        started.elapsed()
    );
    // With the token the same size of body is read whole (so the proxy does carry it): the
    // handler sees it and refuses it as a name.
    let mut ok = connect(&uri).await;
    ok.add_header("authorization", "Bearer s3cret").unwrap();
    let err = action(&mut ok, "drop", vec![b'x'; 60 << 20])
        .await
        .unwrap_err();
    assert_eq!(code(&err), Code::InvalidArgument, "{err}");
    assert!(forwarded.load(Ordering::SeqCst) > (60 << 20));
}

/// grpc.health.v1 on the Flight port: SERVING for the whole server (service `""`) without a
/// token (probes carry none), NOT_SERVING once shutdown starts while open calls finish; an
/// unknown service name is NOT_FOUND, as the health protocol says.
#[tokio::test]
async fn the_health_service_answers_probes_and_turns_at_shutdown() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let server = TestServer::with(|c| {
        c.token = Some("s3cret".into());
        c.shutdown_grace = std::time::Duration::from_secs(30);
    })
    .await;
    let channel = tonic::transport::Channel::from_shared(server.uri().to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    let check = |name: &str| HealthCheckRequest {
        service: name.to_owned(),
    };
    let status = health.check(check("")).await.unwrap().into_inner().status;
    assert_eq!(status, ServingStatus::Serving as i32);
    let unknown = health.check(check("nope")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    // The Flight service still wants its token.
    let mut flight = FlightClient::new(channel.clone());
    let refused = flight
        .list_actions()
        .await
        .err()
        .expect("no token: refused");
    assert_eq!(code(&refused), Code::Unauthenticated);
    // A session keeps the server in its grace period after the signal; the open connection
    // then hears NOT_SERVING.
    let mut authed = FlightClient::new(channel);
    authed.add_header("authorization", "Bearer s3cret").unwrap();
    let (tx, rx) = futures::channel::mpsc::unbounded();
    tx.unbounded_send(Ok(
        FlightData::new().with_descriptor(FlightDescriptor::new_cmd(r#"{"op": "session"}"#))
    ))
    .unwrap();
    let _session = authed.do_exchange(rx).await.unwrap();
    let mut inner = server.inner();
    inner.trigger_shutdown();
    let mut last = ServingStatus::Serving as i32;
    for _ in 0..100 {
        last = health.check(check("")).await.unwrap().into_inner().status;
        if last == ServingStatus::NotServing as i32 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(last, ServingStatus::NotServing as i32);
    drop(tx);
}
