//! Where kernels bend the protocol, and what the session does about it. Decided once per kernel
//! from its `kernel_info_reply` (implementation and language), so the rest of the session code
//! stays generic. Each rule is pinned by a test against the real kernel (`tests/kernels_*.rs`).

use serde_json::Value;

/// Per-kernel adjustments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    /// Values arrive as `display_data` instead of `execute_result` (IRkernel): text-only ones
    /// become the run's `result`.
    pub display_is_result: bool,
    /// Errors arrive as stdout lines with this prefix and reply status `ok` (octave_kernel).
    pub error_line_prefix: Option<&'static str>,
    /// An interrupted execution is answered `ok`, with no error (octave_kernel), so the reply
    /// cannot tell a cut-short run from a finished one.
    pub interrupt_replies_ok: bool,
    /// Code is read from a terminal by a REPL that waits for more lines when code is
    /// incomplete (metakernel/pexpect kernels): ask `is_complete_request` first. An
    /// `incomplete` answer stands only when kernel-mcp's own reading of the code finds a block
    /// left open ([`crate::session::octave::open_block`]): octave_kernel calls every one-line
    /// block (`for i=1:3 disp(i); end`) incomplete.
    pub check_complete: bool,
    /// The kernel never sends `input_request`: code that reads stdin blocks on the kernel's
    /// terminal (bash_kernel), so the session watches for that and interrupts.
    pub stdin_is_terminal: bool,
    /// `ename` comes as `<class 'NameError'>` (xeus-python).
    pub ename_is_class_repr: bool,
    /// The kernel runs shell requests on subshells while its main shell is busy (JEP 91;
    /// `supported_features` holds `"kernel subshells"`, ipykernel >= 7). Only IPython's own
    /// kernel counts: wrapper kernels built on ipykernel's base class (bash_kernel,
    /// octave_kernel) inherit the feature flag, but their code drives one REPL process from
    /// whichever thread asks, so a subshell request there garbles or blocks the busy run.
    pub subshells: bool,
    /// An `execute_request` sent with `stop_on_error` that fails makes the kernel abort (reply
    /// `status: aborted`, nothing run) the execute requests already in its shell queue
    /// (IPython's kernel). Only then is a notebook batch's next cell sent ahead into that queue.
    pub aborts_queue_on_error: bool,
}

impl Quirks {
    /// The quirks of the kernel that sent `info` (a kernel_info_reply content).
    pub fn from_kernel_info(info: &Value) -> Quirks {
        let implementation = info["implementation"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let language = info["language_info"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let subshells = implementation == "ipython"
            && info["supported_features"]
                .as_array()
                .is_some_and(|f| f.iter().any(|v| v == "kernel subshells"));
        Quirks {
            subshells,
            display_is_result: implementation == "irkernel",
            error_line_prefix: (language == "octave").then_some("error: "),
            check_complete: language == "octave",
            interrupt_replies_ok: language == "octave",
            stdin_is_terminal: implementation == "bash_kernel",
            ename_is_class_repr: implementation == "xeus-python",
            aborts_queue_on_error: implementation == "ipython",
        }
    }

    /// `NameError` from `<class 'NameError'>` when the kernel writes class reprs.
    pub fn ename(&self, ename: String) -> String {
        if !self.ename_is_class_repr {
            return ename;
        }
        match ename
            .strip_prefix("<class '")
            .and_then(|s| s.strip_suffix("'>"))
        {
            Some(inner) => inner.to_string(),
            None => ename,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_known_kernel_gets_its_quirks_and_ipykernel_only_its_queue_abort() {
        let q = |implementation: &str, language: &str| {
            Quirks::from_kernel_info(
                &json!({"implementation": implementation, "language_info": {"name": language}}),
            )
        };
        let ipython = Quirks {
            aborts_queue_on_error: true,
            ..Quirks::default()
        };
        assert_eq!(q("ipython", "python"), ipython);
        assert!(!q("bash_kernel", "bash").aborts_queue_on_error);
        assert!(q("IRkernel", "R").display_is_result);
        let octave = q("Octave Kernel", "octave");
        assert_eq!(octave.error_line_prefix, Some("error: "));
        assert!(octave.check_complete);
        assert!(octave.interrupt_replies_ok);
        assert!(q("bash_kernel", "bash").stdin_is_terminal);
        assert!(q("xeus-python", "python").ename_is_class_repr);
        let ipykernel7 = json!({"implementation": "ipython", "supported_features": ["debugger", "kernel subshells"]});
        assert!(Quirks::from_kernel_info(&ipykernel7).subshells);
        let wrapper =
            json!({"implementation": "bash_kernel", "supported_features": ["kernel subshells"]});
        assert!(!Quirks::from_kernel_info(&wrapper).subshells);
    }

    #[test]
    fn class_repr_enames_are_unwrapped_only_for_kernels_that_write_them() {
        let xeus = Quirks {
            ename_is_class_repr: true,
            ..Default::default()
        };
        assert_eq!(
            xeus.ename("<class 'ZeroDivisionError'>".into()),
            "ZeroDivisionError"
        );
        assert_eq!(xeus.ename("ValueError".into()), "ValueError");
        assert_eq!(Quirks::default().ename("<class 'X'>".into()), "<class 'X'>");
    }
}
