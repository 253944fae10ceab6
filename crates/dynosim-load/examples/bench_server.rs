//! A trivial loopback HTTP/1.1 server for the load generator's benchmark (bench/loadgen.py):
//! it reads a request's head, waits `--delay-ms` (so that requests are in flight at once, as
//! behind a real app), answers `200 OK` with a 2-byte body and closes the connection.
//!
//!     cargo run --release -p dynosim-load --example bench_server -- [--port P] [--delay-ms D]
//!
//! Prints `listening on ADDR` once ready. Binds 127.0.0.1 only.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

async fn serve(mut stream: TcpStream, delay: Duration) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() > 64 * 1024 {
            return;
        }
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let _ = stream.write_all(RESPONSE).await;
}

fn main() {
    let mut port = 0u16;
    let mut delay_ms = 0u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--delay-ms" => delay_ms = value.parse().expect("--delay-ms takes a number"),
            other => panic!("unknown argument {other} (--port P, --delay-ms D)"),
        }
    }
    let delay = Duration::from_millis(delay_ms);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind 127.0.0.1");
        println!(
            "listening on {}",
            listener.local_addr().expect("an address")
        );
        loop {
            match listener.accept().await {
                Ok((stream, _)) => drop(tokio::spawn(serve(stream, delay))),
                // Out of descriptors, say: let connections finish rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    });
}
