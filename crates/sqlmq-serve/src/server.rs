//! [`Server`]: binding (and refusing an unsafe address), the router, and graceful shutdown.
//!
//! Shutdown protocol: the caller's token is cancelled (SIGTERM/Ctrl-C with
//! [`shutdown_on_signals`]); the listener stops accepting; the server's own token is cancelled
//! so that long polls return at once with an empty list, and the schedules stop firing
//! (a fire in progress commits or rolls back first); requests in flight finish; the background
//! refresher stops; `run` returns `Ok`.

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use sqlmq::{Backend, DefaultBackend};
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::state::AppState;

/// Why the server could not start.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) {
/// let open = sqlmq_serve::ServeConfig::default().listen("0.0.0.0:8080".parse().unwrap());
/// match sqlmq_serve::Server::bind(client, open).await {
///     Err(sqlmq_serve::ServeError::NonLoopbackWithoutToken(addr)) => eprintln!("set a token to listen on {addr}"),
///     Err(e) => eprintln!("{e}"),
///     Ok(_) => {}
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// No token is configured and the address is not loopback: anyone on the network could
    /// read and change every queue.
    #[error(
        "refusing to listen on {0} without a token: anyone who can reach it could read and \
         change every queue. Set --token (or SQLMQ_API_TOKEN, or --token-file), or listen on \
         a loopback address such as 127.0.0.1"
    )]
    NonLoopbackWithoutToken(SocketAddr),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The whole application: API, dashboard, `/metrics`, `/openapi.json`, with authentication,
/// body limit and HTTP metrics, on the client's backend. For embedding in another axum server;
/// [`Server`] runs it. Neither the refresher of database gauges nor the firing of due schedules
/// is started by this function (see [`Server::run`]; an embedding application fires schedules
/// with `sqlmq::Client::run_schedules`, or from its workers).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) {
/// let app: axum::Router = sqlmq_serve::router(client, &sqlmq_serve::ServeConfig::default());
/// # let _ = app;
/// # }
/// ```
pub fn router<B: Backend>(client: sqlmq::Client<B>, config: &ServeConfig) -> Router {
    build(AppState::new(client, config), config)
}

fn build<B: Backend>(state: AppState<B>, config: &ServeConfig) -> Router {
    crate::api::routes()
        .merge(crate::dashboard::routes())
        .route("/openapi.json", axum::routing::get(crate::openapi::serve))
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method (see /openapi.json)",
            )
        })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::auth::layer,
        ))
        .layer(middleware::from_fn(record))
        .layer(middleware::from_fn(crate::trace_context::layer))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(crate::panic::layer())
        .with_state(state)
}

