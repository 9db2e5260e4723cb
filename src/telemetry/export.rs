//! Building the OpenTelemetry SDK's providers when [`Settings`] say export is on (feature
//! `otel`): spans through a `BatchSpanProcessor`, metrics through a `PeriodicReader`, both on
//! threads of their own that export with a blocking `reqwest` client (rustls) to the OTLP/HTTP
//! endpoints in protobuf. A span ending costs one `try_send` into a bounded queue
//! (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 spans): when the collector is down or hangs, each export
//! waits at most `OTEL_EXPORTER_OTLP_TIMEOUT` (10 s) on the exporter's thread, the queue fills
//! and further spans are dropped. No tool call waits for any of it. The first failed export
//! logs one warning ([`Warned`]); later failures, and a recovery, log at debug.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use super::Settings;

/// How long shutting down may wait for the last export (a hanging collector delays the
/// process's exit by at most this, per signal).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// The providers this process exports with; shut down (flushing what is queued) on drop.
pub struct Providers {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

impl Drop for Providers {
    fn drop(&mut self) {
        if let Some(t) = self.traces.take() {
            let _ = t.shutdown_with_timeout(SHUTDOWN_WAIT);
        }
        if let Some(m) = self.metrics.take() {
            let _ = m.shutdown_with_timeout(SHUTDOWN_WAIT);
        }
    }
}

/// The tracing layer that turns kernel-mcp's telemetry spans (target [`super::TARGET`] only)
/// into OpenTelemetry spans, and the providers behind it. `None` when `settings` export
/// nothing or the exporter cannot be built (then one warning says why).
pub fn build<S>(settings: &Settings) -> (Option<Box<dyn Layer<S> + Send + Sync>>, Providers)
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    crate::tls::install_provider();
    let warned = Arc::new(AtomicBool::new(false));
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let mut providers = Providers {
        traces: None,
        metrics: None,
    };
    if settings.exports_metrics() {
        match metrics_provider(settings, resource.clone(), warned.clone()) {
            Ok(p) => {
                opentelemetry::global::set_meter_provider(p.clone());
                providers.metrics = Some(p);
            }
            Err(e) => tracing::warn!("OpenTelemetry metrics are not exported: {e}"),
        }
    }
    if !settings.exports_traces() {
        return (None, providers);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build();
    let exporter = match exporter {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("OpenTelemetry traces are not exported: {e}");
            return (None, providers);
        }
    };
    let exporter = Warned {
        inner: exporter,
        warned,
        what: "traces",
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("kernel-mcp");
    opentelemetry::global::set_text_map_propagator(super::context::propagator());
    providers.traces = Some(provider);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_level(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(super::TARGET, tracing::Level::TRACE),
        );
    (Some(Box::new(layer)), providers)
}

fn metrics_provider(
    settings: &Settings,
    resource: Resource,
    warned: Arc<AtomicBool>,
) -> Result<SdkMeterProvider, opentelemetry_otlp::ExporterBuildError> {
    let _ = settings;
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let exporter = Warned {
        inner: exporter,
        warned,
        what: "metrics",
    };
    Ok(SdkMeterProvider::builder()
        .with_periodic_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// An exporter that logs its first failure as one warning (a collector that is down would
/// otherwise say so every few seconds), later ones at debug.
#[derive(Debug)]
struct Warned<E> {
    inner: E,
    /// Shared by the span and metric exporters: one warning per process.
    warned: Arc<AtomicBool>,
    what: &'static str,
}

impl<E> Warned<E> {
    fn note(&self, result: &OTelSdkResult) {
        match result {
            Err(e) if !self.warned.swap(true, Ordering::Relaxed) => tracing::warn!(
                "OpenTelemetry export of {} failed ({e}); kernel-mcp goes on and drops what the bounded queue cannot hold. Is the collector at OTEL_EXPORTER_OTLP_ENDPOINT up? (Further failures are logged at debug.)",
                self.what
            ),
            Err(e) => tracing::debug!("OpenTelemetry export of {} failed: {e}", self.what),
            Ok(()) => {}
        }
    }
}

impl<E: SpanExporter> SpanExporter for Warned<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.note(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Warned<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.note(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}
