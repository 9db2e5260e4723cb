//! What access each MCP call needs (docs/auth.md, "Scopes"): the one place that rates methods
//! and tools for the HTTP faces' OAuth scopes ([`crate::auth::need`] reads the JSON-RPC body
//! and asks [`need`]).
//!
//! `read`: discovery and listing (`initialize`, `ping`, `server/discover`, `tools/list`,
//! `prompts/*`, `completion/complete`, `logging/setLevel`), resources, `tasks/get|list|result`,
//! notifications, and the tools [`read_only_tool`] names. `execute`: every other tool, and
//! `tasks/cancel` (it interrupts a run). A method not named here needs `execute`.

use crate::principal::Access;

/// Tools annotated read-only that still ask the kernel to work for the caller (a completion
/// or an inspection can run code in some kernels): they need `execute`.
const ASKS_THE_KERNEL: &[&str] = &["complete", "is_complete", "inspect"];

/// Whether `tool` needs only `read`: its row in the tool table says it reads only (and it
/// does not ask the kernel), or it is the view's own reader of a finished run.
pub fn read_only_tool(tool: &str) -> bool {
    if tool == super::ui::VIEW_RUN {
        return true;
    }
    super::tools::table::row(tool)
        .is_some_and(|r| r.effect == super::tools::table::Effect::ReadOnly)
        && !ASKS_THE_KERNEL.contains(&tool)
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
    fn read_only_tools_need_read_and_kernel_requests_need_execute() {
        for t in [
            "list_sessions",
            "get_execution",
            "get_history",
            "server_info",
            "view_run",
        ] {
            assert!(read_only_tool(t), "{t}");
        }
        for t in [
            "execute",
            "complete",
            "inspect",
            "export_history",
            "no_such_tool",
        ] {
            assert!(!read_only_tool(t), "{t}");
        }
    }
}
