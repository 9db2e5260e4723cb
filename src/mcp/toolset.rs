//! Which tools a server offers (`--tools`, docs/tools.md, "Toolsets"): the sets, which optional
//! parameter of a tool is in which set, and the server instructions that go with each set.
//! Which tool is in which set is a column of the one table of tools (`tools/mod.rs`); the lists
//! below are made from it.
//!
//! A toolset is a **base** — `default` (the everyday tools), `all`, `minimal` or `code` —
//! plus any number of **named sets** added to it: `environments`, `checkpoints`, `service`,
//! `fresh`, `completion`, `history`, `notebook`, `artifacts`. `--tools` takes them comma-separated
//! (`--tools default,environments`); named sets alone add to `default`. A tool outside the
//! toolset is not listed and is unknown to `tools/call` (JSON-RPC `-32602`); a parameter
//! outside it (`execute_file`'s `mode`, which only the `fresh` set offers) is not in the tool's
//! input schema and is refused with `INVALID_ARGUMENT` when sent. `minimal` and `code` are
//! terse, so their `tools/list` stays near 3 kB and 2.4 kB on the wire: their output schemas
//! are `{"type": "object"}`, and `minimal`'s parameters carry no descriptions.
//!
//! Every tool of the router has a row in that table, which puts it in `default` or in one
//! named set: a unit test in `tools/mod.rs` fails for a tool added without one.

use std::fmt;

use super::tools::TOOLS;
use super::tools::table::{Home, Pick, count, names, row};

pub use super::tools::table::NamedSet;

/// The everyday tools: sessions (forks included), runs, reading and exporting history,
/// packages (the rows of `default` in the table of `tools/mod.rs`).
pub const DEFAULT_TOOLS: [&str; count(&TOOLS, Pick::Default)] = names(&TOOLS, Pick::Default);

/// The tools of `--tools minimal`: enough to start a session, run code and follow the run.
pub const MINIMAL_TOOLS: [&str; count(&TOOLS, Pick::Minimal)] = names(&TOOLS, Pick::Minimal);

/// The tools of `--tools code` (docs/broker.md): run code and follow the run; everything else
/// is reached from the code, through `from kernel_mcp import mcp`.
pub const CODE_TOOLS: [&str; count(&TOOLS, Pick::Code)] = names(&TOOLS, Pick::Code);

/// Optional parameters that belong to a named set rather than to their tool: left out of the
/// tool's schema, and refused, unless the set is in the toolset.
const SET_PARAMS: [(&str, &str, NamedSet); 2] = [
    ("execute_file", "mode", NamedSet::Fresh),
    ("create_session", "environment", NamedSet::Environments),
];

/// Optional parameters the terse sets (`minimal`, `code`) leave out of a tool's schema to
/// stay small; still accepted when sent (a session there gets the server's `--sandbox`).
const TERSE_LEFT_OUT: [(&str, &str); 6] = [
    ("create_session", "sandbox"),
    ("create_session", "sandbox_network"),
    ("create_session", "notebook"),
    ("create_session", "notebook_path"),
    ("execute", "subshell"),
    ("execute", "queue_timeout_s"),
];

/// The key of the experimental client capability by which a client asks for a toolset:
/// `{"capabilities": {"experimental": {"kernel-mcp": {"tools": "all"}}}}` (the CLI does, to
/// reach every tool of the shared service; an agent's client gets the server's `--tools`).
pub const CAPABILITY: &str = "kernel-mcp";

/// The toolset a client's experimental capabilities ask for, if any (and it parses).
pub fn requested(experimental: &rmcp::model::ExperimentalCapabilities) -> Option<Toolset> {
    experimental
        .get(CAPABILITY)?
        .get("tools")?
        .as_str()?
        .parse()
        .ok()
}

/// The `initialize` parameters of a kernel-mcp client (the CLI) that asks for `toolset`.
pub fn client_config(toolset: Toolset) -> rmcp::model::ClientConfig {
    let mut ask = rmcp::model::JsonObject::new();
    ask.insert("tools".into(), toolset.to_string().into());
    let mut experimental = rmcp::model::ExperimentalCapabilities::new();
    experimental.insert(CAPABILITY.into(), ask);
    let mut capabilities = rmcp::model::ClientCapabilities::default();
    capabilities.experimental = Some(experimental);
    rmcp::model::ClientConfig::new(
        capabilities,
        rmcp::model::Implementation::new("kernel-mcp-cli", env!("CARGO_PKG_VERSION")),
    )
}

