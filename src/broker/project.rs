//! A project: one registry (same path, same content) and its downstream servers, shared by
//! every session attached to it. It lives as long as one of its sessions' endpoints holds
//! it; when the last one lets go, its servers are stopped.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::config::McpRegistry;
use super::downstream::{Downstream, State};
use super::redact::Redactor;

/// A registry and its servers.
pub struct Project {
    pub registry: McpRegistry,
    /// One per entry that resolved (none when the registry is invalid).
    pub downstreams: BTreeMap<String, Arc<Downstream>>,
    pub redactor: Redactor,
    runtime: tokio::runtime::Handle,
}

impl Project {
    pub fn new(registry: McpRegistry, runtime: tokio::runtime::Handle) -> Project {
        let redactor = Redactor::new(registry.secrets.clone());
        let downstreams = if registry.is_valid() {
            registry
                .entries
                .values()
                .filter_map(|e| {
                    let t = e.transport.clone()?;
                    Some((
                        e.name.clone(),
                        Arc::new(Downstream::new(e.name.clone(), t, redactor.clone())),
                    ))
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        Project {
            registry,
            downstreams,
            redactor,
            runtime,
        }
    }

    /// Stop the servers that were started.
    pub async fn stop(&self) {
        let started = self
            .downstreams
            .values()
            .filter(|d| d.state() != State::NotStarted);
        futures::future::join_all(started.map(|d| d.stop())).await;
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let started: Vec<Arc<Downstream>> = self
            .downstreams
            .values()
            .filter(|d| !matches!(d.state(), State::NotStarted | State::Stopped))
            .cloned()
            .collect();
        if started.is_empty() {
            return;
        }
        tracing::info!(
            registry = %self.registry.path.display(),
            "the project's last session ended; stopping its {} MCP servers",
            started.len()
        );
        self.runtime.spawn(async move {
            futures::future::join_all(started.iter().map(|d| d.stop())).await;
        });
    }
}
