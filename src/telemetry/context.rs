//! Trace context in and out of kernel-mcp, as W3C Trace Context (`traceparent`, `tracestate`)
//! and W3C Baggage (`baggage`) strings in a JSON object: a request's `params._meta` (SEP-414),
//! the `_meta` of a call the broker makes, a Jupyter message's `metadata`, a broker request
//! from a kernel. Without the `otel` feature, or while the span is disabled (export off),
//! every function here does nothing.

use serde_json::{Map, Value};

/// The keys a context travels under.
pub const KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

/// Make `span` a child of the context `carrier` holds (its `traceparent`, with `tracestate`
/// and `baggage`); nothing when it holds none, an invalid one, or `span` is disabled. Call it
/// before the span is entered or has children.
pub fn continue_from(span: &tracing::Span, carrier: &Map<String, Value>) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::propagation::TextMapPropagator as _;
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        if span.is_disabled() || !carrier.contains_key("traceparent") {
            return;
        }
        let cx = propagator().extract(&Carrier(carrier));
        if cx.span().span_context().is_valid() {
            let _ = span.set_parent(cx);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, carrier);
}

/// Write `span`'s context into `carrier` (`traceparent`, and `tracestate`, `baggage` when
/// they are not empty), replacing what it held under those keys; nothing when `span` is
/// disabled.
pub fn inject(span: &tracing::Span, carrier: &mut Map<String, Value>) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::propagation::TextMapPropagator as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        if span.is_disabled() {
            return;
        }
        let cx = span.context();
        propagator().inject_context(&cx, &mut CarrierMut(carrier));
        // The propagator writes an empty `tracestate` for a context that has none.
        for key in KEYS {
            if carrier.get(key).and_then(Value::as_str) == Some("") {
                carrier.remove(key);
            }
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, carrier);
}

/// `span`'s context as a JSON object of [`KEYS`] (empty when `span` is disabled).
pub fn carried(span: &tracing::Span) -> Map<String, Value> {
    let mut out = Map::new();
    inject(span, &mut out);
    out
}

/// The propagator of both formats.
#[cfg(feature = "otel")]
pub(super) fn propagator() -> opentelemetry::propagation::TextMapCompositePropagator {
    opentelemetry::propagation::TextMapCompositePropagator::new(vec![
        Box::new(opentelemetry_sdk::propagation::TraceContextPropagator::new()),
        Box::new(opentelemetry_sdk::propagation::BaggagePropagator::new()),
    ])
}

#[cfg(feature = "otel")]
struct Carrier<'a>(&'a Map<String, Value>);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.iter()
            .copied()
            .filter(|k| self.0.contains_key(*k))
            .collect()
    }
}

#[cfg(feature = "otel")]
struct CarrierMut<'a>(&'a mut Map<String, Value>);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Injector for CarrierMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), Value::String(value));
    }
}
