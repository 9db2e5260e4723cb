//! The OAuth options (`--oauth-issuer`, `--oauth-audience`, the scope names) as the library's
//! resource server, and what `kernel-mcp doctor` says about them: whether OAuth is on, the
//! issuer, the audience, the scopes, and whether the issuer's keys could be fetched.

use std::fmt::Write as _;
use std::sync::Arc;

use kernel_mcp::auth::oauth::{OAuth, OAuthConfig, ScopeNames};
use kernel_mcp::service::http::HttpRecord;
use serde::Serialize;

use super::args::OAuthArgs;

/// The resource server the options configure; `None` without either option.
/// Errors: one of `--oauth-issuer` and `--oauth-audience` without the other, or the
/// configuration is refused (the message names the option and the fix).
pub fn configured(args: &OAuthArgs) -> anyhow::Result<Option<Arc<OAuth>>> {
    let (issuer, audience) = match (&args.oauth_issuer, &args.oauth_audience) {
        (Some(i), Some(a)) => (i, a),
        (None, None) => return Ok(None),
        (Some(_), None) => anyhow::bail!(
            "--oauth-issuer needs --oauth-audience (KERNEL_MCP_OAUTH_AUDIENCE): this server's URL as clients reach it, e.g. https://kernels.example.com/mcp"
        ),
        (None, Some(_)) => anyhow::bail!(
            "--oauth-audience needs --oauth-issuer (KERNEL_MCP_OAUTH_ISSUER): the authorization server whose tokens to accept"
        ),
    };
    let config = OAuthConfig {
        issuer: issuer.trim().to_string(),
        audience: audience.trim().to_string(),
        scopes: ScopeNames {
            read: args.oauth_read_scope.clone(),
            execute: args.oauth_execute_scope.clone(),
            admin: args.oauth_admin_scope.clone(),
        },
    };
    Ok(Some(OAuth::new(config)?))
}

/// What doctor found about OAuth.
#[derive(Debug, Serialize)]
pub struct OAuthReport {
    /// `options` (this command's flags or environment) or `service` (the running HTTP face).
    pub from: &'static str,
    pub issuer: String,
    pub audience: String,
    /// Where clients find the protected resource metadata.
    pub metadata_url: Option<String>,
    /// Whether the issuer's metadata and signing keys could be fetched now.
    pub jwks_reachable: bool,
    pub keys: usize,
    /// Why not, or why the configuration is refused.
    pub error: Option<String>,
}

/// Check the OAuth of the options, else of the running service's HTTP face (`record`);
/// `None` when neither has OAuth on.
pub async fn check(args: &OAuthArgs, record: Option<&HttpRecord>) -> Option<OAuthReport> {
    let mut args = args.clone();
    let from = if args.oauth_issuer.is_some() {
        "options"
    } else {
        let r = record?;
        args.oauth_issuer = Some(r.oauth_issuer.clone()?);
        args.oauth_audience = r.oauth_audience.clone();
        "service"
    };
    let mut report = OAuthReport {
        from,
        issuer: args.oauth_issuer.clone().unwrap_or_default(),
        audience: args.oauth_audience.clone().unwrap_or_default(),
        metadata_url: None,
        jwks_reachable: false,
        keys: 0,
        error: None,
    };
    match configured(&args) {
        Ok(Some(oauth)) => {
            report.metadata_url = Some(oauth.metadata_url().to_string());
            match oauth.probe().await {
                Ok(keys) => {
                    report.jwks_reachable = true;
                    report.keys = keys;
                }
                Err(e) => report.error = Some(e.to_string()),
            }
        }
        Ok(None) => {}
        Err(e) => report.error = Some(e.to_string()),
    }
    Some(report)
}

/// The report's OAuth lines.
pub fn render(report: Option<&OAuthReport>, o: &mut String) {
    let _ = writeln!(o, "\nOAuth (docs/auth.md):");
    let Some(r) = report else {
        let _ = writeln!(
            o,
            "  off (HTTP faces take the static token only; --oauth-issuer and --oauth-audience turn it on)"
        );
        return;
    };
    let from = match r.from {
        "service" => "the running service's HTTP face",
        _ => "these options",
    };
    let _ = writeln!(o, "  on ({from})");
    let _ = writeln!(o, "    issuer:   {}", r.issuer);
    let _ = writeln!(o, "    audience: {}", r.audience);
    if let Some(m) = &r.metadata_url {
        let _ = writeln!(o, "    metadata: {m}");
    }
    match (&r.error, r.jwks_reachable) {
        (None, true) => {
            let _ = writeln!(
                o,
                "    ok   the issuer's keys are reachable ({} usable)",
                r.keys
            );
        }
        (Some(e), _) => {
            let _ = writeln!(o, "    FAIL {e}");
        }
        (None, false) => {}
    }
}
