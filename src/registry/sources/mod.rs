//! Where a session's kernel comes from: a kernelspec or interpreter found here (`specs`), a
//! registered Python environment (`environments`), a Jupyter server or gateway (`remote`),
//! and the warm pool of started kernels (`pool`, adapted to the session that takes one in
//! `adapt`).

pub mod adapt;
pub mod environments;
pub mod pool;
pub mod remote;
pub(crate) mod specs;
