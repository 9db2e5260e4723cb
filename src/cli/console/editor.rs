//! The console's line editor (rustyline): Enter asks the kernel whether the cell is complete
//! (the `is_complete` tool, the kernel's `is_complete_request`) and either runs it or opens
//! another line with the kernel's indent; Tab asks `complete`. Both are MCP calls made from
//! the editor's thread by blocking on the console's runtime, each with a short deadline so a
//! busy kernel never freezes typing: Enter then falls back to a bracket-and-colon guess, Tab
//! to no matches.

use std::sync::Arc;
use std::time::Duration;

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Cmd, ConditionalEventHandler, Event, EventContext, Helper, RepeatCount};
use serde_json::json;

use crate::cli::client::Client;

/// How long Enter waits for the kernel's completeness answer.
const IS_COMPLETE_DEADLINE: Duration = Duration::from_secs(3);
/// How long Tab waits for completions (a first IPython completion loads jedi: seconds).
const COMPLETE_DEADLINE: Duration = Duration::from_secs(12);

/// What the editor needs to ask the kernel.
#[derive(Clone)]
pub struct Kernel {
    pub client: Arc<Client>,
    pub runtime: tokio::runtime::Handle,
    pub session: String,
}

impl Kernel {
    /// The kernel's verdict on `code`: `Some(indent)` when another line is needed.
    fn needs_more(&self, code: &str) -> Option<String> {
        let call = self.client.call(
            "is_complete",
            json!({"session_id": self.session, "code": code}),
            Duration::ZERO,
        );
        let answer = self
            .runtime
            .block_on(async { tokio::time::timeout(IS_COMPLETE_DEADLINE, call).await });
        match answer {
            Ok(Ok(a)) => match a.value["status"].as_str() {
                Some("incomplete") => Some(a.value["indent"].as_str().unwrap_or("").to_string()),
                Some("unknown") => guess(code),
                _ => None,
            },
            // Busy kernel, old server without the tool, or no answer in time.
            _ => guess(code),
        }
    }
}

/// A guess at completeness without the kernel: open brackets, a last line ending in `:` or
/// `\`, or a cell of several lines under a block header, need another line (indented one
/// level more after `:`); a blank last line ends the cell before this is asked.
pub fn guess(code: &str) -> Option<String> {
    let mut depth = 0i32;
    for c in code.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    let last = code.lines().last().unwrap_or("");
    let indent: String = last.chars().take_while(|c| c.is_whitespace()).collect();
    let trimmed = last.trim_end();
    if trimmed.ends_with(':') {
        Some(format!("{indent}    "))
    } else if depth > 0
        || trimmed.ends_with('\\')
        || (code.contains('\n') && code.lines().any(|l| l.trim_end().ends_with(':')))
    {
        Some(indent)
    } else {
        None
    }
}

/// Enter: run the cell, or open another line with the kernel's indent.
pub struct Enter {
    pub kernel: Kernel,
}

impl ConditionalEventHandler for Enter {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        let code = ctx.line();
        // A blank last line under a multi-line cell ends it, whatever the kernel says.
        let last_blank = code
            .rsplit('\n')
            .next()
            .is_some_and(|l| l.trim().is_empty());
        if code.trim().is_empty() || (code.contains('\n') && last_blank) {
            return Some(Cmd::AcceptLine);
        }
        if ctx.pos() < code.len() {
            // Editing inside the cell: Enter breaks the line there.
            return Some(Cmd::Insert(1, "\n".into()));
        }
        match self.kernel.needs_more(code) {
            Some(indent) => Some(Cmd::Insert(1, format!("\n{indent}"))),
            None => Some(Cmd::AcceptLine),
        }
    }
}

/// The editor's helper: Tab completion through the kernel; no hints, colours or validation
/// (Enter decides, above).
pub struct ConsoleHelper {
    pub kernel: Kernel,
}

impl Completer for ConsoleHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let cursor = line[..pos].chars().count();
        let k = &self.kernel;
        let call = k.client.call(
            "complete",
            json!({"session_id": k.session, "code": line, "cursor_pos": cursor}),
            Duration::ZERO,
        );
        let answer = k
            .runtime
            .block_on(async { tokio::time::timeout(COMPLETE_DEADLINE, call).await });
        let Ok(Ok(a)) = answer else {
            return Ok((pos, Vec::new()));
        };
        let start_chars = a.value["cursor_start"].as_u64().unwrap_or(cursor as u64) as usize;
        let start = line
            .char_indices()
            .nth(start_chars)
            .map(|(i, _)| i)
            .unwrap_or(line.len())
            .min(pos);
        let matches = a.value["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
        Ok((start, matches))
    }
}

impl Hinter for ConsoleHelper {
    type Hint = String;
}
impl Highlighter for ConsoleHelper {}
impl Validator for ConsoleHelper {}
impl Helper for ConsoleHelper {}

#[cfg(test)]
mod tests {
    use super::guess;

    #[test]
    fn the_fallback_guess_opens_a_line_after_a_colon_or_an_open_bracket() {
        assert_eq!(guess("for i in x:"), Some("    ".into()));
        assert_eq!(guess("for i in x:\n    if i:"), Some("        ".into()));
        assert_eq!(guess("f(1,"), Some("".into()));
        assert_eq!(guess("for i in x:\n    f(i)"), Some("    ".into()));
        assert_eq!(guess("x = 1"), None);
    }
}
