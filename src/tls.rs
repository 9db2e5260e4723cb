//! The process's TLS crypto provider. The build links rustls with `ring` only (no C/CMake
//! step), so rustls cannot pick a provider by itself: every HTTP or websocket client that may
//! speak TLS (a gateway's REST and channels, the broker's streamable-HTTP servers) calls
//! [`install_provider`] before it is built.

/// Install `ring` as rustls's process-wide provider; a no-op after the first call.
pub fn install_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err: another provider is installed already (an embedding program's); it serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
