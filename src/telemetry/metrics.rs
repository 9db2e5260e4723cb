//! kernel-mcp's metrics: the MCP conventions' `mcp.server.operation.duration`, and its own
//! `kernel_mcp.*` instruments (sessions by state, queue depth, runs by status, kernel starts
//! by source and outcome, pool hits, output bytes, kernel deaths). Each function records one
//! observation; attribute values are small closed sets (a state, a status, a tool name), never
//! a session name or anything a caller wrote. Without the `otel` feature they do nothing; with
//! it but no metrics endpoint they record into the SDK's no-op meter.

/// One MCP request served: `method` (`tools/call`…), the tool, `error_type` (`tool_error`,
/// or a JSON-RPC code), the protocol version, the transport (`pipe` or `tcp`), how long.
pub fn operation(
    method: &'static str,
    tool: Option<&str>,
    error_type: Option<&str>,
    protocol: Option<&str>,
    transport: &'static str,
    seconds: f64,
) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let mut attrs = Vec::with_capacity(5);
        attrs.push(KeyValue::new("mcp.method.name", method));
        attrs.push(KeyValue::new("network.transport", transport));
        if let Some(t) = tool {
            attrs.push(KeyValue::new("gen_ai.tool.name", t.to_string()));
        }
        if let Some(e) = error_type {
            attrs.push(KeyValue::new("error.type", e.to_string()));
        }
        if let Some(p) = protocol {
            attrs.push(KeyValue::new("mcp.protocol.version", p.to_string()));
        }
        imp::get().operation.record(seconds, &attrs);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (method, tool, error_type, protocol, transport, seconds);
}

/// A session moved from state `from` to `to` (`None`: it did not exist, or no longer does).
pub fn session_state(from: Option<&'static str>, to: Option<&'static str>) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let m = imp::get();
        if let Some(f) = from {
            m.sessions.add(-1, &[KeyValue::new("state", f)]);
        }
        if let Some(t) = to {
            m.sessions.add(1, &[KeyValue::new("state", t)]);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (from, to);
}

/// The runs waiting in queues changed by `delta`.
pub fn queue_depth(delta: i64) {
    #[cfg(feature = "otel")]
    if delta != 0 {
        imp::get().queue.add(delta, &[]);
    }
    #[cfg(not(feature = "otel"))]
    let _ = delta;
}

/// A run ended with `status` after `seconds` of execution, having produced `output_bytes`.
pub fn run_finished(status: &'static str, seconds: f64, output_bytes: u64) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let m = imp::get();
        let attrs = [KeyValue::new("status", status)];
        m.runs.add(1, &attrs);
        m.run_duration.record(seconds, &attrs);
        m.output_bytes.add(output_bytes, &[]);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (status, seconds, output_bytes);
}

/// A kernel start ended: where the kernel came from (`local`, `pool`, a gateway), why it was
/// started (`create`, `restart`, `recover`) and whether it worked.
pub fn kernel_start(source: &str, reason: &'static str, ok: bool) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        imp::get().starts.add(
            1,
            &[
                KeyValue::new("source", source.to_string()),
                KeyValue::new("reason", reason),
                KeyValue::new("outcome", if ok { "ok" } else { "error" }),
            ],
        );
    }
    #[cfg(not(feature = "otel"))]
    let _ = (source, reason, ok);
}

/// A new session looked for a pool kernel: `hit` when one was taken.
pub fn pool(hit: bool) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let outcome = if hit { "hit" } else { "miss" };
        imp::get().pool.add(1, &[KeyValue::new("outcome", outcome)]);
    }
    #[cfg(not(feature = "otel"))]
    let _ = hit;
}

/// A kernel died on its own; `cause` is `memory_limit` or `exited`.
pub fn kernel_death(cause: &'static str) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        imp::get().deaths.add(1, &[KeyValue::new("cause", cause)]);
    }
    #[cfg(not(feature = "otel"))]
    let _ = cause;
}

#[cfg(feature = "otel")]
mod imp {
    use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};

    /// The instruments, made on first use from the global meter provider (set before any
    /// request is served, see `export.rs`).
    pub(super) struct Instruments {
        pub operation: Histogram<f64>,
        pub sessions: UpDownCounter<i64>,
        pub queue: UpDownCounter<i64>,
        pub runs: Counter<u64>,
        pub run_duration: Histogram<f64>,
        pub output_bytes: Counter<u64>,
        pub starts: Counter<u64>,
        pub pool: Counter<u64>,
        pub deaths: Counter<u64>,
    }

    /// The MCP conventions' buckets for operation durations, in seconds.
    const BUCKETS: [f64; 14] = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];

    pub(super) fn get() -> &'static Instruments {
        static ONCE: std::sync::OnceLock<Instruments> = std::sync::OnceLock::new();
        ONCE.get_or_init(|| {
            let m = opentelemetry::global::meter("kernel-mcp");
            Instruments {
                operation: m
                    .f64_histogram("mcp.server.operation.duration")
                    .with_unit("s")
                    .with_description("MCP request duration as observed on the server")
                    .with_boundaries(BUCKETS.to_vec())
                    .build(),
                sessions: m
                    .i64_up_down_counter("kernel_mcp.sessions")
                    .with_description("Sessions by state")
                    .build(),
                queue: m
                    .i64_up_down_counter("kernel_mcp.queue.depth")
                    .with_description("Runs waiting in the sessions' queues")
                    .build(),
                runs: m
                    .u64_counter("kernel_mcp.runs")
                    .with_description("Runs ended, by status")
                    .build(),
                run_duration: m
                    .f64_histogram("kernel_mcp.run.duration")
                    .with_unit("s")
                    .with_description("Time runs spent executing in the kernel, by status")
                    .with_boundaries(BUCKETS.to_vec())
                    .build(),
                output_bytes: m
                    .u64_counter("kernel_mcp.run.output")
                    .with_unit("By")
                    .with_description("Output the runs produced (stdout, stderr, results)")
                    .build(),
                starts: m
                    .u64_counter("kernel_mcp.kernel.starts")
                    .with_description("Kernel starts, by source, reason and outcome")
                    .build(),
                pool: m
                    .u64_counter("kernel_mcp.pool.takes")
                    .with_description("New sessions' looks into the kernel pool: hit or miss")
                    .build(),
                deaths: m
                    .u64_counter("kernel_mcp.kernel.deaths")
                    .with_description("Kernels that died on their own, by cause")
                    .build(),
            }
        })
    }
}
