//! kernel-mcp's own secrets, and keeping them out of every process it starts for code
//! (docs/semantics.md, "Secrets never reach a kernel").
//!
//! The server may hold tokens in its environment (`KERNEL_MCP_TOKEN`,
//! `KERNEL_MCP_GATEWAY_TOKEN`) and the paths of files that hold them (`KERNEL_MCP_TOKEN_FILE`);
//! a kernel inherits our environment, and whatever the agent's code reads from `os.environ`
//! lands in a tool result, the journal and exports. So every kernel (local, pooled, fresh-run),
//! every installer and every interpreter probe is started through [`scrub`], and a
//! kernelspec's `${VAR}` expansion cannot name one either ([`is_secret`]).
//!
//! What counts as a secret: the names in [`SECRET_VARS`], any `KERNEL_MCP_…` variable whose
//! name contains `TOKEN` (so a token variable added later is covered without a list to edit),
//! and the OAuth settings (`KERNEL_MCP_OAUTH_…`: not secret themselves, but which authorization
//! server and audience this server trusts is none of a kernel's business), and the OTLP
//! exporter's headers (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS`…,
//! which may carry the collector's credentials; see docs/telemetry.md). A caller's OAuth
//! access token is never in an environment at all: it stays in the HTTP face that checked it.
//! Values the caller sets on purpose (`create_session(env=…)`) are theirs and are kept: scrub
//! before adding them.

use std::ffi::OsStr;

/// The variables that hold kernel-mcp's secrets, or where they are.
pub const SECRET_VARS: [&str; 5] = [
    "KERNEL_MCP_TOKEN",
    "KERNEL_MCP_TOKEN_FILE",
    "KERNEL_MCP_GATEWAY_TOKEN",
    "KERNEL_MCP_OAUTH_ISSUER",
    "KERNEL_MCP_OAUTH_AUDIENCE",
];

/// Whether the variable `name` holds one of kernel-mcp's secrets (or a path to one).
pub fn is_secret(name: impl AsRef<OsStr>) -> bool {
    let Some(name) = name.as_ref().to_str() else {
        return false;
    };
    SECRET_VARS.contains(&name)
        || (name.starts_with("KERNEL_MCP_") && name.contains("TOKEN"))
        || name.starts_with("KERNEL_MCP_OAUTH_")
        || (name.starts_with("OTEL_EXPORTER_OTLP_") && name.ends_with("HEADERS"))
}

/// Remove every secret variable of our environment (and the fixed names, set or not) from
/// what `cmd` will inherit. Call it before adding the variables the child should get.
pub fn scrub(cmd: &mut std::process::Command) {
    for name in SECRET_VARS {
        cmd.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if is_secret(&name) {
            cmd.env_remove(name);
        }
    }
}

/// A lookup of our environment for `${VAR}` expansion that never yields a secret.
pub fn env_lookup(name: &str) -> Option<String> {
    if is_secret(name) {
        return None;
    }
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_and_any_kernel_mcp_token_variable_are_secrets_and_others_are_not() {
        for name in SECRET_VARS {
            assert!(is_secret(name), "{name}");
        }
        assert!(is_secret("KERNEL_MCP_JUPYTER_TOKEN"));
        assert!(is_secret("KERNEL_MCP_OAUTH_READ_SCOPE"));
        assert!(!is_secret("KERNEL_MCP_SOCKET"));
        assert!(
            !is_secret("JUPYTER_TOKEN"),
            "not ours: the person's own choice"
        );
        assert!(!is_secret("PATH"));
    }

    #[test]
    fn a_scrubbed_command_does_not_pass_a_token_on() {
        let mut cmd = std::process::Command::new("env");
        // Set as if inherited: scrub removes the fixed names whatever their source.
        cmd.env("KERNEL_MCP_TOKEN", "s3cret")
            .env("KERNEL_MCP_GATEWAY_TOKEN", "g4te")
            .env("KEEP_ME", "yes");
        scrub(&mut cmd);
        let out = cmd.output().expect("run env");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("s3cret") && !text.contains("g4te"), "{text}");
        assert!(text.contains("KEEP_ME=yes"), "{text}");
    }
}
