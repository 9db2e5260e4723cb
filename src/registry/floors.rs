//! Floors: the least confinement every session gets — the sandbox (`--sandbox`,
//! `--sandbox-network`) and the memory ceiling (`--max-memory-mib`) — and how the floors of
//! a server and of one of its clients combine (docs/sandbox.md, "Floors in shared mode").
//!
//! The per-user service is started by whichever client comes first, with that client's
//! flags. A later relay (`kernel-mcp --shared --sandbox workspace`) or CLI client that asks
//! for more says so in its hello (`service::listener`), and every session *its connection*
//! creates gets the stricter of the two ([`Floors::stricter`]); nor may that connection use a
//! session below its sandbox floor. Never silently less.

use serde::{Deserialize, Serialize};

use super::Registry;
use super::scope::key::{ConnectionId, Viewer};
use crate::kernel::Sandbox;

/// The least every session gets.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Floors {
    /// The sandbox every session gets at least.
    pub sandbox: Sandbox,
    /// The memory ceiling per session (MiB; 0: none).
    pub max_memory_mib: u64,
}

impl Floors {
    /// Whichever of `self` and `other` confines more, field by field: the stricter sandbox
    /// policy (the network allowed only when every restricting floor allows it) and the
    /// lower memory ceiling (0, none, is the highest).
    pub fn stricter(self, other: Floors) -> Floors {
        let (a, b) = (self.sandbox, other.sandbox);
        let policy = if a.policy.strictness() >= b.policy.strictness() {
            a.policy
        } else {
            b.policy
        };
        let allows = |s: Sandbox| !s.restricts() || s.network;
        let sandbox = Sandbox {
            policy,
            network: policy.restricts() && allows(a) && allows(b),
        };
        let max_memory_mib = match (self.max_memory_mib, other.max_memory_mib) {
            (0, m) | (m, 0) => m,
            (x, y) => x.min(y),
        };
        Floors {
            sandbox,
            max_memory_mib,
        }
    }

    /// True when `self` confines at least as much as `asked`.
    pub fn satisfies(&self, asked: &Floors) -> bool {
        self.stricter(*asked) == *self
    }

    /// "sandbox workspace, memory ceiling 512 MiB", for messages.
    pub fn describe(&self) -> String {
        let memory = match self.max_memory_mib {
            0 => "no memory ceiling".to_string(),
            m => format!("memory ceiling {m} MiB"),
        };
        format!("sandbox {}, {memory}", self.sandbox)
    }
}

impl Registry {
    /// The server's own floors (`--sandbox`, `--sandbox-network`, `--max-memory-mib`).
    pub fn server_floors(&self) -> Floors {
        Floors {
            sandbox: self.sources.sandbox,
            max_memory_mib: self.limits.max_memory_mib,
        }
    }

    /// The floors in force for `viewer`'s sessions: the server's, made stricter by what its
    /// connection's client asked for.
    pub fn floors(&self, viewer: &Viewer) -> Floors {
        let server = self.server_floors();
        match viewer.connection().and_then(|c| self.client_floor(c)) {
            Some(client) => server.stricter(client),
            None => server,
        }
    }

    /// What the client of connection `conn` asked for, if anything.
    pub(super) fn client_floor(&self, conn: ConnectionId) -> Option<Floors> {
        super::lock(&self.client_floors).get(&conn).copied()
    }

    /// Connection `conn`'s client asks for `asked` (its hello): every session the
    /// connection creates gets at least that, and it may use no session sandboxed less.
    /// Returns the floors now in force for it.
    pub fn set_client_floors(&self, conn: ConnectionId, asked: Floors) -> Floors {
        super::lock(&self.client_floors).insert(conn, asked);
        self.server_floors().stricter(asked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::SandboxPolicy as P;

    fn f(policy: P, network: bool, mib: u64) -> Floors {
        Floors {
            sandbox: Sandbox { policy, network },
            max_memory_mib: mib,
        }
    }

    #[test]
    fn the_stricter_floor_wins_field_by_field() {
        let server = f(P::None, false, 4096);
        let relay = f(P::Workspace, false, 512);
        assert_eq!(server.stricter(relay), relay);
        assert_eq!(relay.stricter(server), relay);
        assert_eq!(
            f(P::ReadOnly, true, 0).stricter(f(P::Workspace, false, 0)),
            f(P::ReadOnly, false, 0),
            "no network unless every sandbox allows it"
        );
        assert_eq!(
            f(P::Workspace, true, 0).stricter(f(P::None, false, 64)),
            f(P::Workspace, true, 64)
        );
        assert!(relay.stricter(server).satisfies(&relay));
        assert!(!server.satisfies(&relay));
        assert!(relay.satisfies(&Floors::default()));
    }
}
