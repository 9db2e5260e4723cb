//! The session actor against a scripted kernel, in-process, under `tokio::time::pause()`.
//!
//! The fake implements the kernel seam (`KernelIo`): every message the actor sends arrives in
//! the test's `Script::sent`, and the test decides what the kernel answers and when. With
//! time paused, the actor's deadlines (timeouts, interrupt grace and repeats, the iopub grace)
//! pass in virtual time as soon as every task is idle, so each case takes milliseconds and
//! asserts exact virtual instants.
//!
//! The cases are the submodules: `interrupts` (timeouts, interrupts and their repeats, the
//! restart after the grace), `replies` (a run's end from its reply and idle, the probe when
//! one is missing, shell requests that get no answer), `kernel_faults` (a kernel that dies
//! or takes no messages), `input` (stdin requests and the settled receiver) and
//! `other_clients` (another client's cells in the history), `follows` (a run queued to
//! follow another: only if that one ends ok, and past a restart) and `ahead` (a batch's next
//! cell sent into the kernel's queue while the one before runs).

mod ahead;
mod follows;
mod input;
mod interrupts;
mod kernel_faults;
mod other_clients;
mod replies;
