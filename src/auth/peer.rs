//! The socket face's authentication: a Unix socket peer is who the kernel says it is
//! (`SO_PEERCRED`). A peer with our uid is the owner with every access; a peer whose uid the
//! service was told to admit (`service --allow-uid`) is that
//! [`Principal::LocalUser`](crate::principal::Principal::LocalUser), with the execute access
//! (its own sessions); any other peer is refused.

use crate::principal::{Access, Authenticated, Principal};

/// Why a socket peer is refused. The messages are sent to the peer as they are.
#[derive(Debug, thiserror::Error)]
pub enum PeerRefusal {
    #[error(
        "refused: this kernel-mcp service belongs to uid {ours}, and the peer runs as uid {peer}"
    )]
    OtherUser { ours: u32, peer: u32 },
    #[error("refused: the peer's credentials are unknown ({0})")]
    Unknown(#[source] std::io::Error),
}

/// Who the peer with credentials `cred` is, for a service running as uid `ours`.
/// Errors: [`PeerRefusal`].
pub fn authenticate_peer(
    cred: std::io::Result<tokio::net::unix::UCred>,
    ours: u32,
    allowed: &[u32],
) -> Result<Authenticated, PeerRefusal> {
    match cred {
        Ok(c) if c.uid() == ours => Ok(Authenticated::owner()),
        Ok(c) if allowed.contains(&c.uid()) => Ok(Authenticated {
            principal: Principal::LocalUser { uid: c.uid() },
            access: Access::Execute,
        }),
        Ok(c) => Err(PeerRefusal::OtherUser {
            ours,
            peer: c.uid(),
        }),
        Err(e) => Err(PeerRefusal::Unknown(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_with_our_uid_is_the_owner_and_another_is_refused_saying_both_uids() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let ours = nix::unistd::getuid().as_raw();
        let who = authenticate_peer(a.peer_cred(), ours, &[]).unwrap();
        assert_eq!(who, Authenticated::owner());
        let admitted = authenticate_peer(a.peer_cred(), ours + 1, &[ours]).unwrap();
        assert_eq!(admitted.principal, Principal::LocalUser { uid: ours });
        assert_eq!(admitted.access, Access::Execute);
        let e = authenticate_peer(a.peer_cred(), ours + 1, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("uid {}", ours + 1)) && e.contains(&format!("uid {ours}")),
            "{e}"
        );
    }
}