/// The base a toolset starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Base {
    /// [`DEFAULT_TOOLS`].
    #[default]
    Default,
    /// Every tool and parameter.
    All,
    /// [`MINIMAL_TOOLS`], terse.
    Minimal,
    /// [`CODE_TOOLS`], terse, with instructions to reach other tools from code.
    Code,
}

impl Base {
    fn name(self) -> &'static str {
        match self {
            Base::Default => "default",
            Base::All => "all",
            Base::Minimal => "minimal",
            Base::Code => "code",
        }
    }
}

/// Which tools a server offers: a [`Base`] plus named sets. `Copy`, so each HTTP session's
/// handler factory can take it by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Toolset {
    base: Base,
    /// Bit `1 << NamedSet as u8` per named set added.
    sets: u8,
}

impl Toolset {
    /// The everyday tools (the default of `--tools`).
    pub const fn everyday() -> Toolset {
        Toolset {
            base: Base::Default,
            sets: 0,
        }
    }

    /// Every tool.
    pub const fn all() -> Toolset {
        Toolset {
            base: Base::All,
            sets: 0,
        }
    }

    /// `--tools minimal`.
    pub const fn minimal() -> Toolset {
        Toolset {
            base: Base::Minimal,
            sets: 0,
        }
    }

    /// `--tools code`.
    pub const fn code() -> Toolset {
        Toolset {
            base: Base::Code,
            sets: 0,
        }
    }

    /// This toolset with `set` added.
    pub fn with(mut self, set: NamedSet) -> Toolset {
        self.sets |= set.bit();
        self
    }

    /// The base this toolset starts from.
    pub fn base(&self) -> Base {
        self.base
    }

    fn has(&self, set: NamedSet) -> bool {
        self.base == Base::All || self.sets & set.bit() != 0
    }

    /// True when `tool` is offered: `all` offers any name; otherwise the tool's row says
    /// whether its base or one of its named sets does.
    pub fn offers(&self, tool: &str) -> bool {
        if self.base == Base::All {
            return true;
        }
        let Some(row) = row(tool) else {
            return false;
        };
        let in_base = match self.base {
            Base::All => true,
            Base::Default => row.home == Home::Default,
            Base::Minimal => row.minimal,
            Base::Code => row.code,
        };
        in_base || matches!(row.home, Home::Set(set) if self.has(set))
    }

    /// The named set that offers `param` of `tool`, when this toolset does not.
    pub fn missing_param(&self, tool: &str, param: &str) -> Option<NamedSet> {
        SET_PARAMS
            .iter()
            .find(|(t, p, set)| *t == tool && *p == param && !self.has(*set))
            .map(|(_, _, set)| *set)
    }

    /// True when `param` of `tool` is in the tool's listed input schema: offered (see
    /// [`Self::missing_param`]) and not one a terse set leaves out.
    pub fn lists_param(&self, tool: &str, param: &str) -> bool {
        self.missing_param(tool, param).is_none()
            && !(self.terse_outputs() && TERSE_LEFT_OUT.contains(&(tool, param)))
    }

    /// False when parameter descriptions are left out of the input schemas (`minimal`).
    pub fn describes_params(&self) -> bool {
        self.base != Base::Minimal
    }

    /// True when output schemas are just `{"type": "object"}` (`minimal`, `code`).
    pub fn terse_outputs(&self) -> bool {
        matches!(self.base, Base::Minimal | Base::Code)
    }

    /// The server instructions (`initialize`) for this toolset.
    pub fn instructions(&self) -> String {
        let mut s = String::from(
            "Named, persistent sessions on real Jupyter kernels (Python, R, Octave, bash… whatever kernelspecs are installed). \
             Call execute with code (no session_id = the 'default' Python session); state persists between calls. ",
        );
        if self.offers("create_session") {
            s.push_str("create_session(kernel=...) for other languages or isolated sessions");
            s.push_str(if self.offers("list_kernels") {
                "; list_kernels shows what is installed. "
            } else {
                ". "
            });
        }
        s.push_str(
            "Long runs return status 'running' with a run_id: call get_execution(run_id, wait_s). \
             interrupt_session stops a run and keeps variables, and says when the run did not stop",
        );
        s.push_str(if self.offers("restart_session") {
            "; restart_session stops anything but clears variables."
        } else {
            "."
        });
        if self.base == Base::Code {
            s.push_str(
                " Code mode: these four tools are all there is. Reach every other MCP tool from code run with execute: \
                 `from kernel_mcp import mcp`, then mcp.help() lists the servers and tools you may use, \
                 mcp.help(server, tool) shows a tool's schema and mcp.call(server, tool, arguments={...}) calls it.",
            );
        }
        s
    }
}

