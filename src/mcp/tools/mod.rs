//! The tools: one file per tool or small family, each holding the tool's parameter type, its
//! result type (which renders itself, see [`out`]) and its handler, a method of
//! [`KernelMcp`] in a `#[tool_router]` block of its own; and below, the one table that says,
//! per tool, what it does to the world (its hint annotations) and which tool sets offer it
//! (see [`table`] and `toolset.rs`).
//!
//! A handler takes its [`Caller`](crate::mcp::caller::Caller) (who asks, and so which
//! sessions and runs it sees), its `Parameters<P>`, and the request's context when it waits
//! or reports progress; it returns `Result<Json<T>, ToolError>`. It writes no schema and no
//! rendering of its own: the output schema comes from `T`, the text from `T`'s [`out::Output`]
//! impl, the annotations from its row here.
//!
//! Adding a tool: write its file (or add it to a family's), add its `mod` line and router
//! below and its row to [`TOOLS`], and document it in docs/tools.md (a test checks the
//! doc against `tools/list`).

use rmcp::handler::server::tool::ToolRouter;

use crate::mcp::KernelMcp;
use table::NamedSet::{
    Artifacts, Checkpoints, Completion, Environments, History, Notebook, Service,
};
use table::{Effect::*, Row, World::*};

pub(crate) mod args;
pub(crate) mod out;
pub(crate) mod table;

mod artifacts;
mod checkpoints;

pub(crate) use artifacts::encode as artifact_encode;
mod completion;
mod create;
mod environments;
mod execute;
mod export;
mod follow;
mod forward;
mod fresh;
mod history;
mod interrupt;
mod kernels;
pub(crate) mod notebook_batch;
mod notebook_open;
mod notebook_view;
mod notebooks;
mod packages;
mod runs;
mod service;
mod sessions;

/// Every tool: its set and hints. The `default` tools come first, in the order the MCP
/// bundle's manifest lists them (`DEFAULT_TOOLS`); `.minimal()` and `.code()` put a tool in
/// the terse bases too.
pub(crate) const TOOLS: [Row; 42] = [
    Row::everyday("list_kernels", ReadOnly, Closed),
    Row::everyday("create_session", Adds, Open).minimal(),
    Row::everyday("fork_session", Adds, Closed),
    Row::everyday("list_sessions", ReadOnly, Closed).minimal(),
    Row::everyday("get_session", ReadOnly, Closed),
    Row::everyday("interrupt_session", AddsIdempotent, Closed).code(),
    Row::everyday("restart_session", Destroys, Closed).minimal(),
    Row::everyday("destroy_session", Destroys, Closed),
    Row::everyday("server_info", ReadOnly, Closed),
    Row::everyday("execute", Destroys, Open).code(),
    Row::everyday("execute_file", Destroys, Open),
    Row::everyday("get_execution", ReadOnly, Closed).code(),
    Row::everyday("send_input", Adds, Closed).code(),
    Row::everyday("cancel_execution", DestroysIdempotent, Closed),
    Row::everyday("get_history", ReadOnly, Closed),
    Row::everyday("export_history", DestroysIdempotent, Closed),
    Row::everyday("install_packages", Destroys, Open),
    Row::of(
        Environments,
        "register_environment",
        DestroysIdempotent,
        Closed,
    ),
    Row::of(Environments, "list_environments", ReadOnly, Closed),
    Row::of(Environments, "get_environment", ReadOnly, Closed),
    Row::of(Environments, "validate_environment", AddsIdempotent, Closed),
    Row::of(Environments, "remove_environment", Destroys, Closed),
    Row::of(
        Checkpoints,
        "checkpoint_session",
        DestroysIdempotent,
        Closed,
    ),
    Row::of(Checkpoints, "restore_session", DestroysIdempotent, Closed),
    Row::of(Service, "renew_session", AddsIdempotent, Closed),
    Row::of(Service, "clear_queue", DestroysIdempotent, Closed),
    Row::of(Completion, "complete", ReadOnly, Closed),
    Row::of(Completion, "is_complete", ReadOnly, Closed),
    Row::of(Completion, "inspect", ReadOnly, Closed),
    Row::of(History, "delete_history", Destroys, Closed),
    Row::of(History, "rerun_history", Destroys, Open),
    Row::of(Notebook, "mirror_notebook", DestroysIdempotent, Closed),
    Row::of(Notebook, "open_notebook", Adds, Open),
    Row::of(Notebook, "read_cells", ReadOnly, Closed),
    Row::of(Notebook, "edit_cells", Destroys, Closed),
    Row::of(Notebook, "execute_cells", Destroys, Open),
    Row::of(Notebook, "close_notebook", AddsIdempotent, Closed),
    Row::of(Artifacts, "list_artifacts", ReadOnly, Closed),
    Row::of(Artifacts, "read_artifact", ReadOnly, Closed),
    Row::of(Artifacts, "save_artifact", DestroysIdempotent, Closed),
    Row::of(Artifacts, "forward_artifact", Destroys, Open),
    Row::of(Artifacts, "delete_artifact", Destroys, Closed),
];

