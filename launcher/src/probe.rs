//! The port check before anything starts: bind `127.0.0.1:<port>` and release it at once.
//!
//! A busy port is refused with one clear line; whatever holds it is never touched. Between
//! the release and the API's own bind another program could take the port; the API then
//! fails to bind and exits, and the launcher reports that (readiness could not succeed against
//! the intruder anyway, since it lacks the token). Closing that window would mean handing the
//! listening socket to the child, which std cannot do portably without `unsafe`.

use std::{
    io,
    net::{Ipv4Addr, SocketAddr, TcpListener},
};

/// Why the port cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// Something already listens there.
    #[error(
        "port {0} is in use on 127.0.0.1; existing processes are left running; choose another with --port"
    )]
    InUse(u16),
    /// Binding failed for another reason.
    #[error("cannot listen on 127.0.0.1:{port} ({kind}); choose another port with --port")]
    Bind {
        /// The port.
        port: u16,
        /// What went wrong.
        kind: io::ErrorKind,
    },
}

/// The loopback address the API will serve on.
#[must_use]
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Checks that `port` is free on 127.0.0.1 by binding it, as the API will, and releasing it.
pub fn ensure_free(port: u16) -> Result<(), PortError> {
    match TcpListener::bind(loopback(port)) {
        Ok(listener) => {
            drop(listener);
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::AddrInUse => Err(PortError::InUse(port)),
        Err(err) => Err(PortError::Bind {
            port,
            kind: err.kind(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_port_is_refused_and_its_holder_keeps_it() {
        let holder = TcpListener::bind(loopback(0)).unwrap();
        let port = holder.local_addr().unwrap().port();
        let refusal = ensure_free(port).unwrap_err();
        assert!(matches!(refusal, PortError::InUse(p) if p == port));
        let line = refusal.to_string();
        assert!(line.contains(&format!("port {port} is in use")), "{line}");
        assert!(line.contains("--port"));
        assert!(!line.contains('\n'));
        // The holder still accepts.
        let _client = std::net::TcpStream::connect(loopback(port)).unwrap();
        holder.accept().unwrap();
    }

    #[test]
    fn a_free_port_is_released_after_the_check() {
        let port = TcpListener::bind(loopback(0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        ensure_free(port).unwrap();
        // Released: it can be bound again at once.
        TcpListener::bind(loopback(port)).unwrap();
    }
}
