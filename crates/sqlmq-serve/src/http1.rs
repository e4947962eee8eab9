//! Serving the router over HTTP/1.1: the accept loop and the graceful end of the connections.
//!
//! `axum::serve` first reads 24 bytes of every connection to tell HTTP/2's preface from
//! HTTP/1, then gives hyper those bytes alone; hyper, finding a partial request head, grows its
//! 8 KiB read buffer to 16 KiB, and keeps it while the request waits. With ten thousand long
//! polls waiting that is 80 MiB for nothing (measured with heaptrack). sqlmq's server speaks
//! HTTP/1.1 only (axum is built without `http2`), so this loop hands each connection straight
//! to hyper's HTTP/1 server.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Serve `app` on `listener` until `stop` resolves; then accept no more, let the requests in
/// flight finish and the idle connections close, and return.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    stop: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    // No timer is given to hyper (as with `axum::serve`): say so rather than have it warn.
    http.header_read_timeout(None);
    let connections = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // The client gave up before it was accepted: nothing to serve.
                Err(e) if is_connection_error(&e) => continue,
                // Out of file descriptors and the like: wait for some to free up, as
                // `axum::serve` does, rather than spin.
                Err(e) => {
                    tracing::error!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Each connection calls a clone of the router (a reference count).
        let service = TowerToHyperService::new(app.clone());
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// An accept error that concerns one connection only.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
