//! Statistics and /proc readings shared by the bench's sides.

use std::time::Instant;

use serde_json::{Value, json};

pub fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

pub fn median(v: &[f64]) -> Option<f64> {
    let s = sorted(v);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

/// Nearest-rank percentile `pct` (same as the Python script).
pub fn percentile(v: &[f64], pct: usize) -> Option<f64> {
    let s = sorted(v);
    let n = s.len();
    if n == 0 {
        return None;
    }
    let rank = (pct * n).div_ceil(100).max(1);
    Some(s[rank - 1])
}

/// `{n, median, p95, p99, min, max, mean}` in the units of `v`.
pub fn summary(v: &[f64]) -> Value {
    let s = sorted(v);
    json!({
        "n": s.len(),
        "median": median(&s),
        "p95": percentile(&s, 95),
        "p99": percentile(&s, 99),
        "min": s.first(),
        "max": s.last(),
        "mean": (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64),
    })
}

/// The concurrent row: latencies (ms), wall time (s), client CPU (ms), executes attempted.
pub fn concurrent_summary(lat: &[f64], wall_s: f64, cpu_ms: f64, attempted: usize) -> Value {
    json!({
        "p50_ms": median(lat),
        "p99_ms": percentile(lat, 99),
        "executes": lat.len(),
        "attempted": attempted,
        "wall_s": wall_s,
        "per_s": lat.len() as f64 / wall_s,
        "cpu_ms_per_execute": cpu_ms / lat.len().max(1) as f64,
    })
}

/// Reset `pid`'s peak RSS (VmHWM) to its current RSS (`5` into /proc/PID/clear_refs), so the
/// next VmHWM reading is the peak of what follows.
pub fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

pub fn vmrss_kib(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmRSS:")
}

/// A kB field of /proc/<pid>/status (VmRSS: current, VmHWM: peak).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// utime + stime of `pid` (its own threads, not its children), in ms.
pub fn cpu_ms(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the `(comm)`, which may contain spaces: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY-free: sysconf is not exposed by std; Linux uses 100 ticks/s (USER_HZ).
    (ticks(11) + ticks(12)) * 10.0
}

pub fn cpu_ms_self() -> f64 {
    cpu_ms(std::process::id())
}
