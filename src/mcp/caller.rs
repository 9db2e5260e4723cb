//! Who makes a request: the [`Caller`] travels with each request, not with the handler.
//! `KernelMcp` builds one per request (in `server/mod.rs`, `KernelMcp::caller`, the one place
//! that decides who asks) and puts it in the request's extensions; a tool takes it as an
//! argument (the [`FromContextPart`] extractor below), and `tasks/*`, `resources/read` and
//! `logging/setLevel` get it the same way. Everything a tool reaches goes through its
//! caller's [`Scope`]: which sessions and runs it sees, and which `default` is its own.

use rmcp::ErrorData;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;

use crate::config::Limits;
use crate::registry::Registry;
use crate::registry::scope::Scope;
use crate::session::{SessionError, SessionHandle};

/// The caller of one request: the registry as it may see it.
#[derive(Clone)]
pub struct Caller {
    /// The caller's view of the registry; every key a tool passes the registry comes from it.
    pub scope: Scope,
}

impl Caller {
    /// A caller who sees the registry through `scope`.
    pub fn new(scope: Scope) -> Caller {
        Caller { scope }
    }

    /// The registry (limits, kernel sources); sessions are reached with the scope's keys.
    pub fn registry(&self) -> &Registry {
        self.scope.registry()
    }

    /// The server's limits.
    pub fn limits(&self) -> &Limits {
        self.registry().limits()
    }

    /// The session `id` names for this caller (`default`: its own).
    /// Errors: `SESSION_NOT_FOUND`, `SESSION_EXPIRED`.
    pub fn session(&self, id: &str) -> Result<SessionHandle, SessionError> {
        self.registry().get(&self.scope.key(id))
    }
}

/// A tool's `caller: Caller` argument: the caller `call_tool` put in the request's
/// extensions. Its absence is a server bug, answered as an internal error.
impl<S> FromContextPart<ToolCallContext<'_, S>> for Caller {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, ErrorData> {
        context
            .request_context
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))
    }
}
