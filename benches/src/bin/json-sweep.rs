//! `json-sweep`: the pattern the IPC-tax study warns about, for comparison only. A std-only
//! HTTP/1.1 server (keep-alive, one thread per connection) whose `POST /sweep` takes JSON
//! `{"close": [...], "lengths": [...]}` and answers JSON `{"pnl": [...], "trades": [...]}`.
//!
//! Usage: `json-sweep 127.0.0.1:0`; the first stdout line is the address served.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde::Deserialize;
use sweepflight_kernel::{Combo, DEFAULT_FEE, sweep};

#[derive(Deserialize)]
struct Request {
    close: Vec<f64>,
    lengths: Vec<u32>,
}

fn handle(stream: TcpStream) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse()?;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let reply = match serde_json::from_slice::<Request>(&body) {
            Ok(req) => {
                let combos: Vec<Combo> = req
                    .lengths
                    .iter()
                    .map(|&l| Combo::from_length(l))
                    .collect::<Result<_, _>>()?;
                let results = sweep(&req.close, &combos, DEFAULT_FEE)?;
                serde_json::json!({
                    "pnl": results.iter().map(|r| r.pnl).collect::<Vec<_>>(),
                    "trades": results.iter().map(|r| r.trades).collect::<Vec<_>>(),
                })
            }
            Err(e) => serde_json::json!({"error": e.to_string()}),
        };
        let payload = reply.to_string();
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
            payload.len()
        )?;
        writer.flush()?;
    }
}

fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = TcpListener::bind(addr)?;
    println!("json-sweep listening on http://{}", listener.local_addr()?);
    for conn in listener.incoming() {
        let conn = conn?;
        std::thread::spawn(move || handle(conn));
    }
    Ok(())
}
