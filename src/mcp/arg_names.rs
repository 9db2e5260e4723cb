//! Arguments a tool does not have. rmcp's deserialization ignores unknown fields, so a typo
//! (`timeout` for `timeout_s`) or a guessed name (`kernel_name`) would silently do nothing;
//! instead the call is refused with `INVALID_ARGUMENT`, naming the closest parameter and the
//! tool's parameters. The names come from each tool's full input schema, given by the server
//! (every toolset: a parameter a toolset leaves out is answered by [`super::toolset`]'s own
//! check).

use std::collections::HashMap;

use rmcp::model::Tool;

/// Each tool's parameter names, in schema order.
pub(crate) struct ToolParams(HashMap<String, Vec<String>>);

impl ToolParams {
    /// The parameters of `tools`, from their full input schemas.
    pub(crate) fn new(tools: &[Tool]) -> ToolParams {
        ToolParams(
            tools
                .iter()
                .filter_map(|t| {
                    let props = t.input_schema.get("properties")?.as_object()?;
                    Some((t.name.to_string(), props.keys().cloned().collect()))
                })
                .collect(),
        )
    }

    /// The message for the first of `given` that `tool` has no parameter for; `None` when
    /// every one is a parameter (or `tool` is unknown here).
    pub(crate) fn unknown<'a>(
        &self,
        tool: &str,
        given: impl IntoIterator<Item = &'a String>,
    ) -> Option<String> {
        let params = self.0.get(tool)?;
        let bad = given.into_iter().find(|g| !params.contains(g))?;
        let hint = closest(bad, params)
            .map(|p| format!(" Did you mean `{p}`?"))
            .unwrap_or_default();
        let takes = if params.is_empty() {
            "It takes none.".to_string()
        } else {
            format!("Its parameters: {}.", params.join(", "))
        };
        Some(format!("{tool} has no parameter `{bad}`.{hint} {takes}"))
    }
}

/// The parameter `bad` most likely meant: one it is a prefix of or that is a prefix of it,
/// or within a third of its length in edits.
fn closest<'a>(bad: &str, params: &'a [String]) -> Option<&'a str> {
    params
        .iter()
        .map(|p| {
            let d = if p.starts_with(bad) || bad.starts_with(p.as_str()) {
                0
            } else {
                strsim::levenshtein(bad, p)
            };
            (d, p)
        })
        .filter(|(d, _)| *d <= (bad.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, p)| p.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_typo_or_a_prefix_suggests_the_parameter_and_a_stranger_suggests_none() {
        let p = names(&["session_id", "code", "wait_s", "timeout_s"]);
        assert_eq!(closest("timeout", &p), Some("timeout_s"));
        assert_eq!(closest("sesion_id", &p), Some("session_id"));
        assert_eq!(closest("working_dir", &p), None);
        let k = names(&["kernel", "cwd"]);
        assert_eq!(closest("kernel_name", &k), Some("kernel"));
    }

    #[test]
    fn an_unknown_parameter_is_named_with_the_tools_parameters() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "code": {"type": "string"}, "timeout_s": {"type": "number"}
        }});
        let tools = [
            Tool::new("execute", "", schema.as_object().unwrap().clone()),
            Tool::new("none", "", serde_json::Map::new()),
        ];
        let p = ToolParams::new(&tools);
        let m = p
            .unknown("execute", &names(&["code", "timeout"]))
            .expect("timeout is not a parameter");
        assert!(
            m.contains("`timeout`") && m.contains("Did you mean `timeout_s`?"),
            "{m}"
        );
        assert!(m.ends_with("Its parameters: code, timeout_s."), "{m}");
        assert_eq!(p.unknown("execute", &names(&["code", "timeout_s"])), None);
        assert_eq!(p.unknown("no_such_tool", &names(&["x"])), None);
        // A schema without properties is not checked.
        assert_eq!(p.unknown("none", &names(&["x"])), None);
    }
}
