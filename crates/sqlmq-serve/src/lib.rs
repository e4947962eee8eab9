//! # sqlmq-serve: `sqlmq serve` — an HTTP API, a web dashboard and Prometheus metrics
//!
//! A JSON REST API over the `sqlmq` library (so any language can send, receive with long
//! polls, ack and operate queues and topics), a server-rendered dashboard for operators, and
//! `/metrics` for Prometheus. It is built only on the library's public API and holds no SQL,
//! so it serves any database backend the library has: [`Server`], [`router`] and [`AppState`]
//! are generic over `B: sqlmq::Backend`, with MySQL as the default (as for `sqlmq::Client`).
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let client = sqlmq::Client::connect("mysql://root@127.0.0.1:3306/test").await?;
//! let config = sqlmq_serve::ServeConfig::default()
//!     .listen("127.0.0.1:8080".parse()?)
//!     .prometheus(sqlmq_serve::install_prometheus_recorder());
//! let server = sqlmq_serve::Server::bind(client, config).await?;
//! println!("listening on http://{}", server.local_addr());
//! server.run(sqlmq_serve::shutdown_on_signals()).await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | `config` | [`ServeConfig`]: address, tokens, limits, defaults |
//! | `server` | [`Server`]: bind (refusing an unsafe address), run, graceful shutdown |
//! | `http1` | the accept loop: each connection straight to hyper's HTTP/1 server |
//! | `auth` | bearer tokens (full and read-only), constant-time comparison, dashboard cookie |
//! | `error` | [`ApiError`]: the `{"error":{"code","message"}}` shape, library errors → statuses |
//! | `extract` | [`Json`], [`Query`]: extractors whose rejections are API errors |
//! | `body` | `body` / `body_base64` encoding, time format |
//! | `api/` | the JSON routes, one file per resource |
//! | `longpoll` | broadcast members' waiting polls: in-process wakeups plus backed-off polling |
//! | `handles` | briefly cached queue, topic and group handles |
//! | `snapshot` | the background refresher of database gauges ([`Snapshot`]) |
//! | `history` | the last hour of snapshots for charts |
//! | `gauges` | `/metrics` rendering, [`install_prometheus_recorder`] |
//! | `process_metrics` | a worker process's own `/metrics` ([`serve_process_metrics`]) |
//! | `dashboard/` | the HTML pages and their actions, SVG charts |
//! | `openapi` | the OpenAPI 3.1 document ([`openapi`]) |
//! | `state` | [`AppState`], shared by every handler |
//!
//! Every library call happens in the handler layer (`api/`, `dashboard/`, `snapshot`); each
//! handler is generic over the backend (`async fn h<B: Backend>(State(state):
//! State<AppState<B>>, …)`) and the routers are built for one `B`. The API does not depend on
//! the backend, so the OpenAPI document is one static document: `#[utoipa::path]` describes
//! each handler from its annotation, not from its (generic) signature.

#![warn(missing_docs)]

mod api;
mod auth;
pub mod body;
mod config;
mod dashboard;
mod error;
mod extract;
mod gauges;
mod handles;
mod history;
mod http1;
mod longpoll;
mod openapi;
mod panic;
mod process_metrics;
mod server;
mod snapshot;
mod state;
mod trace_context;

pub use auth::{Access, COOKIE};
pub use config::{
    DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_METRICS_REFRESH, HISTORY_WINDOW, MAX_WAIT,
    ServeConfig,
};
pub use error::{ApiError, ApiResult, ErrorBody, ErrorDetail, RETRY_AFTER_SECS};
pub use extract::{Json, Query};
pub use gauges::{install_prometheus_recorder, render_gauges};
pub use handles::HANDLE_TTL;
pub use longpoll::{POLL_CEILING, POLL_FLOOR};
pub use openapi::openapi;
pub use process_metrics::serve_process_metrics;
pub use server::{ServeError, Server, router, shutdown_on_signals};
pub use snapshot::{RATE_WINDOW, Snapshot};
pub use state::{AppState, Traffic};
