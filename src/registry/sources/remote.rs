//! Sessions on a Jupyter server or gateway: turning `create_session(gateway, kernel)`,
//! `create_session(gateway, kernel_id)` or `create_session(gateway, notebook_path)` into a
//! kernelspec and a [`RemoteLauncher`], after a REST call that answers `GATEWAY_UNAVAILABLE`,
//! `UNAUTHORIZED` or `KERNEL_NOT_FOUND` at once; and the gateways' kernelspecs for
//! `list_kernels`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::kernel::remote::{GatewayError, RemoteLauncher, Rest};
use crate::kernel::{InterruptMode, KernelLauncher, KernelSpec};
use crate::session::{SessionError, StartFailure};

/// One gateway's kernelspec, as `list_kernels` shows it.
#[derive(Debug, Clone)]
pub struct RemoteSpec {
    pub gateway: String,
    pub spec: KernelSpec,
}

/// A gateway's state in `list_kernels`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GatewayState {
    pub name: String,
    pub url: String,
    /// Why it could not be listed (unreachable, token refused); `None` when it answered.
    pub error: Option<String>,
}

/// The session error of a gateway failure.
pub fn session_error(e: GatewayError) -> SessionError {
    let message = e.to_string();
    match e {
        // A server that floods its answers is as unusable as one that cannot be reached.
        GatewayError::Unavailable { gateway, .. } | GatewayError::TooLarge { gateway, .. } => {
            SessionError::GatewayUnavailable { gateway, message }
        }
        GatewayError::Unauthorized { gateway, .. } => {
            SessionError::Unauthorized { gateway, message }
        }
        GatewayError::NotFound { gateway, .. } => SessionError::KernelNotFound {
            message: format!("{message}."),
            details: json!({"gateway": gateway}),
        },
        GatewayError::Http { ref gateway, .. } => {
            SessionError::KernelStartFailed(StartFailure::Gateway {
                gateway: gateway.clone(),
                error: e,
            })
        }
    }
}

/// The gateway named `name`. Errors: `INVALID_ARGUMENT` naming the configured ones.
pub fn find<'a>(gateways: &'a [Rest], name: &str) -> Result<&'a Rest, SessionError> {
    gateways.iter().find(|g| g.gateway().name == name).ok_or_else(|| {
        let known: Vec<&str> = gateways.iter().map(|g| g.gateway().name.as_str()).collect();
        SessionError::InvalidArgument(if known.is_empty() {
            format!("No gateway '{name}': none is configured (start kernel-mcp with --gateway [NAME=]URL).")
        } else {
            format!("No gateway '{name}'. Configured: {}.", known.join(", "))
        })
    })
}

/// Every kernelspec of `rest`'s gateway, and its default kernel's name.
/// Errors: the gateway's, as [`SessionError`]s.
pub async fn kernelspecs(rest: &Rest) -> Result<(Vec<RemoteSpec>, Option<String>), SessionError> {
    let v = rest.kernelspecs().await.map_err(session_error)?;
    let gateway = rest.gateway().name.clone();
    let mut out = Vec::new();
    if let Some(map) = v["kernelspecs"].as_object() {
        for (name, entry) in map {
            out.push(RemoteSpec {
                gateway: gateway.clone(),
                spec: spec_from(name, &entry["spec"], rest),
            });
        }
    }
    out.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    Ok((out, v["default"].as_str().map(String::from)))
}

/// Every gateway's kernelspecs, in parallel, and each gateway's state.
pub async fn list_all(gateways: &[Rest]) -> (Vec<RemoteSpec>, Vec<GatewayState>) {
    let all = futures::future::join_all(gateways.iter().map(kernelspecs)).await;
    let mut specs = Vec::new();
    let mut states = Vec::new();
    for (rest, r) in gateways.iter().zip(all) {
        let error = match r {
            Ok((s, _)) => {
                specs.extend(s);
                None
            }
            Err(e) => Some(e.to_string()),
        };
        states.push(GatewayState {
            name: rest.gateway().name.clone(),
            url: rest.gateway().url.clone(),
            error,
        });
    }
    (specs, states)
}

