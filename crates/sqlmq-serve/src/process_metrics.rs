//! A worker process's own metrics over HTTP (`sqlmq consume --metrics-listen`): its claims,
//! acks, retries, dead letters and handler times per queue, as Prometheus scrapes them. Summed
//! over a fleet (`sum(rate(sqlmq_messages_acked_total{queue="…"}[1m]))`) they are the queue's
//! completion rate, beside the backlog `sqlmq serve` exports from the database.

use std::net::SocketAddr;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;

/// Serve this process's metrics at `http://addr/metrics` (nothing else, no token: bind it
/// where only the scraper reaches). Installs the Prometheus recorder
/// ([`install_prometheus_recorder`](crate::install_prometheus_recorder)). Returns the address
/// bound (the port chosen, for port 0) once listening, and the serving task.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let (addr, _task) = sqlmq_serve::serve_process_metrics("127.0.0.1:9464".parse().unwrap()).await?;
/// println!("metrics at http://{addr}/metrics");
/// # Ok(()) }
/// ```
pub async fn serve_process_metrics(
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let handle = crate::install_prometheus_recorder();
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let text = handle.render();
            async move { ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("the metrics listener stopped: {e}");
        }
    });
    Ok((bound, task))
}
