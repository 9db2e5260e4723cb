//! Whether and where kernel-mcp exports, read once from the standard `OTEL_*` variables (and
//! kernel-mcp's own `KERNEL_MCP_OTEL_CAPTURE_CONTENT`). The exporter itself reads the
//! endpoint, headers, timeout and batching variables again where it is built (see
//! `export.rs`); this is what `doctor` shows and what decides whether anything is built.

/// The export settings of this process, from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where spans go (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`); `None`: no traces.
    pub traces: Option<String>,
    /// Where metrics go (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/metrics`); `None`: no metrics.
    pub metrics: Option<String>,
    /// Why nothing is exported although an endpoint is set (`OTEL_SDK_DISABLED=true`, a
    /// protocol other than `http/protobuf`, a build without the `otel` feature).
    pub off_because: Option<String>,
    /// `KERNEL_MCP_OTEL_CAPTURE_CONTENT=1`: spans carry code and output excerpts (bounded).
    pub capture_content: bool,
    /// `OTEL_SERVICE_NAME`, else `kernel-mcp`.
    pub service_name: String,
}

impl Settings {
    /// The settings `var` gives (the process environment in [`Settings::from_env`]).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Settings {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let base = get("OTEL_EXPORTER_OTLP_ENDPOINT");
        let signal = |specific: &str, path: &str, exporter: &str| {
            if get(exporter).is_some_and(|e| e.eq_ignore_ascii_case("none")) {
                return None;
            }
            get(specific).or_else(|| {
                base.as_ref()
                    .map(|b| format!("{}{path}", b.trim_end_matches('/')))
            })
        };
        let traces = signal(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "/v1/traces",
            "OTEL_TRACES_EXPORTER",
        );
        let metrics = signal(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "/v1/metrics",
            "OTEL_METRICS_EXPORTER",
        );
        let mut off_because = None;
        if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            off_because = Some("OTEL_SDK_DISABLED=true".to_string());
        }
        for name in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        ] {
            if let Some(p) = get(name).filter(|p| p != "http/protobuf") {
                off_because.get_or_insert(format!(
                    "{name}={p}: kernel-mcp exports OTLP over HTTP with protobuf only; set it to http/protobuf or unset it"
                ));
            }
        }
        if !cfg!(feature = "otel") && (traces.is_some() || metrics.is_some()) {
            off_because.get_or_insert(
                "this kernel-mcp was built without the `otel` feature (cargo build --features otel)"
                    .to_string(),
            );
        }
        Settings {
            traces,
            metrics,
            off_because,
            capture_content: get("KERNEL_MCP_OTEL_CAPTURE_CONTENT")
                .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes")),
            service_name: get("OTEL_SERVICE_NAME").unwrap_or_else(|| "kernel-mcp".to_string()),
        }
    }

    /// The settings of this process's environment.
    pub fn from_env() -> Settings {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Whether spans are exported.
    pub fn exports_traces(&self) -> bool {
        self.off_because.is_none() && self.traces.is_some()
    }

    /// Whether metrics are exported.
    pub fn exports_metrics(&self) -> bool {
        self.off_because.is_none() && self.metrics.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Settings {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        let s = with(&[]);
        assert!(!s.exports_traces() && !s.exports_metrics());
        assert_eq!(s.service_name, "kernel-mcp");
        assert!(!s.capture_content);
    }

    #[test]
    fn the_base_endpoint_gives_each_signal_its_path_and_a_signal_endpoint_wins() {
        let s = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:1/x"),
        ]);
        assert_eq!(s.traces.as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(s.metrics.as_deref(), Some("http://m:1/x"));
        assert_eq!(s.exports_traces(), cfg!(feature = "otel"));
    }

    #[test]
    fn sdk_disabled_grpc_and_an_exporter_of_none_turn_export_off() {
        let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let s = with(&[base, ("OTEL_SDK_DISABLED", "true")]);
        assert!(!s.exports_traces());
        assert_eq!(s.off_because.as_deref(), Some("OTEL_SDK_DISABLED=true"));
        let s = with(&[base, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert!(!s.exports_traces());
        assert!(s.off_because.unwrap().contains("http/protobuf"));
        let s = with(&[base, ("OTEL_METRICS_EXPORTER", "none")]);
        assert!(s.metrics.is_none() && s.traces.is_some());
    }
}