fn spec_from(name: &str, spec: &Value, rest: &Rest) -> KernelSpec {
    let gateway = &rest.gateway().name;
    KernelSpec {
        name: name.to_string(),
        resource_dir: rest
            .gateway()
            .join(&format!("api/kernelspecs/{name}"))
            .into(),
        argv: Vec::new(),
        display_name: format!(
            "{} (on {gateway})",
            spec["display_name"].as_str().unwrap_or(name)
        ),
        language: spec["language"].as_str().unwrap_or_default().to_string(),
        interrupt_mode: match spec["interrupt_mode"].as_str() {
            Some("message") => InterruptMode::Message,
            _ => InterruptMode::default(),
        },
        env: BTreeMap::new(),
        metadata: spec["metadata"].clone(),
    }
}

/// The kernel id of the notebook open at `path` on Jupyter Server `rest`.
/// Errors: `KERNEL_NOT_FOUND` (no such notebook open there, or a server without
/// `/api/sessions`, such as Kernel Gateway), `GATEWAY_UNAVAILABLE`, `UNAUTHORIZED`.
pub async fn notebook_kernel(rest: &Rest, path: &str) -> Result<String, SessionError> {
    let gateway = &rest.gateway().name;
    let not_found = |why: String| SessionError::KernelNotFound {
        message: why,
        details: json!({"gateway": gateway, "notebook_path": path}),
    };
    match rest.notebook_kernel(path).await {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(not_found(format!(
            "No notebook '{path}' is open with a kernel on gateway '{gateway}' (its /api/sessions lists none at that path). Open it there first, or give kernel_id."
        ))),
        Err(GatewayError::NotFound { .. }) => Err(not_found(format!(
            "Gateway '{gateway}' has no /api/sessions (a Kernel Gateway or Enterprise Gateway keeps no notebooks): notebook_path needs a Jupyter Server; give kernel_id instead."
        ))),
        Err(e) => Err(session_error(e)),
    }
}

/// The spec and launcher of a session on gateway `rest`: a kernel started from `kernel`
/// (else the gateway's default) with `env`, or — with `adopt` — the running kernel of that id.
/// Errors: `GATEWAY_UNAVAILABLE`, `UNAUTHORIZED`, `KERNEL_NOT_FOUND`.
pub async fn launch(
    rest: &Rest,
    kernel: Option<&str>,
    adopt: Option<&str>,
    env: &BTreeMap<String, String>,
    startup_timeout: Duration,
) -> Result<(KernelSpec, Arc<dyn KernelLauncher>), SessionError> {
    let gateway = rest.gateway().name.clone();
    let (specs, default) = kernelspecs(rest).await?;
    let (name, adopt_id) = match adopt {
        Some(id) => {
            let model = rest.kernel(id).await.map_err(|e| match e {
                GatewayError::NotFound { .. } => SessionError::KernelNotFound {
                    message: format!("Gateway '{gateway}' has no running kernel '{id}'."),
                    details: json!({"gateway": gateway, "kernel_id": id}),
                },
                e => session_error(e),
            })?;
            (model.name, Some(id.to_string()))
        }
        None => {
            let name = kernel
                .map(String::from)
                .or(default)
                .unwrap_or_else(|| "python3".into());
            if !specs.iter().any(|s| s.spec.name == name) {
                let available: Vec<&str> = specs.iter().map(|s| s.spec.name.as_str()).collect();
                return Err(SessionError::KernelNotFound {
                    message: format!(
                        "Kernel '{name}' not found on gateway '{gateway}'. Available there: {}.",
                        available.join(", ")
                    ),
                    details: json!({"gateway": gateway, "kernel": name, "available": available}),
                });
            }
            (name, None)
        }
    };
    let mut spec = specs
        .into_iter()
        .find(|s| s.spec.name == name)
        .map(|s| s.spec)
        .unwrap_or_else(|| spec_from(&name, &Value::Null, rest));
    if let Some(id) = &adopt_id {
        spec.display_name = format!("{} (adopted kernel {id})", spec.display_name);
    }
    let launcher = RemoteLauncher {
        rest: rest.clone(),
        kernel: name,
        env: env.clone(),
        adopt_id,
        startup_timeout,
    };
    Ok((spec, Arc::new(launcher)))
}

/// `KERNEL_*` variables a caller may pass to a gateway kernel (Enterprise Gateway reads them
/// as per-kernel settings), each with what its value may hold. Every other `KERNEL_*` —
/// `KERNEL_USERNAME` (kernel-mcp sets it to the principal), `KERNEL_UID`, `KERNEL_GID`,
/// `KERNEL_NAMESPACE`, `KERNEL_SERVICE_ACCOUNT_NAME`… — would let one principal's kernel run
/// as, or beside, another's, and is refused.
const KERNEL_VARS: [(&str, ValueKind); 7] = [
    ("KERNEL_LAUNCH_TIMEOUT", ValueKind::Number),
    ("KERNEL_WORKING_DIR", ValueKind::Path),
    ("KERNEL_IMAGE", ValueKind::Image),
    ("KERNEL_EXECUTOR_IMAGE", ValueKind::Image),
    ("KERNEL_CPUS", ValueKind::Quantity),
    ("KERNEL_MEMORY", ValueKind::Quantity),
    ("KERNEL_GPUS", ValueKind::Quantity),
];