/// The router of every tool, declared from the table (annotations, compact output schemas),
/// before a toolset cuts it down.
pub(crate) fn every_tool() -> ToolRouter<KernelMcp> {
    let mut router = KernelMcp::kernels_router()
        + KernelMcp::create_router()
        + KernelMcp::sessions_router()
        + KernelMcp::interrupt_router()
        + KernelMcp::execute_router()
        + KernelMcp::runs_router()
        + KernelMcp::history_router()
        + KernelMcp::export_router()
        + KernelMcp::packages_router()
        + KernelMcp::completion_router()
        + KernelMcp::checkpoints_router()
        + KernelMcp::environments_router()
        + KernelMcp::service_router()
        + KernelMcp::notebooks_router()
        + KernelMcp::artifacts_router();
    table::declare(&mut router);
    router
}

#[cfg(test)]
mod tests {
    use super::table::Home;
    use super::*;

    #[test]
    fn every_tool_has_a_row_and_every_row_a_tool() {
        let tools = every_tool().list_all();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let mut rows: Vec<&str> = TOOLS.iter().map(|r| r.name).collect();
        names.sort();
        rows.sort();
        assert_eq!(names, rows, "each tool needs exactly one row in TOOLS");
    }

    #[test]
    fn every_tool_is_in_the_default_set_or_a_named_set() {
        use crate::mcp::toolset::{DEFAULT_TOOLS, NamedSet};
        for tool in every_tool().list_all() {
            let name = tool.name.as_ref();
            let places = usize::from(DEFAULT_TOOLS.contains(&name))
                + NamedSet::ALL
                    .iter()
                    .filter(|s| s.tools().contains(&name))
                    .count();
            assert_eq!(places, 1, "{name} must be in exactly one set");
        }
    }

    #[test]
    fn the_set_lists_name_only_tools_that_exist() {
        use crate::mcp::toolset::{CODE_TOOLS, DEFAULT_TOOLS, MINIMAL_TOOLS, NamedSet};
        let names: Vec<String> = every_tool()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        let named: Vec<&str> = NamedSet::ALL.iter().flat_map(|s| s.tools()).collect();
        let listed = DEFAULT_TOOLS
            .iter()
            .chain(MINIMAL_TOOLS.iter())
            .chain(CODE_TOOLS.iter())
            .chain(named.iter());
        for t in listed {
            assert!(names.iter().any(|n| n == t), "{t} is listed but is no tool");
        }
    }

    #[test]
    fn every_tool_declares_its_output_and_its_hints_from_the_table() {
        for tool in every_tool().list_all() {
            let row = table::row(&tool.name).expect("a row");
            let schema = tool.output_schema.as_ref().unwrap_or_else(|| {
                panic!("{} declares no output schema: return Json<T>", tool.name)
            });
            let alternatives = schema["anyOf"].as_array().expect("compacted");
            assert_eq!(
                alternatives.last(),
                Some(&serde_json::json!({"required": ["error_code", "message"]})),
                "{}",
                tool.name
            );
            let hints = tool.annotations.as_ref().expect("annotations");
            let read_only = row.effect == ReadOnly;
            assert_eq!(
                hints.read_only_hint,
                read_only.then_some(true),
                "{}",
                tool.name
            );
            assert_eq!(
                hints.destructive_hint.is_some(),
                !read_only,
                "{}",
                tool.name
            );
            assert!(hints.open_world_hint.is_some(), "{}", tool.name);
        }
    }

    #[test]
    fn the_hints_say_what_the_design_says() {
        let hint = |name: &str| table::row(name).expect(name).annotations();
        for name in [
            "list_kernels",
            "list_sessions",
            "get_session",
            "get_execution",
            "get_history",
            "server_info",
            "complete",
            "inspect",
        ] {
            assert_eq!(hint(name).read_only_hint, Some(true), "{name}");
        }
        // Destructive: what loses state, and every tool that writes a file the model names.
        for name in [
            "destroy_session",
            "delete_history",
            "restart_session",
            "export_history",
            "checkpoint_session",
            "mirror_notebook",
        ] {
            let h = hint(name);
            assert_eq!(
                (h.read_only_hint, h.destructive_hint),
                (None, Some(true)),
                "{name}"
            );
        }
    }

    #[test]
    fn every_named_set_has_a_tool_but_fresh_which_is_a_parameter() {
        for set in crate::mcp::NamedSet::ALL {
            let has = TOOLS.iter().any(|r| r.home == Home::Set(set));
            assert_eq!(has, set != crate::mcp::NamedSet::Fresh, "{}", set.name());
        }
    }
}
