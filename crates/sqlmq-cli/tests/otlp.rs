//! The binary exports its spans over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: a
//! `sqlmq send` posts its `send` span to a collector (a stand-in here that records what it
//! is sent), flushed before the process exits.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use common::TestDb;

/// A collector that answers 200 to every request and hands over (request line, body).
fn collector() -> (String, mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .unwrap();
            let _ = tx.send((request.trim().to_owned(), body));
        }
    });
    (url, rx)
}

#[test]
fn send_exports_its_span_to_the_configured_collector() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "traced"]);
    let (url, requests) = collector();
    let out = db
        .cmd(&["send", "traced", "hello"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env("OTEL_SERVICE_NAME", "sqlmq-otlp-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (request, body) = requests
        .recv_timeout(Duration::from_secs(10))
        .expect("the collector is sent the spans before the process exits");
    assert!(request.starts_with("POST /v1/traces "), "{request}");
    let text = String::from_utf8_lossy(&body);
    for needle in ["send traced", "sqlmq-otlp-test", "messaging.system"] {
        assert!(
            text.contains(needle),
            "{needle} in the exported spans: {text:?}"
        );
    }
}
