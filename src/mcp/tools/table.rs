//! The shape of the table of tools (its rows are in `tools/mod.rs`): one [`Row`] per tool
//! gives what the tool does to the world (its MCP hint annotations) and where it is offered
//! (the `default` set or one named set, and the terse bases `minimal` and `code`). From the
//! rows come the annotations of every tool ([`declare`]), the tool lists of `--tools` (the
//! `const` lists below, which `toolset.rs` exports) and what a [`Toolset`] offers.
//!
//! The hints follow one rule (docs/tools.md; MCP `ToolAnnotations`): a read-only tool says
//! `readOnlyHint: true` (its destructive and idempotent hints mean nothing, per the spec); any
//! other tool says `destructiveHint` either way, and `idempotentHint: true` when it is (false
//! is the spec's default); every tool says `openWorldHint` either way. A tool that writes a
//! file the model names may overwrite one: it is destructive.

use std::sync::Arc;

use rmcp::handler::server::tool::ToolRouter;
use rmcp::model::ToolAnnotations;

use crate::mcp::{KernelMcp, schema};

/// A set of tools that can be added to a base (`--tools default,NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedSet {
    /// Registered Python environments: the five `*_environment(s)` tools and
    /// `create_session(environment=…)`.
    Environments,
    /// `checkpoint_session` and `restore_session`.
    Checkpoints,
    /// The shared service's session housekeeping: `renew_session`, `clear_queue`.
    Service,
    /// Fresh runs: `execute_file(mode="fresh")`.
    Fresh,
    /// Editor help from the kernel: `complete`, `is_complete`, `inspect`.
    Completion,
    /// Editing history: `delete_history`, `rerun_history` (`get_history` and `export_history`
    /// are in `default`).
    History,
    /// Live notebooks: `mirror_notebook` (`create_session(notebook=…)` is in `default`).
    Notebook,
    /// Artifacts kept by reference: `list_artifacts`, `read_artifact`, `save_artifact`,
    /// `forward_artifact`, `delete_artifact` (the `artifact` of a cut result, and the
    /// `kernel-mcp://artifacts/{id}` resources, come whatever the set).
    Artifacts,
}

impl NamedSet {
    /// Every named set, in the order docs/tools.md lists them.
    pub const ALL: [NamedSet; 8] = [
        NamedSet::Environments,
        NamedSet::Checkpoints,
        NamedSet::Service,
        NamedSet::Fresh,
        NamedSet::Completion,
        NamedSet::History,
        NamedSet::Notebook,
        NamedSet::Artifacts,
    ];

    /// The name `--tools` takes.
    pub fn name(self) -> &'static str {
        match self {
            NamedSet::Environments => "environments",
            NamedSet::Checkpoints => "checkpoints",
            NamedSet::Service => "service",
            NamedSet::Fresh => "fresh",
            NamedSet::Completion => "completion",
            NamedSet::History => "history",
            NamedSet::Notebook => "notebook",
            NamedSet::Artifacts => "artifacts",
        }
    }

    /// The tools this set adds, in table order (see `tools/mod.rs`).
    pub fn tools(self) -> Vec<&'static str> {
        super::TOOLS
            .iter()
            .filter(|r| r.home == Home::Set(self))
            .map(|r| r.name)
            .collect()
    }

    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// What a tool does to the state it touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    ReadOnly,
    /// Adds or changes state without losing any.
    Adds,
    /// As [`Effect::Adds`], and calling it again with the same arguments changes nothing more.
    AddsIdempotent,
    /// May lose state: variables, runs, history, a file it overwrites.
    Destroys,
    /// As [`Effect::Destroys`], and calling it again changes nothing more.
    DestroysIdempotent,
}

/// Whether a tool reaches past kernel-mcp's sessions and files (running the model's code,
/// installing packages, starting kernels on gateways): `openWorldHint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Closed,
    Open,
}

/// The set a tool belongs to: `default` (the everyday tools) or one named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    Default,
    Set(NamedSet),
}

/// One tool: its name, its set, whether the terse bases offer it, and its hints.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub name: &'static str,
    pub home: Home,
    /// In `--tools minimal`.
    pub minimal: bool,
    /// In `--tools code`.
    pub code: bool,
    pub effect: Effect,
    pub world: World,
}

impl Row {
    /// A tool of the `default` set.
    pub const fn everyday(name: &'static str, effect: Effect, world: World) -> Row {
        Row {
            name,
            home: Home::Default,
            minimal: false,
            code: false,
            effect,
            world,
        }
    }

    /// A tool of named set `set`.
    pub const fn of(set: NamedSet, name: &'static str, effect: Effect, world: World) -> Row {
        Row {
            home: Home::Set(set),
            ..Row::everyday(name, effect, world)
        }
    }

    /// Also in `--tools minimal`.
    pub const fn minimal(self) -> Row {
        Row {
            minimal: true,
            ..self
        }
    }

    /// Also in `--tools code` (and `minimal`).
    pub const fn code(self) -> Row {
        Row {
            code: true,
            minimal: true,
            ..self
        }
    }

    /// The tool's annotations on the wire (see the module docs for the rule).
    pub fn annotations(&self) -> ToolAnnotations {
        use Effect as E;
        let open = Some(self.world == World::Open);
        let (read_only, destructive, idempotent) = match self.effect {
            E::ReadOnly => (Some(true), None, None),
            E::Adds => (None, Some(false), None),
            E::AddsIdempotent => (None, Some(false), Some(true)),
            E::Destroys => (None, Some(true), None),
            E::DestroysIdempotent => (None, Some(true), Some(true)),
        };
        ToolAnnotations::from_raw(None, read_only, destructive, idempotent, open)
    }
}

/// Which tools a tool list takes.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    Default,
    Minimal,
    Code,
}

impl Pick {
    const fn takes(self, row: &Row) -> bool {
        match self {
            Pick::Default => matches!(row.home, Home::Default),
            Pick::Minimal => row.minimal,
            Pick::Code => row.code,
        }
    }
}

/// How many of `rows` `pick` takes (the length of [`names`]' list).
pub const fn count(rows: &[Row], pick: Pick) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < rows.len() {
        if pick.takes(&rows[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The names of the `N` rows `pick` takes, in table order (`N` from [`count`]).
pub const fn names<const N: usize>(rows: &[Row], pick: Pick) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < rows.len() {
        if pick.takes(&rows[i]) {
            out[n] = rows[i].name;
            n += 1;
        }
        i += 1;
    }
    out
}

/// The row of `tool`.
pub fn row(tool: &str) -> Option<&'static Row> {
    super::TOOLS.iter().find(|r| r.name == tool)
}

/// Give every tool of `router` its annotations from the table, and compact its output
/// schema (the serialize-form schema rmcp's macro derived from the handler's `Json<T>`, see
/// `schema.rs`). A tool without a row gets no annotations (a unit test fails for it).
pub fn declare(router: &mut ToolRouter<KernelMcp>) {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        tool.annotations = row(&tool.name).map(Row::annotations);
        tool.output_schema = tool
            .output_schema
            .take()
            .map(|raw| Arc::new(schema::compact_output(&raw)));
    }
}
