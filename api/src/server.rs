//! Serving on a loopback socket with bounds a slow or stalled client cannot get around:
//! a header deadline, a body deadline (in the boundary), and a cap on open connections.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{Router, extract::ConnectInfo};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::{net::TcpListener, sync::Semaphore};
use tower::ServiceExt;

/// Bounds on connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// How long shutdown waits for in-flight requests.
    pub drain_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_connections: 256,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains for a bounded time.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_closed) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Per-connection failures (reset before accept, out of descriptors) must not
                // stop the server; back off briefly so a descriptor shortage cannot spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            app.clone().oneshot(request.map(axum::body::Body::new))
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    let _ = tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await;
    Ok(())
}