/// What an allowed `KERNEL_*` value may hold.
#[derive(Debug, Clone, Copy)]
enum ValueKind {
    /// Digits.
    Number,
    /// An absolute path without `..`.
    Path,
    /// A container image reference.
    Image,
    /// A resource quantity (`2`, `500m`, `4Gi`).
    Quantity,
}

impl ValueKind {
    fn admits(self, v: &str) -> bool {
        let chars = |ok: fn(char) -> bool| !v.is_empty() && v.len() <= 256 && v.chars().all(ok);
        match self {
            ValueKind::Number => chars(|c| c.is_ascii_digit()),
            ValueKind::Path => {
                v.starts_with('/')
                    && !v.split('/').any(|p| p == "..")
                    && chars(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            }
            ValueKind::Image => chars(|c| c.is_ascii_alphanumeric() || "./:@_-".contains(c)),
            ValueKind::Quantity => chars(|c| c.is_ascii_alphanumeric() || c == '.'),
        }
    }
}

/// The environment a gateway kernel starts with: `env` with its `KERNEL_*` variables checked
/// against [`KERNEL_VARS`], and `KERNEL_USERNAME` = `username` (made safe for a gateway that
/// names pods and directories after it: lower-case letters, digits, `.`, `_`, `-`; at most 63).
/// Errors: `INVALID_ARGUMENT` naming a `KERNEL_*` variable that may not be passed, or a value
/// it may not hold.
pub fn gateway_env(
    env: &BTreeMap<String, String>,
    username: &str,
) -> Result<BTreeMap<String, String>, SessionError> {
    let allowed: Vec<&str> = KERNEL_VARS.iter().map(|(k, _)| *k).collect();
    for (k, v) in env.iter().filter(|(k, _)| k.starts_with("KERNEL_")) {
        let Some((_, kind)) = KERNEL_VARS.iter().find(|(name, _)| name == k) else {
            return Err(SessionError::InvalidArgument(format!(
                "env {k} cannot be passed to a gateway kernel: kernel-mcp sets KERNEL_USERNAME to who is calling, and other KERNEL_* settings would let a kernel run as or beside another user's. Allowed: {}.",
                allowed.join(", ")
            )));
        };
        if !kind.admits(v) {
            return Err(SessionError::InvalidArgument(format!(
                "env {k}={v:?} is not a value kernel-mcp passes to a gateway ({kind:?} expected)."
            )));
        }
    }
    let mut out = env.clone();
    out.insert("KERNEL_USERNAME".into(), gateway_username(username));
    Ok(out)
}

/// `name` as a gateway user name: lower-case, `[a-z0-9._-]` (anything else `-`), at most 63.
fn gateway_username(name: &str) -> String {
    let mut u: String = name
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    if u.trim_matches('-').is_empty() {
        u = "kernel-mcp".into();
    }
    u
}

#[cfg(test)]
mod gateway_env_tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_principal_is_kernel_username_and_only_listed_kernel_vars_with_sane_values_pass() {
        let out = gateway_env(
            &env(&[("A", "1"), ("KERNEL_IMAGE", "repo/img:1.0")]),
            "Alice Smith@corp",
        )
        .unwrap();
        assert_eq!(out["KERNEL_USERNAME"], "alice-smith-corp");
        assert_eq!(out["A"], "1");
        for bad in [
            ("KERNEL_USERNAME", "root"),
            ("KERNEL_UID", "0"),
            ("KERNEL_NAMESPACE", "bob"),
        ] {
            let e = gateway_env(&env(&[bad]), "alice").unwrap_err().to_string();
            assert!(e.contains(bad.0) && e.contains("Allowed"), "{e}");
        }
        let e = gateway_env(&env(&[("KERNEL_WORKING_DIR", "/home/../etc")]), "a").unwrap_err();
        assert!(e.to_string().contains("KERNEL_WORKING_DIR"), "{e}");
        assert!(gateway_env(&env(&[("KERNEL_LAUNCH_TIMEOUT", "12x")]), "a").is_err());
    }
}
