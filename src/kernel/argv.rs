//! Turning a kernelspec into a command line and environment (jupyter_client `format_kernel_cmd`).

use std::path::Path;

use super::spec::KernelSpec;

/// argv with `{connection_file}`, `{resource_dir}`, `{prefix}` substituted (unknown `{x}` kept), and
/// argv[0] `python` / `python3` / `python3.X` resolved: `<prefix>/bin/<argv0>` (or `<prefix>/bin/python`)
/// when the spec lives in `<prefix>/share/jupyter/kernels/<name>`, else `<env_prefix>/bin/python` when an
/// environment is selected, else via `which`. Errors: the program cannot be found (message names it).
pub fn build_argv(spec: &KernelSpec, connection_file: &Path, env_prefix: Option<&Path>) -> Result<Vec<String>, String> {
    todo!()
}

/// The kernelspec's `env` with `$VAR` / `${VAR}` expanded from `lookup` (unknown kept, `$$` -> `$`).
pub fn expand_env(spec: &KernelSpec, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    todo!()
}
