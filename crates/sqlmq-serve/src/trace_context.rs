//! A span per HTTP request, continuing the caller's W3C trace context (`traceparent`,
//! `tracestate` request headers): a message sent through the API carries that trace on to the
//! worker that handles it (see `sqlmq::telemetry`). Named after the OpenTelemetry HTTP
//! conventions (`POST /v1/queues/{queue}/messages`); it costs nothing unless a subscriber
//! wants `sqlmq` spans.

use std::collections::BTreeMap;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use sqlmq::telemetry::{TRACEPARENT, TRACESTATE, continue_trace};
use tracing::Instrument;

/// The middleware.
pub(crate) async fn layer(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let span = tracing::info_span!(
        target: "sqlmq",
        "http",
        otel.name = %format_args!("{} {route}", req.method()),
        otel.kind = "server",
        http.request.method = %req.method(),
        http.route = route,
        url.path = req.uri().path(),
        http.response.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let headers: BTreeMap<String, String> = [TRACEPARENT, TRACESTATE]
            .into_iter()
            .filter_map(|name| {
                let value = req.headers().get(name)?.to_str().ok()?;
                Some((name.to_owned(), value.to_owned()))
            })
            .collect();
        continue_trace(&span, &headers);
    }
    let response = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}
