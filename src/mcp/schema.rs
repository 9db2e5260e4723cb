//! Tool schemas as they go on the wire, made compact so `tools/list` stays small (the caps
//! of tests/it/toolsets.rs: the default toolset under 14.26 kB, `--tools minimal` under 3.1 kB
//! and `--tools code` under 2.73 kB on the wire; see `toolset.rs`).
//!
//! **Output schemas.** Each tool's handler returns `Json<T>` (see `tools/out.rs`), and
//! rmcp's macro declares `T`'s serialize-form schema (schemars, JSON Schema 2020-12) as the
//! tool's output schema. [`compact_output`] keeps of it what validates a result at the
//! least cost in bytes: `type: object` and the fields every result carries (`required`; a
//! field left out when empty is not among them). A result that is one of several records
//! (an untagged enum) is `anyOf` their field sets, and the contract's error shape
//! (`{error_code, message, details}`, sent with `isError`) is always one more alternative,
//! so an error result validates against the same schema. Field types and nested shapes are
//! documented in docs/tools.md; typing every field would put the full `tools/list` over its
//! cap (ExecutionResult alone is returned by five tools).
//!
//! **Input schemas.** [`compact_input`] drops what only costs bytes: `$schema`, `default:
//! null`, number formats, and the `null` of an optional parameter's type (omitting it means
//! the same). Descriptions stay (they are what the model reads), except in `--tools minimal`.
//! The terse toolsets (`minimal`, `code`) declare [`terse_output`] as every output schema.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

/// Keywords an input schema does without.
const DROPPED: [&str; 6] = [
    "$schema", "default", "format", "minimum", "maximum", "title",
];

/// How deep `$ref`/`anyOf`/`allOf` chains are followed.
const MAX_DEPTH: usize = 8;

/// The compact output schema of a tool whose serialize-form schema is `raw` (a schemars
/// root schema, `$defs` included), as described in the module docs.
pub fn compact_output(raw: &JsonObject) -> JsonObject {
    from_schema(&Value::Object(raw.clone()))
}

/// The HTTP header a proxy routes a call by (SEP-2243, MCP 2026-07-28): a tool's
/// `session_id` argument, mirrored by clients into `Mcp-Param-Session-Id`, so a load
/// balancer can send a session's requests to the replica that holds it (docs/serving.md).
pub const SESSION_HEADER: &str = "Session-Id";

/// Mark a tool's `session_id` parameter (when it has one, as a string) with `x-mcp-header`.
pub fn route_by_session(schema: &mut JsonObject) {
    let param = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("session_id"))
        .and_then(Value::as_object_mut);
    if let Some(param) = param
        && param.get("type").and_then(Value::as_str) == Some("string")
    {
        param.insert("x-mcp-header".into(), json!(SESSION_HEADER));
    }
}

/// The output schema of every tool in a terse toolset (`--tools minimal`, `--tools code`):
/// `{"type": "object"}`, which every result (the error shape included) validates against.
/// The field lists of [`compact_output`] cost about 300 bytes a tool; docs/tools.md has them.
pub fn terse_output() -> Arc<JsonObject> {
    let mut root = JsonObject::new();
    root.insert("type".into(), json!("object"));
    Arc::new(root)
}

/// The output schema of a schemars root schema, as described in the module docs.
pub fn from_schema(raw: &Value) -> JsonObject {
    let defs = raw.get("$defs").cloned().unwrap_or(json!({}));
    let mut alternatives: Vec<Value> = field_sets(raw, &defs, 0)
        .into_iter()
        .map(|fields| json!({ "required": fields }))
        .collect();
    alternatives.push(json!({"required": ["error_code", "message"]}));
    let mut root = JsonObject::new();
    root.insert("type".into(), json!("object"));
    root.insert("anyOf".into(), Value::Array(alternatives));
    root
}

/// The required fields of `schema`: one set for a record (with its `allOf` parts, as
/// flattened structs give), one per alternative for an untagged enum.
fn field_sets(schema: &Value, defs: &Value, depth: usize) -> Vec<Vec<String>> {
    if depth > MAX_DEPTH {
        return vec![Vec::new()];
    }
    let schema = resolve(schema, defs);
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = schema.get(key)
            && schema.get("properties").is_none()
        {
            return alts
                .iter()
                .flat_map(|a| field_sets(a, defs, depth + 1))
                .collect();
        }
    }
    let mut fields: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        for part in parts {
            for set in field_sets(part, defs, depth + 1) {
                for f in set {
                    if !fields.contains(&f) {
                        fields.push(f);
                    }
                }
            }
        }
    }
    vec![fields]
}

