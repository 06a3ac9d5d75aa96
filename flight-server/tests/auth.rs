//! `--token`: every call but Handshake needs `authorization: Bearer T`; Handshake trades Basic
//! credentials for it, as pyarrow and arrow-rs clients expect.

mod common;

use arrow_flight::{Action, FlightClient, FlightDescriptor, Ticket};
use base64::Engine;
use common::*;
use tonic::Code;

fn basic(password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("user:{password}"))
    )
}

async fn unauthenticated_everywhere(c: &mut FlightClient) {
    let path = FlightDescriptor::new_path(vec!["x".into()]);
    let codes = [
        c.list_flights(bytes::Bytes::new())
            .await
            .map(|_| ())
            .unwrap_err(),
        c.get_flight_info(path.clone())
            .await
            .map(|_| ())
            .unwrap_err(),
        c.get_schema(path).await.map(|_| ()).unwrap_err(),
        c.do_action(Action::new("echo", "x"))
            .await
            .map(|_| ())
            .unwrap_err(),
        c.list_actions().await.map(|_| ()).unwrap_err(),
        c.do_get(Ticket::new("x")).await.map(|_| ()).unwrap_err(),
    ];
    for e in &codes {
        assert_eq!(code(e), Code::Unauthenticated, "{e}");
    }
    let err = put(c, "x", vec![close_batch(&[1.0])]).await.unwrap_err();
    assert_eq!(code(&err), Code::Unauthenticated, "{err}");
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
