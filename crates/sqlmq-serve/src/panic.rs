//! A handler that panics answers 500 with the API's error body instead of dropping the
//! connection.
//!
//! Without this layer hyper closes the connection when a handler's future panics, and an HTTP
//! client sees a reset it cannot tell from a network fault (and may retry a send that did
//! apply). A panic is a bug of ours: it is logged with its message, counted, and answered with
//! the stable code `internal` so that clients handle it like any other 500.

use std::any::Any;

use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;

use crate::error::ApiError;

/// The layer, outermost but for the state, so that every route and fallback is covered.
pub(crate) fn layer() -> CatchPanicLayer<fn(Box<dyn Any + Send + 'static>) -> Response> {
    CatchPanicLayer::custom(answer as fn(Box<dyn Any + Send + 'static>) -> Response)
}

/// The 500 answer for a panic, whose payload is logged (it is not sent: it may hold internals).
fn answer(payload: Box<dyn Any + Send + 'static>) -> Response {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    tracing::error!(panic = %message, "a request handler panicked");
    metrics::counter!(sqlmq::telemetry::catalogue::HTTP_PANICS.name()).increment(1);
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the server failed while handling this request (logged); it is a bug, please report it",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;

    /// A panicking handler answers 500 JSON with code `internal`, and the server keeps serving.
    #[tokio::test]
    async fn a_panicking_handler_answers_500_json() {
        async fn boom() -> &'static str {
            panic!("handler bug")
        }
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|| async { "fine" }))
            .layer(super::layer());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let http = reqwest::Client::new();
        let answer = http
            .get(format!("http://{addr}/boom"))
            .send()
            .await
            .expect("an answer, not a dropped connection");
        assert_eq!(answer.status().as_u16(), 500);
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert!(
            !body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("handler bug")
        );

        let ok = http.get(format!("http://{addr}/ok")).send().await.unwrap();
        assert_eq!(ok.text().await.unwrap(), "fine");
    }
}
