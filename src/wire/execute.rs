//! The content of an `execute_request`, written in one place for every sender: a session's
//! run, a run on a subshell, and the silent helper code kernel-mcp itself runs in a kernel
//! (the trace-context callback, the pooled kernel's adaptation).
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/messaging.html#execute>

use serde_json::{Value, json};

/// What an `execute_request` asks of the kernel. `user_expressions` is always empty.
/// kernel-mcp decides itself what runs after a failure (a queued run's `follows`), so
/// `stop_on_error` is false but for a notebook batch's cell that runs only if the one before
/// it ended `ok`, on an IPython kernel of the session's own: the next cell may be sent into the
/// kernel's queue behind it, and the kernel aborts that one if this one fails.
#[derive(Debug, Clone, Copy)]
pub struct Execute<'a> {
    pub code: &'a str,
    /// Nothing broadcast on iopub, no execution count.
    pub silent: bool,
    pub store_history: bool,
    /// The kernel may send `input_request` on stdin.
    pub allow_stdin: bool,
    /// After an error the kernel aborts the execute requests already in its queue.
    pub stop_on_error: bool,
}

impl<'a> Execute<'a> {
    /// Helper code of kernel-mcp's own: silent, not in the kernel's history, no stdin.
    pub fn hidden(code: &'a str) -> Execute<'a> {
        Execute {
            code,
            silent: true,
            store_history: false,
            allow_stdin: false,
            stop_on_error: false,
        }
    }

    /// The message content.
    pub fn content(&self) -> Value {
        json!({
            "code": self.code,
            "silent": self.silent,
            "store_history": self.store_history,
            "user_expressions": {},
            "allow_stdin": self.allow_stdin,
            "stop_on_error": self.stop_on_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_code_is_silent_out_of_history_and_never_reads_stdin() {
        let c = Execute::hidden("x = 1").content();
        assert_eq!(c["code"], "x = 1");
        assert_eq!(c["silent"], true);
        assert_eq!(c["store_history"], false);
        assert_eq!(c["allow_stdin"], false);
        assert_eq!(c["stop_on_error"], false);
        assert_eq!(c["user_expressions"], json!({}));
    }
}
