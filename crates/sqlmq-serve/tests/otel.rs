//! One trace from an HTTP send through a worker's handler to its ack: the caller's
//! `traceparent` is continued by the request's span, the send's span puts its context in the
//! message's headers, the worker's `process` span continues it, and the handler's ack is a
//! child of that. An in-process exporter (OpenTelemetry's in-memory one) catches the spans.

mod common;

use std::time::Duration;

use common::{TestServer, eventually, test_config};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sqlmq::{Delivery, JobContext, Outcome, Worker};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_send_is_one_trace_through_the_workers_handler_to_its_ack() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_filter(Targets::new().with_target("sqlmq", tracing::Level::INFO)),
    );
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let s = TestServer::with(test_config()).await;
    s.queue("jobs").await;
    let sent = s
        .http
        .post(s.url("/v1/queues/jobs/messages"))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(&serde_json::json!({"messages": [{"body": "traced"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);

    // The handler sees the trace it runs in, and passes it on as headers would.
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = sqlmq::worker::CancellationToken::new();
    let worker = Worker::builder(&s.client)
        .queue_raw("jobs", move |d: Delivery, _ctx: JobContext| {
            let seen = seen_tx.clone();
            async move {
                let _ = seen.send((d.headers.clone(), sqlmq::telemetry::current()));
                Ok::<_, std::io::Error>(Outcome::Done)
            }
        })
        .run(stop.clone());
    let worker = tokio::spawn(worker);
    let (headers, inside) = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
        .await
        .expect("the worker handles the message")
        .unwrap();
    eventually(Duration::from_secs(10), "the ack", || async {
        (s.get("/v1/queues/jobs").await.1["in_flight"] == 0).then_some(())
    })
    .await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let trace = TraceId::from_hex(TRACE).unwrap();

    let http = named(&spans, "POST /v1/queues/{queue}/messages");
    assert_eq!(http.len(), 1, "{spans:#?}");
    let http = http[0];
    assert_eq!(http.span_context.trace_id(), trace);
    assert_eq!(http.parent_span_id, SpanId::from_hex(CALLER_SPAN).unwrap());

    let send = named(&spans, "send jobs");
    assert_eq!(send.len(), 1, "{spans:#?}");
    let send = send[0];
    assert_eq!(send.span_context.trace_id(), trace);
    assert_eq!(send.parent_span_id, http.span_context.span_id());
    // The message carries the send's context.
    let carried = headers
        .get("traceparent")
        .expect("the message carries a traceparent");
    assert!(
        carried.contains(&format!("{TRACE}-{}", send.span_context.span_id())),
        "{carried}"
    );

    let process = named(&spans, "process jobs");
    assert_eq!(process.len(), 1, "{spans:#?}");
    let process = process[0];
    assert_eq!(process.span_context.trace_id(), trace);
    assert_eq!(process.parent_span_id, send.span_context.span_id());
    assert_eq!(
        inside.get("traceparent").map(String::as_str),
        Some(format!("00-{TRACE}-{}-01", process.span_context.span_id()).as_str()),
        "the handler runs in the process span"
    );

    let ack = named(&spans, "ack jobs");
    assert_eq!(ack.len(), 1, "{spans:#?}");
    assert_eq!(ack[0].span_context.trace_id(), trace);
    assert_eq!(ack[0].parent_span_id, process.span_context.span_id());

    assert!(
        !named(&spans, "receive jobs").is_empty(),
        "the claims are spans too"
    );
    let attribute = |span: &SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        attribute(send, "messaging.system").as_deref(),
        Some("sqlmq")
    );
    assert_eq!(
        attribute(process, "messaging.destination.name").as_deref(),
        Some("jobs")
    );
    assert_eq!(
        attribute(process, "messaging.operation.type").as_deref(),
        Some("process")
    );
    s.finish().await;
}