impl fmt::Display for Toolset {
    /// `default`, `all`, `minimal`, `code`, or a base and its sets: `default,environments`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.base.name())?;
        for set in NamedSet::ALL {
            if self.base != Base::All && self.sets & set.bit() != 0 {
                write!(f, ",{}", set.name())?;
            }
        }
        Ok(())
    }
}

/// Why a `--tools` value names no toolset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsetError {
    #[error(
        "--tools names two bases, {0} and {1}; give one of default, all, minimal, code, plus named sets"
    )]
    TwoBases(&'static str, &'static str),
    #[error(
        "unknown toolset '{0}'; use default, all, minimal or code, optionally with named sets: {sets} (e.g. --tools default,{first})",
        sets = set_names().join(", "),
        first = set_names()[0]
    )]
    Unknown(String),
}

/// The names of the named sets, in their order.
fn set_names() -> Vec<&'static str> {
    NamedSet::ALL.iter().map(|n| n.name()).collect()
}

impl std::str::FromStr for Toolset {
    type Err = ToolsetError;
    /// `NAME[,NAME…]`: at most one base (`default`, `all` (= `full`), `minimal`, `code`)
    /// and any named sets; named sets alone add to `default`.
    fn from_str(s: &str) -> Result<Toolset, ToolsetError> {
        let mut base = None;
        let mut set = Toolset::everyday();
        for name in s.split([',', '+']).map(str::trim).filter(|n| !n.is_empty()) {
            let b = match name {
                "default" => Some(Base::Default),
                "all" | "full" => Some(Base::All),
                "minimal" => Some(Base::Minimal),
                "code" => Some(Base::Code),
                _ => None,
            };
            match (b, base) {
                (Some(b), None) => base = Some(b),
                (Some(b), Some(prev)) if b != prev => {
                    return Err(ToolsetError::TwoBases(prev.name(), b.name()));
                }
                (Some(_), Some(_)) => {}
                (None, _) => match NamedSet::ALL.iter().find(|n| n.name() == name) {
                    Some(n) => set = set.with(*n),
                    None => return Err(ToolsetError::Unknown(name.to_string())),
                },
            }
        }
        set.base = base.unwrap_or_default();
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_a_base_and_named_sets_and_print_back() {
        for (s, want) in [
            ("default", "default"),
            ("", "default"),
            ("all", "all"),
            ("full", "all"),
            ("minimal", "minimal"),
            ("code", "code"),
            ("environments", "default,environments"),
            ("default, fresh,environments", "default,environments,fresh"),
            ("minimal+checkpoints", "minimal,checkpoints"),
            ("all,history", "all"),
        ] {
            let t: Toolset = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(t.to_string(), want, "{s}");
        }
        assert!("minimal,code".parse::<Toolset>().is_err());
        let e = "everything".parse::<Toolset>().unwrap_err().to_string();
        assert!(e.contains("environments") && e.contains("minimal"), "{e}");
    }

    #[test]
    fn the_bases_offer_their_lists_and_named_sets_add_to_them() {
        let default = Toolset::default();
        assert!(DEFAULT_TOOLS.iter().all(|t| default.offers(t)));
        assert!(!default.offers("register_environment"));
        assert!(!default.offers("renew_session"));
        assert!(!default.offers("complete"));
        let more = default.with(NamedSet::Service);
        assert!(more.offers("renew_session") && more.offers("clear_queue"));
        assert!(!more.offers("checkpoint_session"));
        let code = Toolset::code();
        assert!(CODE_TOOLS.iter().all(|t| code.offers(t)));
        assert_eq!(DEFAULT_TOOLS.iter().filter(|t| code.offers(t)).count(), 4);
        assert!(MINIMAL_TOOLS.iter().all(|t| DEFAULT_TOOLS.contains(t)));
        assert!(Toolset::all().offers("anything_at_all"));
    }

    #[test]
    fn a_set_parameter_is_missing_until_its_set_is_added() {
        let default = Toolset::default();
        assert_eq!(
            default.missing_param("execute_file", "mode"),
            Some(NamedSet::Fresh)
        );
        assert_eq!(default.missing_param("execute_file", "path"), None);
        assert_eq!(
            default
                .with(NamedSet::Fresh)
                .missing_param("execute_file", "mode"),
            None
        );
        assert_eq!(
            Toolset::all().missing_param("create_session", "environment"),
            None
        );
    }

    #[test]
    fn code_mode_instructions_point_to_the_broker() {
        let code = Toolset::code().instructions();
        assert!(code.contains("from kernel_mcp import mcp"), "{code}");
        assert!(!code.contains("restart_session"), "{code}");
        assert!(
            !Toolset::default()
                .instructions()
                .contains("kernel_mcp import")
        );
    }
}
