//! Real-kernel acceptance for xeus-python 0.19 (PyPI wheel; issue 5): `null`
//! parent_header/metadata, reply before trailing output, and the process exits on SIGINT
//! (the server must treat that as a death + restart with a notice).

use crate::common::kernels::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xpython_conformance() {
    conformance(&Lang {
        kernel: "xpython",
        set_state: "x = 31337",
        read_state: "x",
        print: "print('hello-stdout')",
        raise: "1/0",
        error_marker: "ZeroDivisionError",
        long_loop: "while True:\n    pass",
        may_die_on_interrupt: true,
    })
    .await;
}
