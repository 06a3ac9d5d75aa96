//! `raw-echo`: the floor of a process boundary. A std-only server that answers each
//! length-prefixed message (u32 little-endian length, then the bytes) with the same message,
//! on a Unix socket or TCP, one thread per connection.
//!
//! Usage: `raw-echo --unix PATH` or `raw-echo --tcp 127.0.0.1:0`; the first stdout line is the
//! address served. Runs until killed.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;

fn serve<S: Read + Write>(read: S, write: S) -> std::io::Result<()> {
    let mut r = BufReader::new(read);
    let mut w = BufWriter::new(write);
    let mut buf = Vec::new();
    loop {
        let mut len = [0u8; 4];
        if r.read_exact(&mut len).is_err() {
            return Ok(());
        }
        buf.resize(u32::from_le_bytes(len) as usize, 0);
        r.read_exact(&mut buf)?;
        w.write_all(&len)?;
        w.write_all(&buf)?;
        w.flush()?;
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, path] if flag == "--unix" => {
            let _ = std::fs::remove_file(path);
            let l = UnixListener::bind(path)?;
            println!("raw-echo listening on unix://{path}");
            for conn in l.incoming() {
                let c = conn?;
                let c2 = c.try_clone()?;
                std::thread::spawn(move || serve(c, c2));
            }
        }
        [flag, addr] if flag == "--tcp" => {
            let l = TcpListener::bind(addr)?;
            println!("raw-echo listening on tcp://{}", l.local_addr()?);
            for conn in l.incoming() {
                let c = conn?;
                c.set_nodelay(true)?;
                let c2 = c.try_clone()?;
                std::thread::spawn(move || serve(c, c2));
            }
        }
        _ => anyhow::bail!("usage: raw-echo --unix PATH | --tcp HOST:PORT"),
    }
    Ok(())
}
