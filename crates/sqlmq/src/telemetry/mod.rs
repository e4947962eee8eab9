//! Tracing across the queue: the W3C trace context (`traceparent`, `tracestate`) travels in a
//! message's headers, from the span that sent it to the span that handles it, and every
//! messaging operation is a `tracing` span named and attributed after the OpenTelemetry
//! messaging conventions (`send jobs`, `receive jobs`, `process jobs`, `ack jobs`, with
//! `messaging.system = "sqlmq"`, `messaging.destination.name`, `messaging.operation.type`, …).
//!
//! The spans are plain `tracing` spans at the `INFO` level under the `sqlmq` target: with no
//! subscriber interested they cost nothing. The headers need OpenTelemetry: build sqlmq with
//! its `opentelemetry` feature and install a `tracing-opentelemetry` layer and a text-map
//! propagator (`TraceContextPropagator`); `sqlmq serve`, `consume` and `subscribe` do so when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Without them nothing is added to any message, and a
//! `traceparent` header given by the application is carried untouched.
//!
//! Metrics go through the `metrics` facade, each under a name of [`catalogue`], which lists
//! every one with its help text ([`describe_metrics`] hands them to a recorder).

pub mod catalogue;

use std::collections::BTreeMap;

use tracing::Span;

pub use catalogue::{METRICS, Metric, MetricKind, describe_metrics};

/// The W3C trace context header: which trace and span a message was sent from.
///
/// ```
/// # fn f(d: sqlmq::Delivery) {
/// if let Some(parent) = d.headers.get(sqlmq::telemetry::TRACEPARENT) {
///     println!("sent in trace {parent}");
/// }
/// # }
/// ```
pub const TRACEPARENT: &str = "traceparent";
/// The W3C vendor-specific trace state header, carried beside [`TRACEPARENT`].
///
/// ```
/// assert_eq!(sqlmq::telemetry::TRACESTATE, "tracestate");
/// ```
pub const TRACESTATE: &str = "tracestate";

/// What a span does, after the conventions' `messaging.operation.type`.
#[derive(Clone, Copy)]
pub(crate) enum Operation {
    /// Sending messages or publishing records (a producer span).
    Send,
    /// Claiming messages (a client span).
    Receive,
    /// Running a handler on one message (a consumer span, continuing the sender's trace).
    Process,
    /// Acking (a client span).
    Settle,
}

/// A consumer group as a span's destination: `topic/group`.
pub(crate) struct GroupName<'a>(pub &'a str, pub &'a str);

impl std::fmt::Display for GroupName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.0, self.1)
    }
}

/// The span of `operation` on `destination` (a queue, a topic, or `topic/group`), for `count`
/// messages. `destination` is only turned into text when a subscriber wants the span.
pub(crate) fn span(
    operation: Operation,
    destination: &dyn std::fmt::Display,
    count: usize,
) -> Span {
    let (name, kind, kind_type) = match operation {
        Operation::Send => ("send", "producer", "send"),
        Operation::Receive => ("receive", "client", "receive"),
        Operation::Process => ("process", "consumer", "process"),
        Operation::Settle => ("ack", "client", "settle"),
    };
    tracing::info_span!(
        target: "sqlmq",
        "sqlmq",
        otel.name = %format_args!("{name} {destination}"),
        otel.kind = kind,
        messaging.system = "sqlmq",
        messaging.operation.type = kind_type,
        messaging.operation.name = name,
        messaging.destination.name = %destination,
        messaging.batch.message_count = count,
        messaging.message.id = tracing::field::Empty,
    )
}

/// Run `claim` (of up to `n` messages from `destination`) in a `receive` span that records
/// how many it claimed.
/// (The span is made before the returned future runs: `destination` need not outlive it.)
pub(crate) fn receive(
    destination: &dyn std::fmt::Display,
    n: usize,
    claim: impl std::future::Future<Output = crate::domain::Result<Vec<crate::domain::Delivery>>>,
) -> impl std::future::Future<Output = crate::domain::Result<Vec<crate::domain::Delivery>>> {
    use tracing::Instrument;
    let span = span(Operation::Receive, destination, n);
    async move {
        let claimed = claim.instrument(span.clone()).await;
        if let Ok(got) = &claimed {
            span.record("messaging.batch.message_count", got.len());
        }
        claimed
    }
}

