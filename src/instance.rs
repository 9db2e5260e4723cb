//! This server process's identity: a random id made once per process and the time it
//! started. `server_info` and every SessionInfo carry both, so a client can tell a new server
//! lifetime (all sessions gone) from the one it talked to before.

use std::sync::LazyLock;

/// The process's identity, made on first use (the registry touches it at start-up).
#[derive(Debug, Clone)]
pub struct Instance {
    /// A fresh random id (32 hex digits) per server process.
    pub id: String,
    /// RFC 3339, UTC, milliseconds.
    pub started_at: String,
}

static INSTANCE: LazyLock<Instance> = LazyLock::new(|| Instance {
    id: uuid::Uuid::new_v4().simple().to_string(),
    started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
});

/// This process's identity.
pub fn current() -> &'static Instance {
    &INSTANCE
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_instance_is_made_once_per_process() {
        let a = super::current();
        let b = super::current();
        assert_eq!(a.id, b.id);
        assert_eq!(a.id.len(), 32);
        assert!(chrono::DateTime::parse_from_rfc3339(&a.started_at).is_ok());
    }
}