/// The definition a `{"$ref": "#/$defs/X"}` points at (or the schema itself).
fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    let mut s = schema;
    for _ in 0..MAX_DEPTH {
        match s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| defs.get(name))
        {
            Some(target) => s = target,
            None => break,
        }
    }
    s
}

/// Compact an input schema in place (see the module docs); `descriptions: false` also
/// drops the parameters' descriptions.
pub fn compact_input(schema: &mut JsonObject, descriptions: bool) {
    let required: Vec<Value> = match schema.get("required") {
        Some(Value::Array(r)) => r.clone(),
        _ => Vec::new(),
    };
    for k in DROPPED {
        schema.remove(k);
    }
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, field) in props.iter_mut() {
            strip(field);
            if !descriptions && let Some(f) = field.as_object_mut() {
                // The terse set names the parameters and their types only; the server
                // still checks the values (an unknown one is `INVALID_ARGUMENT`).
                f.remove("description");
                f.remove("enum");
            }
            if !required.contains(&json!(name)) {
                if let Some(Value::Array(types)) = field.get_mut("type") {
                    types.retain(|t| t != "null");
                    if types.len() == 1 {
                        let only = types[0].clone();
                        field["type"] = only;
                    }
                }
                if let Some(Value::Array(values)) = field.get_mut("enum") {
                    values.retain(|v| !v.is_null());
                }
            }
        }
    }
}

/// Drop the [`DROPPED`] keywords everywhere except inside `properties` maps (where keys are
/// field names, not keywords).
fn strip(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for k in DROPPED {
                map.remove(k);
            }
            for (k, child) in map.iter_mut() {
                if k == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(strip);
                    }
                } else {
                    strip(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::Serialize;

    #[derive(Serialize, JsonSchema)]
    struct Inner {
        n: u64,
    }

    #[derive(Serialize, JsonSchema)]
    struct Outer {
        /// Words that must not reach the wire.
        name: String,
        count: Option<i64>,
        inner: Inner,
        #[serde(skip_serializing_if = "Option::is_none")]
        sometimes: Option<String>,
    }

    fn schema<T: JsonSchema + 'static>() -> Value {
        let raw = rmcp::handler::server::tool::schema_for_output::<T>();
        Value::Object(compact_output(&raw))
    }

    #[test]
    fn a_record_requires_the_fields_it_always_writes_or_is_the_error_shape() {
        let s = schema::<Outer>();
        assert_eq!(s["type"], "object");
        assert_eq!(
            s["anyOf"],
            json!([{"required": ["name", "count", "inner"]}, {"required": ["error_code", "message"]}])
        );
        assert!(!s.to_string().contains("Words"), "{s}");
        assert!(s.get("additionalProperties").is_none());
    }

    #[test]
    fn flattened_and_untagged_records_give_one_field_set_per_alternative() {
        #[derive(Serialize, JsonSchema)]
        struct Flat {
            #[serde(flatten)]
            inner: Inner,
            extra: bool,
        }
        #[derive(Serialize, JsonSchema)]
        #[serde(untagged)]
        #[allow(dead_code)]
        enum Either {
            A(Box<Outer>),
            B(Flat),
        }
        let s = schema::<Either>();
        let alts = s["anyOf"].as_array().expect("anyOf");
        assert_eq!(alts.len(), 3, "{s}");
        assert_eq!(alts[0]["required"], json!(["name", "count", "inner"]));
        let flat: Vec<&str> = alts[1]["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(flat.contains(&"n") && flat.contains(&"extra"), "{s}");
    }

    #[test]
    fn an_optional_input_loses_its_null_and_defaults_but_keeps_its_description() {
        #[derive(serde::Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Params {
            /// Needed.
            a: String,
            /// Seconds.
            #[serde(default)]
            b: Option<f64>,
        }
        let raw = rmcp::handler::server::tool::schema_for_input::<Params>()
            .expect("object")
            .as_ref()
            .clone();
        let mut s = raw.clone();
        compact_input(&mut s, true);
        let s = Value::Object(s);
        assert!(s.get("$schema").is_none(), "{s}");
        assert_eq!(
            s["properties"]["b"],
            json!({"type": "number", "description": "Seconds."})
        );
        assert_eq!(s["properties"]["a"]["description"], "Needed.");
        assert_eq!(s["required"], json!(["a"]));
        let mut terse = raw;
        compact_input(&mut terse, false);
        assert_eq!(
            Value::Object(terse)["properties"]["a"],
            json!({"type": "string"})
        );
    }
}
