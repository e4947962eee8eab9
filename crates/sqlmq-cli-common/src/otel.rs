//! OpenTelemetry export for the binaries: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, sqlmq's spans (`send`, `receive`, `process`,
//! `ack`, HTTP requests) go to that collector over OTLP/HTTP with protobuf, and sent messages
//! carry the W3C trace context in their headers. The standard `OTEL_*` variables configure the
//! rest (`OTEL_SERVICE_NAME`, default `sqlmq`; `OTEL_RESOURCE_ATTRIBUTES`; headers, timeouts).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The exporter's provider: shut it down at exit so that the last spans are sent.
pub(crate) struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Start exporting when the environment names a collector; `Ok(None)` when it names none.
    pub(crate) fn from_env() -> Result<Option<(Export, SdkTracer)>, String> {
        let configured = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        if !configured {
            return Ok(None);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|e| format!("cannot start the OTLP exporter: {e}"))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("sqlmq");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let tracer = provider.tracer("sqlmq");
        Ok(Some((Export { provider }, tracer)))
    }

    /// Send what is buffered and stop.
    pub(crate) fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("warning: OpenTelemetry export did not finish: {e}");
        }
    }
}
