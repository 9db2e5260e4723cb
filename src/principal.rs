//! Who is calling, and how far they may go: plain values that every face decides once per
//! request and every layer above may read (docs/auth.md).
//!
//! - A [`Principal`] is the caller: the [owner](Principal::Owner) of this process or service
//!   (the stdio client, a socket peer with our uid, a holder of the static token: today's
//!   single user), [another local user](Principal::LocalUser) known by the uid of a socket
//!   peer (`SO_PEERCRED`), or [the subject of an OAuth access token](Principal::OAuth) (`iss` +
//!   `sub`, with a name to show).
//! - [`Principal::id`] is its stable string: `owner`, `uid:1001`, `oauth:<iss>#<sub>`. Short,
//!   free of secrets and control characters, the same for every request of that caller: fit
//!   for log lines, ownership records and `KERNEL_USERNAME`.
//! - [`Access`] is how far a request may go: `read` < `execute` < `admin`, each including the
//!   ones before it.
//! - [`Authenticated`] is both, as a face hands it to what serves the request.
//!
//! Nothing here checks a credential: that is `auth`'s business, under the faces.

use std::fmt;
use std::sync::Arc;

/// Longest `iss` or `sub` kept in a principal, in bytes; a token with a longer one is refused
/// by the face before a principal is made.
pub const MAX_CLAIM_LEN: usize = 512;

/// Who is calling. Cheap to clone (shared strings). Two principals are equal when their
/// [`id`](Principal::id)s are: an OAuth subject's name may change between its tokens.
#[derive(Clone)]
pub enum Principal {
    /// The user this process runs as, and whoever proves to be them: the stdio client, a socket
    /// peer with our uid, a holder of the static token.
    Owner,
    /// Another local user, known by the uid of a socket peer.
    LocalUser { uid: u32 },
    /// The subject of an OAuth access token: `iss` and `sub` as the token has them, and the
    /// name it gives (`preferred_username`, else `email`, else `sub`).
    OAuth {
        issuer: Arc<str>,
        subject: Arc<str>,
        name: Arc<str>,
    },
}

impl Principal {
    /// The subject `sub` of issuer `iss`, shown as `name` (the token's `preferred_username` or
    /// `email`; `sub` when it has neither). Control characters in any of them are replaced
    /// with `?`, so the id and name are safe to log.
    pub fn oauth(issuer: &str, subject: &str, name: Option<&str>) -> Principal {
        let name = name.filter(|n| !n.trim().is_empty()).unwrap_or(subject);
        Principal::OAuth {
            issuer: printable(issuer),
            subject: printable(subject),
            name: printable(name),
        }
    }

    /// The stable string id: `owner`, `uid:<n>`, or `oauth:<iss>#<sub>`.
    pub fn id(&self) -> String {
        match self {
            Principal::Owner => "owner".to_string(),
            Principal::LocalUser { uid } => format!("uid:{uid}"),
            Principal::OAuth {
                issuer, subject, ..
            } => format!("oauth:{issuer}#{subject}"),
        }
    }

    /// The name to show a person: `owner`, `uid:<n>`, or the token's user name.
    pub fn name(&self) -> String {
        match self {
            Principal::OAuth { name, .. } => name.to_string(),
            other => other.id(),
        }
    }

    /// Whether this is the owner of the process (today's single user).
    pub fn is_owner(&self) -> bool {
        matches!(self, Principal::Owner)
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        match (self, other) {
            (Principal::Owner, Principal::Owner) => true,
            (Principal::LocalUser { uid: a }, Principal::LocalUser { uid: b }) => a == b,
            (
                Principal::OAuth {
                    issuer: i1,
                    subject: s1,
                    ..
                },
                Principal::OAuth {
                    issuer: i2,
                    subject: s2,
                    ..
                },
            ) => i1 == i2 && s1 == s2,
            _ => false,
        }
    }
}

impl Eq for Principal {}

impl std::hash::Hash for Principal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal({})", self.id())
    }
}

/// `s` with every control character replaced by `?`, cut to [`MAX_CLAIM_LEN`] bytes.
fn printable(s: &str) -> Arc<str> {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if out.len() > MAX_CLAIM_LEN {
        let mut end = MAX_CLAIM_LEN;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    Arc::from(out)
}

/// How far a request may go. Ordered: each level includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// List and read: sessions, history, runs, resources, tasks.
    Read,
    /// Also run code, and create, change or destroy sessions.
    Execute,
    /// Also see and act on every principal's sessions.
    Admin,
}

impl Access {
    /// `read`, `execute` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Execute => "execute",
            Access::Admin => "admin",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a request comes from and how far it may go, as the face decided it. A face puts one
/// in each request it serves (HTTP: the request's extensions; the socket and stdio: each
/// message's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub principal: Principal,
    pub access: Access,
}

impl Authenticated {
    /// The owner with every access: the stdio client, a same-uid socket peer, the static
    /// token, a loopback HTTP face without a token.
    pub fn owner() -> Authenticated {
        Authenticated {
            principal: Principal::Owner,
            access: Access::Admin,
        }
    }

    /// Whether this caller may do what needs `need`.
    pub fn allows(&self, need: Access) -> bool {
        self.access >= need
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_short_and_printable() {
        assert_eq!(Principal::Owner.id(), "owner");
        assert_eq!(Principal::LocalUser { uid: 1001 }.id(), "uid:1001");
        let p = Principal::oauth("https://id.example", "u-1", Some("alice"));
        assert_eq!(p.id(), "oauth:https://id.example#u-1");
        assert_eq!(p.name(), "alice");
        assert_eq!(p, Principal::oauth("https://id.example", "u-1", Some("al")));
        assert_ne!(p, Principal::oauth("https://other.example", "u-1", None));
        let odd = Principal::oauth("i", "a\nb\u{7}", Some(" "));
        assert_eq!(odd.id(), "oauth:i#a?b?");
        assert_eq!(odd.name(), "a?b?", "a blank name falls back to sub");
        let long = Principal::oauth("i", &"é".repeat(MAX_CLAIM_LEN), None);
        assert!(long.id().len() <= MAX_CLAIM_LEN + 8, "{}", long.id().len());
    }

    #[test]
    fn access_levels_include_the_ones_below() {
        assert!(Access::Read < Access::Execute && Access::Execute < Access::Admin);
        let reader = Authenticated {
            principal: Principal::Owner,
            access: Access::Read,
        };
        assert!(reader.allows(Access::Read) && !reader.allows(Access::Execute));
        assert!(Authenticated::owner().allows(Access::Admin));
        assert_eq!(Access::Execute.to_string(), "execute");
    }
}
