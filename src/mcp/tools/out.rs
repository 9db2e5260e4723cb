//! A tool's result, declared by its type: a handler returns `Result<Json<T>, ToolError>`,
//! and that one type gives both the tool's `outputSchema` and its result.
//!
//! rmcp's `#[tool]` macro reads a handler's return type and, when the `Ok` type's last path
//! segment is `Json<T>`, declares `schema_for_output::<T>()` (the serialize-form schema of
//! `T`) as the tool's output schema. Our own [`Json`] has that name so the macro treats it
//! the same way; the router then compacts each schema once (see `table.rs` and
//! `schema.rs`), and [`IntoCallToolResult`] below turns the value into the result the
//! contract describes: `structuredContent` is the serialized `T`, the first content block is
//! `T`'s text rendering ([`Output::text`], for models that read text), and `isError` is
//! [`Output::is_error`]. A run ([`Run`]) is rendered once, by `render::execution` (images
//! scaled, `resource_link` blocks to the run's resources), and carries
//! `ExecutionResult`'s schema.

use std::borrow::Cow;

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::json;

use crate::config::Limits;
use crate::mcp::render;
use crate::session::ExecutionResult;

/// A tool's structured result (see the module docs). The name is what rmcp's macro looks
/// for; the type is ours, so that [`Output`] decides the text.
pub(crate) struct Json<T>(pub T);

/// A result type that renders itself: serialized as `structuredContent`, with a short text
/// for models that read text.
pub(crate) trait Output: Serialize + JsonSchema {
    /// The text block: the same facts as the JSON, short.
    fn text(&self) -> String;

    /// `isError` of a result that succeeded as a call but reports a failure the model must
    /// see (an install that failed). False by default.
    fn is_error(&self) -> bool {
        false
    }
}

impl<T: Output> IntoCallToolResult for Json<T> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let mut r = CallToolResult::success(vec![ContentBlock::text(self.0.text())]);
        r.structured_content =
            Some(serde_json::to_value(&self.0).unwrap_or_else(|e| json!({"error": e.to_string()})));
        r.is_error = Some(self.0.is_error());
        Ok(r.into())
    }
}

/// A run's [`ExecutionResult`], rendered for the response: `isError` when the code raised
/// (or the run failed), images as `image` blocks scaled for the agent, shortened streams and
/// images that do not fit as `resource_link` blocks (see `render::execution`).
pub(crate) struct Run(CallToolResult);

impl Run {
    /// Render `r` under the server's `limits` (image size and count).
    pub(crate) async fn render(r: &ExecutionResult, limits: &Limits) -> Run {
        Run(render::execution(r, limits).await)
    }
}

impl JsonSchema for Run {
    fn schema_name() -> Cow<'static, str> {
        ExecutionResult::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        ExecutionResult::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        ExecutionResult::json_schema(generator)
    }

    fn inline_schema() -> bool {
        ExecutionResult::inline_schema()
    }
}

impl IntoCallToolResult for Json<Run> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok(self.0.0.into())
    }
}

/// A run, or another result in its place (`get_execution`: the run, or a page of one of
/// its parts), each rendered its own way. The schema is the `anyOf` of the two.
#[derive(JsonSchema)]
#[serde(untagged)]
pub(crate) enum RunOr<B> {
    Run(Run),
    Other(B),
}

impl<B: Output> IntoCallToolResult for Json<RunOr<B>> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        match self.0 {
            RunOr::Run(run) => Json(run).into_call_tool_result(),
            RunOr::Other(b) => Json(b).into_call_tool_result(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, JsonSchema)]
    struct Said {
        what: String,
        failed: bool,
    }

    impl Output for Said {
        fn text(&self) -> String {
            format!("said {}", self.what)
        }
        fn is_error(&self) -> bool {
            self.failed
        }
    }

    fn result(r: impl IntoCallToolResult) -> CallToolResult {
        match r.into_call_tool_result() {
            Ok(CallToolResponse::Complete(r)) => r,
            other => panic!("not a complete result: {other:?}"),
        }
    }

    #[test]
    fn a_result_is_its_text_then_its_json_and_says_whether_it_failed() {
        let r = result(Json(Said {
            what: "hi".into(),
            failed: false,
        }));
        assert_eq!(
            r.content[0].as_text().map(|t| t.text.as_str()),
            Some("said hi")
        );
        assert_eq!(
            r.structured_content,
            Some(json!({"what": "hi", "failed": false}))
        );
        assert_eq!(r.is_error, Some(false));
        let failed = result(Json(Said {
            what: "no".into(),
            failed: true,
        }));
        assert_eq!(failed.is_error, Some(true));
    }

    #[test]
    fn a_run_has_the_schema_of_an_execution_result() {
        let run = rmcp::handler::server::tool::schema_for_output::<Run>();
        let record = rmcp::handler::server::tool::schema_for_output::<ExecutionResult>();
        assert_eq!(run, record);
    }
}
