//! OpenTelemetry traces and metrics of what kernel-mcp does (docs/telemetry.md):
//! a server span per MCP request following the OpenTelemetry MCP semantic conventions, with
//! children for the queue wait, kernel starts, the run in the kernel, interrupts, restarts,
//! broker calls out and gateway REST calls, and the metrics beside them; exported over
//! OTLP/HTTP (protobuf) when the standard `OTEL_*` variables name an endpoint, off otherwise.
//!
//! The spans are ordinary `tracing` spans of target [`TARGET`], made in [`spans`] and
//! [`run`]; only the layer [`init`] adds (feature `otel`, through `tracing-opentelemetry`)
//! enables that target, so with export off they cost a callsite check each and change no log
//! line. Trace context travels as W3C `traceparent`/`tracestate`/`baggage` strings in JSON
//! objects ([`context`]): a request's `_meta` in, a brokered call's `_meta` and a run's
//! execute_request `metadata` out. Everything here is a plain value every layer may use: it
//! names no other module of the crate but [`crate::tls`].

pub mod context;
#[cfg(feature = "otel")]
mod export;
pub mod metrics;
pub mod run;
mod settings;
pub mod spans;

pub use run::{RunEnd, RunTrace};
pub use settings::Settings;

/// The target of every telemetry span. Not under `kernel_mcp`, so that the log's filters
/// (`KERNEL_MCP_LOG=kernel_mcp=…`) never enable these spans.
pub const TARGET: &str = "otel.kernel_mcp";

/// Most bytes of code or output a span carries with content capture on.
pub const CONTENT_BYTES: usize = 4096;

static SETTINGS: std::sync::OnceLock<Settings> = std::sync::OnceLock::new();

/// This process's settings (read from the environment once).
pub fn settings() -> &'static Settings {
    SETTINGS.get_or_init(Settings::from_env)
}

/// Whether spans carry code and output excerpts (`KERNEL_MCP_OTEL_CAPTURE_CONTENT=1`).
pub fn capture_content() -> bool {
    settings().capture_content
}

/// Keeps the exporters of [`init`] alive; dropping it flushes what is queued (waiting a
/// bounded time for a collector that hangs) and stops them.
pub struct Guard {
    #[cfg(feature = "otel")]
    _providers: Option<export::Providers>,
}

/// The boxed layer [`init`] gives a subscriber.
pub type BoxedLayer<S> = Box<dyn tracing_subscriber::Layer<S> + Send + Sync>;

/// The subscriber layer that exports kernel-mcp's spans, and the guard of the exporters
/// behind it; `None` (and no exporter) unless `serving` and the environment turns export on.
/// Call it once, while the subscriber is built; warnings about the exporter are logged once
/// the subscriber is installed.
pub fn init<S>(serving: bool) -> (Option<BoxedLayer<S>>, Guard)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    let settings = settings();
    if !serving || !(settings.exports_traces() || settings.exports_metrics()) {
        return (
            None,
            Guard {
                #[cfg(feature = "otel")]
                _providers: None,
            },
        );
    }
    #[cfg(feature = "otel")]
    {
        let (layer, providers) = export::build(settings);
        (
            layer,
            Guard {
                _providers: Some(providers),
            },
        )
    }
    #[cfg(not(feature = "otel"))]
    (None, Guard {})
}

/// What `doctor --json` says of telemetry: `on`, the `traces` and `metrics` endpoints (`null`
/// when not exported), `content_capture`, `why_off`, and the [`describe`] line as `summary`.
pub fn report(settings: &Settings) -> serde_json::Value {
    serde_json::json!({
        "on": settings.exports_traces() || settings.exports_metrics(),
        "traces": settings.exports_traces().then_some(&settings.traces),
        "metrics": settings.exports_metrics().then_some(&settings.metrics),
        "content_capture": settings.capture_content,
        "why_off": settings.off_because,
        "summary": describe(settings),
    })
}

/// One line for `doctor`: whether export is on, and where to.
pub fn describe(settings: &Settings) -> String {
    if let Some(why) = &settings.off_because {
        return format!("off ({why})");
    }
    match (&settings.traces, &settings.metrics) {
        (None, None) => {
            "off (set OTEL_EXPORTER_OTLP_ENDPOINT to export traces and metrics over OTLP/HTTP)"
                .to_string()
        }
        (t, m) => {
            let mut parts = Vec::new();
            if let Some(t) = t {
                parts.push(format!("traces to {t}"));
            }
            if let Some(m) = m {
                parts.push(format!("metrics to {m}"));
            }
            let content = if settings.capture_content {
                ", with code and output excerpts (KERNEL_MCP_OTEL_CAPTURE_CONTENT)"
            } else {
                ""
            };
            format!(
                "on: {} (OTLP/HTTP protobuf, service {}){content}",
                parts.join(", "),
                settings.service_name
            )
        }
    }
}
