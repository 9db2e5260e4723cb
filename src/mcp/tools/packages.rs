//! `install_packages`: install packages into a Python session's interpreter (uv pip, else
//! pip). A failed install is a result with `isError`, its output's tail included; one that
//! replaced an already installed package recommends a restart.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::packages::InstallOutcome;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallPackagesParams {
    pub session_id: String,
    /// Requirement specifiers, e.g. "numpy>=2".
    pub packages: Vec<String>,
}

/// `install_packages`: what the install did, and what was asked for (for the text).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Installed {
    outcome: InstallOutcome,
    #[serde(skip)]
    packages: Vec<String>,
}

impl Output for Installed {
    /// What the install did, and its output's tail.
    fn text(&self) -> String {
        let o = &self.outcome;
        format!(
            "{} {}{}\n{}",
            if o.ok { "installed" } else { "install FAILED:" },
            self.packages.join(" "),
            if o.restart_recommended {
                " (restart recommended: an installed package replaced one that may already be imported)"
            } else {
                ""
            },
            o.output.trim_end()
        )
    }

    fn is_error(&self) -> bool {
        !self.outcome.ok
    }
}

#[tool_router(router = packages_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Install packages into a Python session's interpreter (uv pip, else pip); says when a
    /// restart is recommended.
    #[tool]
    async fn install_packages(
        &self,
        caller: Caller,
        Parameters(p): Parameters<InstallPackagesParams>,
    ) -> Result<Json<Installed>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let outcome = crate::ops::install_packages(&handle, &p.packages).await?;
        Ok(Json(Installed {
            outcome,
            packages: p.packages,
        }))
    }
}