/// The span a handler runs `delivery` in: a `process` span continuing the trace the message
/// was sent in.
pub(crate) fn process(
    destination: &dyn std::fmt::Display,
    delivery: &crate::domain::Delivery,
) -> Span {
    let span = span(Operation::Process, destination, 1);
    if !span.is_disabled() {
        span.record("messaging.message.id", tracing::field::display(delivery.id));
        continue_trace(&span, &delivery.headers);
    }
    span
}

/// The span of a send or publish of `count` messages to `destination`; each message, given as
/// its id and headers, carries the span's trace context from now on.
pub(crate) fn send_span<'a>(
    destination: &str,
    count: usize,
    messages: impl Iterator<Item = (crate::domain::MessageId, &'a mut BTreeMap<String, String>)>,
) -> Span {
    let span = span(Operation::Send, &destination, count);
    if !span.is_disabled() {
        for (id, headers) in messages {
            if count == 1 {
                span.record("messaging.message.id", tracing::field::display(id));
            }
            inject(&span, headers);
        }
    }
    span
}

/// Add the trace context of `span` to `headers` (unless they carry a `traceparent` already:
/// the application's own wins), so that whoever handles the message continues the trace.
/// Nothing happens without the `opentelemetry` feature, or when `span` belongs to no trace.
///
/// ```
/// let mut headers = std::collections::BTreeMap::new();
/// sqlmq::telemetry::inject(&tracing::Span::current(), &mut headers);
/// assert!(headers.is_empty()); // no OpenTelemetry layer is installed here
/// ```
pub fn inject(span: &Span, headers: &mut BTreeMap<String, String>) {
    #[cfg(feature = "opentelemetry")]
    otel::inject(span, headers);
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, headers);
}

/// Make `span` a child of the trace context in `headers` (a message's, or an HTTP request's
/// `traceparent` and `tracestate`). Nothing happens without the `opentelemetry` feature, or
/// when the headers carry no valid context.
///
/// ```
/// let headers = std::collections::BTreeMap::from([(
///     "traceparent".to_owned(),
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
/// )]);
/// let span = tracing::info_span!("handle");
/// sqlmq::telemetry::continue_trace(&span, &headers);
/// ```
pub fn continue_trace(span: &Span, headers: &BTreeMap<String, String>) {
    #[cfg(feature = "opentelemetry")]
    otel::continue_trace(span, headers);
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, headers);
}

/// The trace context of the current span as header names and values (empty when it belongs
/// to no trace): what `sqlmq consume --exec` hands its command as `TRACEPARENT` and
/// `TRACESTATE`.
///
/// ```
/// assert!(sqlmq::telemetry::current().is_empty());
/// ```
pub fn current() -> BTreeMap<String, String> {
    let mut headers = BTreeMap::new();
    inject(&Span::current(), &mut headers);
    headers
}

/// The OpenTelemetry side: the global propagator reads and writes the headers.
#[cfg(feature = "opentelemetry")]
mod otel {
    use std::collections::BTreeMap;

    use opentelemetry::propagation::{Extractor, Injector};
    use opentelemetry::trace::TraceContextExt;
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::TRACEPARENT;

    struct Headers<'a>(&'a mut BTreeMap<String, String>);

    impl Injector for Headers<'_> {
        fn set(&mut self, key: &str, value: String) {
            self.0.insert(key.to_owned(), value);
        }
    }

    struct Read<'a>(&'a BTreeMap<String, String>);

    impl Extractor for Read<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).map(String::as_str)
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(String::as_str).collect()
        }
    }

    pub(super) fn inject(span: &Span, headers: &mut BTreeMap<String, String>) {
        if span.is_disabled() || headers.contains_key(TRACEPARENT) {
            return;
        }
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return;
        }
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut Headers(headers))
        });
    }

    pub(super) fn continue_trace(span: &Span, headers: &BTreeMap<String, String>) {
        if span.is_disabled() || !headers.contains_key(TRACEPARENT) {
            return;
        }
        let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Read(headers)));
        if cx.span().span_context().is_valid() {
            // An error means the span is not OpenTelemetry's (no layer): nothing to continue.
            let _ = span.set_parent(cx);
        }
    }
}
