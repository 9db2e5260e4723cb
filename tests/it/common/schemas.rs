//! Every tool's `structuredContent` checked against the `outputSchema` it declares in
//! `tools/list`: [`OutputSchemas::check`] runs on every [`super::Server::call`], so each
//! integration test also proves the schemas describe what the tools really return.

use std::collections::HashMap;

use rmcp::model::{CallToolResult, Tool};
use serde_json::Value;

/// Compiled output schemas by tool name.
pub struct OutputSchemas {
    validators: HashMap<String, jsonschema::Validator>,
}

impl OutputSchemas {
    /// Compile each tool's `outputSchema`; a tool without one, or a schema that does not
    /// compile, fails the test.
    pub fn compile(tools: &[Tool]) -> OutputSchemas {
        let validators = tools
            .iter()
            .map(|t| {
                let schema = t
                    .output_schema
                    .as_ref()
                    .unwrap_or_else(|| panic!("tool {} declares no outputSchema", t.name));
                let schema = Value::Object((**schema).clone());
                let v = jsonschema::validator_for(&schema).unwrap_or_else(|e| {
                    panic!("outputSchema of {} does not compile: {e}\n{schema}", t.name)
                });
                (t.name.to_string(), v)
            })
            .collect();
        OutputSchemas { validators }
    }

    /// Panics unless `result.structuredContent` validates against `tool`'s outputSchema.
    pub fn check(&self, tool: &str, result: &CallToolResult) {
        let Some(validator) = self.validators.get(tool) else {
            return; // not listed: the call itself reports that
        };
        let content = result
            .structured_content
            .as_ref()
            .unwrap_or_else(|| panic!("{tool} returned no structuredContent: {result:?}"));
        let errors: Vec<String> = validator
            .iter_errors(content)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{tool}: structuredContent does not match its outputSchema:\n{}\n--- structuredContent ---\n{content}",
            errors.join("\n")
        );
    }
}