/// Count and time every request by route template (bounded labels).
async fn record(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().to_string();
    let start = Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!(sqlmq::telemetry::catalogue::HTTP_REQUESTS.name(), "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!(sqlmq::telemetry::catalogue::HTTP_REQUEST_DURATION.name(), "route" => route)
        .record(start.elapsed().as_secs_f64());
    response
}

/// A bound server, ready to run, on the client's backend `B` (MySQL by default).
///
/// ```no_run
/// // Any backend: the client's type picks it.
/// async fn serve<B: sqlmq::Backend>(
///     client: sqlmq::Client<B>,
/// ) -> Result<(), sqlmq_serve::ServeError> {
///     let config = sqlmq_serve::ServeConfig::default();
///     let server: sqlmq_serve::Server<B> = sqlmq_serve::Server::bind(client, config).await?;
///     server.run(sqlmq_serve::shutdown_on_signals()).await
/// }
/// ```
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> Result<(), sqlmq_serve::ServeError> {
/// let config = sqlmq_serve::ServeConfig::default().listen("127.0.0.1:0".parse().unwrap());
/// let server = sqlmq_serve::Server::bind(client, config).await?;
/// let addr = server.local_addr();
/// let stop = tokio_util::sync::CancellationToken::new();
/// tokio::spawn(server.run(stop.clone()));
/// // … talk to http://{addr} …
/// stop.cancel();
/// # Ok(()) }
/// ```
pub struct Server<B: Backend = DefaultBackend> {
    listener: TcpListener,
    state: AppState<B>,
    app: Router,
}

impl<B: Backend> Server<B> {
    /// Check the configuration and bind its address.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> Result<(), sqlmq_serve::ServeError> {
    /// let server = sqlmq_serve::Server::bind(client, sqlmq_serve::ServeConfig::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn bind(
        client: sqlmq::Client<B>,
        config: ServeConfig,
    ) -> Result<Server<B>, ServeError> {
        config.check()?;
        let listener = listen(config.listen).map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
        let state = AppState::new(client, &config);
        let app = build(state.clone(), &config);
        Ok(Server {
            listener,
            state,
            app,
        })
    }

    /// The address actually bound (the port chosen for port 0).
    ///
    /// ```no_run
    /// # fn f(s: sqlmq_serve::Server) { println!("http://{}", s.local_addr()); }
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The shared state (for tests and embedding: the same one the handlers use).
    ///
    /// ```no_run
    /// # fn f(s: sqlmq_serve::Server) { let _state = s.state().clone(); }
    /// ```
    pub fn state(&self) -> &AppState<B> {
        &self.state
    }

    /// Serve until `shutdown` is cancelled, then shut down gracefully (see the module docs).
    /// Meanwhile the gauges are refreshed in the background and due schedules are fired
    /// (`sqlmq::Client::run_schedules`).
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq_serve::Server) -> Result<(), sqlmq_serve::ServeError> {
    /// s.run(sqlmq_serve::shutdown_on_signals()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let state = self.state.clone();
        let refresher = tokio::spawn(crate::snapshot::run(state.clone()));
        // Due schedules fire from here as from every worker: the database picks one firer of
        // each fire time, so any number of servers and workers may run this.
        let schedules = tokio::spawn({
            let client = state.client.clone();
            let stop = state.shutdown.clone();
            async move { client.run_schedules(stop).await }
        });
        let stopping = state.shutdown.clone();
        let graceful = async move {
            shutdown.cancelled().await;
            // Long polls see this and answer at once, so the drain below is quick.
            stopping.cancel();
        };
        let result = crate::http1::serve(self.listener, self.app, graceful).await;
        state.shutdown.cancel();
        let _ = refresher.await;
        let _ = schedules.await;
        result.map_err(ServeError::Io)
    }
}

/// Connections the kernel queues for `accept`: thousands of long-polling clients reconnecting
/// at once (after a restart, or when their waits end together) must not overflow it and be
/// reset. (Tokio's `TcpListener::bind` asks for 1 024; the kernel caps it at `somaxconn`.)
const BACKLOG: u32 = 4096;

/// Listen on `addr` with [`BACKLOG`] (and `SO_REUSEADDR`, as `TcpListener::bind` sets).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// A token cancelled on SIGTERM or Ctrl-C (SIGINT).
///
/// ```no_run
/// # async fn f(s: sqlmq_serve::Server) -> Result<(), sqlmq_serve::ServeError> {
/// s.run(sqlmq_serve::shutdown_on_signals()).await?;
/// # Ok(()) }
/// ```
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        trigger.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server on the SQLite backend, in-process: a queue created, a message sent and
    /// received over HTTP (the HTTP tests in `tests/` run the same router on MySQL/MariaDB).
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_router_serves_sqlite_too() {
        let client = sqlmq::Client::<sqlmq::Sqlite>::open("sqlite::memory:")
            .await
            .unwrap();
        client.migrate().await.unwrap();
        let config = ServeConfig::default().listen("127.0.0.1:0".parse().unwrap());
        let server = Server::bind(client, config).await.unwrap();
        let base = format!("http://{}", server.local_addr());
        let stop = CancellationToken::new();
        let running = tokio::spawn(server.run(stop.clone()));
        let http = reqwest::Client::new();
        let put = http
            .put(format!("{base}/v1/queues/jobs"))
            .json(&serde_json::json!({}));
        assert_eq!(put.send().await.unwrap().status(), 200);
        let send = http
            .post(format!("{base}/v1/queues/jobs/messages"))
            .json(&serde_json::json!({"messages": [{"body": "hello"}]}));
        assert_eq!(send.send().await.unwrap().status(), 200);
        let got: serde_json::Value = http
            .post(format!("{base}/v1/queues/jobs/receive"))
            .json(&serde_json::json!({"max": 5}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(got["messages"][0]["body"], "hello", "{got}");
        stop.cancel();
        running.await.unwrap().unwrap();
    }
}
