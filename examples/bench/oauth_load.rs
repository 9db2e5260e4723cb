//! (n) Many principals at once through OAuth: `--load-principals` (8) principals, each with
//! `--load-sessions` (4) named sessions, each session running `--load-per` (200) executes, all
//! at the same time, through `serve --transport http` with OAuth on (a JWT per principal from
//! the test authorization server) and stateless 2026-07-28 requests (no `Mcp-Session-Id`; the
//! session named in each call and mirrored in `Mcp-Param-Session-Id`).
//!
//! Every principal names its sessions alike (`s0`, `s1`, …): the server must keep them apart by
//! principal. Each session first sets its own tag, then each execute increments a counter and
//! answers `tag:counter`; any other answer is cross-talk (or a lost run) and fails the bench.
//! Reports each execute's round trip (p50, p99) and executes per second over the whole run
//! (the sessions' kernel starts included).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::oauth::Provider;
use crate::{Opts, Res};

pub struct Figures {
    pub principals: usize,
    pub sessions: usize,
    pub per: usize,
    /// Every execute's round trip, ms.
    pub execute_ms: Vec<f64>,
    /// From the first session's start to the last answer (kernel starts included), s.
    pub wall_s: f64,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "principals": self.principals,
            "sessions_per_principal": self.sessions,
            "executes_per_session": self.per,
            "execute_ms": crate::stats::summary(&self.execute_ms),
            "wall_s": self.wall_s,
            "executes_per_s": self.execute_ms.len() as f64 / self.wall_s,
        })
    }
}

/// A kernel-mcp `serve --transport http` with OAuth on; killed on drop.
struct Server {
    url: String,
    _child: tokio::process::Child,
}

impl Server {
    async fn start(bin: &Path, issuer: &str) -> Res<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let child = tokio::process::Command::new(bin)
            .args(["serve", "--transport", "http", "--port", &port.to_string()])
            .args(["--oauth-issuer", issuer, "--oauth-audience", &url])
            .env("VIRTUAL_ENV", crate::venv_dir())
            .env_remove("KERNEL_MCP_TOKEN")
            .env_remove("KERNEL_MCP_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = reqwest::get(&metadata).await
                && r.status().is_success()
            {
                return Ok(Server { url, _child: child });
            }
            if Instant::now() > deadline {
                return Err("the OAuth server did not listen within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One stateless `tools/call`; the structured result, or an error naming the reply.
async fn call(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    tool: &str,
    args: Value,
) -> Res<Value> {
    let session = args["session_id"].as_str().unwrap_or_default().to_string();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}});
    let text = http
        .post(url)
        .bearer_auth(token)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("mcp-param-session-id", session)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await?
        .text()
        .await?;
    let reply = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: ").or(l.starts_with('{').then_some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 1)
        .ok_or_else(|| format!("{tool}: no reply in {text:.300}"))?;
    let result = &reply["result"];
    if result["isError"] == true || result.get("structuredContent").is_none() {
        return Err(format!("{tool} failed: {reply}").into());
    }
    Ok(result["structuredContent"].clone())
}

/// One principal's session: create it, tag it, run `per` counted executes; the round trips.
async fn session_run(
    http: reqwest::Client,
    url: Arc<str>,
    token: Arc<str>,
    tag: String,
    name: String,
    per: usize,
) -> Res<Vec<f64>> {
    let s = json!(name);
    call(
        &http,
        &url,
        &token,
        "create_session",
        json!({"session_id": s}),
    )
    .await?;
    let code = format!("tag = {tag:?}; n = 0");
    call(
        &http,
        &url,
        &token,
        "execute",
        json!({"session_id": s, "code": code}),
    )
    .await?;
    let mut took = Vec::with_capacity(per);
    for i in 1..=per {
        let t0 = Instant::now();
        let v = call(
            &http,
            &url,
            &token,
            "execute",
            json!({"session_id": s,
            "code": "n += 1; f'{tag}:{n}'"}),
        )
        .await?;
        took.push(crate::stats::ms(t0));
        let want = format!("'{tag}:{i}'");
        if v["result"].as_str() != Some(want.as_str()) {
            return Err(format!("cross-talk: {tag} expected {want}, got {v}").into());
        }
    }
    call(
        &http,
        &url,
        &token,
        "destroy_session",
        json!({"session_id": s}),
    )
    .await?;
    Ok(took)
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Option<Figures>> {
    let Some(provider) = Provider::start().await? else {
        return Ok(None);
    };
    kernel_mcp::tls::install_provider();
    let server = Server::start(bin, &provider.issuer).await?;
    let url: Arc<str> = server.url.clone().into();
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    for p in 0..o.load_principals {
        let sub = format!("bench-user-{p}");
        let token: Arc<str> = provider
            .mint(&server.url, &sub, "kernel-mcp:read kernel-mcp:execute")
            .await?
            .into();
        for s in 0..o.load_sessions {
            let (tag, name) = (format!("p{p}s{s}"), format!("s{s}"));
            runs.spawn(session_run(
                http.clone(),
                url.clone(),
                token.clone(),
                tag,
                name,
                o.load_per,
            ));
        }
    }
    let mut execute_ms = Vec::new();
    while let Some(done) = runs.join_next().await {
        execute_ms.extend(done??);
    }
    let wall_s = t0.elapsed().as_secs_f64();
    drop(server);
    eprintln!(
        "bench: OAuth load {}×{}×{}: done, no cross-talk",
        o.load_principals, o.load_sessions, o.load_per
    );
    Ok(Some(Figures {
        principals: o.load_principals,
        sessions: o.load_sessions,
        per: o.load_per,
        execute_ms,
        wall_s,
    }))
}
