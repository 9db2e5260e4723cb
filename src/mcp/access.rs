//! What access each MCP call needs (DESIGN §19): the one place that rates methods and tools
//! for the HTTP faces' OAuth scopes ([`crate::auth::need`] reads the JSON-RPC body and asks
//! [`need`]).
//!
//! `read`: discovery and listing (`initialize`, `ping`, `server/discover`, `tools/list`,
//! `prompts/*`, `completion/complete`, `logging/setLevel`), resources, `tasks/get|list|result`,
//! notifications, and the tools in [`READ_ONLY_TOOLS`]. `execute`: every other tool, and
//! `tasks/cancel` (it interrupts a run). A method not named here needs `execute`.

use crate::principal::Access;

/// The tools a `read` scope may call: they list and read, and change nothing.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "list_sessions",
    "get_session",
    "list_kernels",
    "server_info",
    "get_history",
    "get_execution",
    "list_environments",
    "get_environment",
];

/// Whether `tool` needs only `read`.
pub fn read_only_tool(tool: &str) -> bool {
    READ_ONLY_TOOLS.contains(&tool)
}

/// What the JSON-RPC `method` needs; `tool` is `params.name` (for `tools/call`, the tool).
pub fn need(method: &str, tool: Option<&str>) -> Access {
    match method {
        "tools/call" => match tool {
            Some(t) if read_only_tool(t) => Access::Read,
            _ => Access::Execute,
        },
        "initialize"
        | "ping"
        | "server/discover"
        | "tools/list"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete"
        | "logging/setLevel"
        | "resources/list"
        | "resources/templates/list"
        | "resources/read"
        | "resources/subscribe"
        | "resources/unsubscribe"
        | "tasks/get"
        | "tasks/list"
        | "tasks/result" => Access::Read,
        m if m.starts_with("notifications/") => Access::Read,
        _ => Access::Execute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_needs_read_and_running_or_changing_needs_execute() {
        assert_eq!(need("tools/list", None), Access::Read);
        assert_eq!(need("tools/call", Some("get_execution")), Access::Read);
        assert_eq!(need("tools/call", Some("execute")), Access::Execute);
        assert_eq!(need("tools/call", Some("destroy_session")), Access::Execute);
        assert_eq!(need("tools/call", None), Access::Execute);
        assert_eq!(need("resources/read", None), Access::Read);
        assert_eq!(need("tasks/cancel", None), Access::Execute);
        assert_eq!(need("notifications/initialized", None), Access::Read);
        assert_eq!(need("something/new", None), Access::Execute);
    }

    #[test]
    fn every_read_only_tool_exists_and_is_annotated_read_only() {
        let router = super::super::KernelMcp::every_tool();
        for name in READ_ONLY_TOOLS {
            let tool = router
                .get(name)
                .unwrap_or_else(|| panic!("{name} is not a tool"));
            let read_only = tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false);
            assert!(read_only, "{name} is not annotated read-only");
        }
    }
}
