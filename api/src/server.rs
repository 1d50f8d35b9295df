//! Serving on a loopback socket with bounds a slow or stalled client cannot get around:
//! a header deadline, a body deadline (in the boundary), and a cap on open connections that
//! a newcomer gets past by closing the connection that has waited longest between requests,
//! so a client holding many connections open (slowloris) cannot lock others out. Each
//! connection is served to its end on one of a thread per core.
//!
//! The header deadline is kept here, by a sweep over the open connections a few times per
//! deadline, rather than by hyper's per-request timer: that timer was armed and disarmed in the
//! runtime's timer wheel for every request, about 6 % of a small request's server CPU.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::pin,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{extract::ConnectInfo, extract::Request, response::Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown};
use tokio::{
    net::TcpListener,
    sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError},
};
use tower::ServiceExt;

/// Bounds on connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's headers, counted from the moment its
    /// connection opened or its previous answer ended (so it also closes an idle kept-alive
    /// connection).
    pub header_timeout: Duration,
    /// Connections open at once. A further client takes the place of the one that has waited
    /// longest for its next request (which then closes: for that moment, up to twice this many
    /// sockets are open); when every one is answering a request, it waits.
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

/// One open connection, as the accept loop sees it.
struct Slot {
    /// When the server started, the origin of `waiting_since`.
    epoch: Instant,
    /// Milliseconds from `epoch` to when it opened or its last answer ended: from then on it is
    /// waiting for a request's headers, which the sweep bounds.
    waiting_since: AtomicU64,
    /// Requests being answered on it, from their headers to their response's last byte; at 0
    /// it is only waiting for a request (still sending headers, or idle between requests).
    answering: AtomicUsize,
    /// Whether a request on it has been answered in full: a kept-alive client's connection,
    /// which goes after every one that never got that far (a slowloris client's).
    served: AtomicBool,
    /// Whether its thread has read from it once. Until then it is never evicted: a client that
    /// sent its request with its connect would otherwise lose it to a flood that fills the
    /// cap faster than the connection threads get to new connections.
    read: AtomicBool,
    /// Whether the client has sent it a byte yet. A slowloris client's connection has; a
    /// well-behaved client's whose request is still on its way (its thread polled it before the
    /// request arrived) has not, and at the cap goes after every one that has: it otherwise
    /// lost its request to the flood while its thread was busy with the flood's connections.
    received: AtomicBool,
    /// Closes it (dropped, not drained) when a newer client needs its place.
    evict: Notify,
    /// Its place under the connection cap, released when it ends, or taken over at once by
    /// the newcomer that evicted it (see [`Open::evict_oldest_waiting`]).
    place: Mutex<Option<OwnedSemaphorePermit>>,
}

/// Counts a request on its connection until dropped with the response's body.
struct Answering(Arc<Slot>);

impl Answering {
    fn start(slot: &Arc<Slot>) -> Self {
        slot.answering.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(slot))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        let slot = &self.0;
        slot.waiting_since
            .store(millis_since(slot.epoch), Ordering::SeqCst);
        slot.served.store(true, Ordering::SeqCst);
        slot.answering.fetch_sub(1, Ordering::SeqCst);
    }
}

fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A connection's stream that marks its slot once the client has sent a byte.
struct Received {
    stream: tokio::net::TcpStream,
    slot: Arc<Slot>,
}

impl tokio::io::AsyncRead for Received {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = std::pin::Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before && !self.slot.received.load(Ordering::Relaxed) {
            self.slot.received.store(true, Ordering::SeqCst);
        }
        read
    }
}

impl tokio::io::AsyncWrite for Received {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// What making room for a newcomer at the cap gave.
enum Evicted {
    /// The evicted connection's place, for the newcomer.
    Place(OwnedSemaphorePermit),
    /// A connection was evicted; its place comes back when it has closed.
    PlaceFreedOnClose,
    /// Every connection is answering a request or not yet read.
    Nobody,
}

/// The open connections, oldest first.
struct Open {
    epoch: Instant,
    next: u64,
    slots: BTreeMap<u64, Arc<Slot>>,
    /// The cap on connections: places, each held by a connection in `slots` or by one evicted
    /// that has not closed yet.
    cap: usize,
    /// Evicted connections whose place a newcomer took before they closed: they still hold a
    /// socket, so at most `max_closing` of them at once.
    closing: usize,
    max_closing: usize,
}

impl Open {
    fn new(cap: usize, max_closing: usize) -> Self {
        Self {
            epoch: Instant::now(),
            next: 0,
            slots: BTreeMap::new(),
            cap,
            closing: 0,
            max_closing,
        }
    }

    fn add(&mut self, place: OwnedSemaphorePermit) -> (u64, Arc<Slot>) {
        let id = self.next;
        self.next += 1;
        let slot = Arc::new(Slot {
            epoch: self.epoch,
            waiting_since: AtomicU64::new(millis_since(self.epoch)),
            answering: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            read: AtomicBool::new(false),
            received: AtomicBool::new(false),
            evict: Notify::new(),
            place: Mutex::new(Some(place)),
        });
        self.slots.insert(id, Arc::clone(&slot));
        (id, slot)
    }

    /// Closes every connection that has waited longer than `deadline` for a request's headers.
    fn close_stalled(&mut self, deadline: Duration) {
        let now = millis_since(self.epoch);
        let deadline = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        self.slots.retain(|_, slot| {
            let stalled = slot.answering.load(Ordering::SeqCst) == 0
                && now.saturating_sub(slot.waiting_since.load(Ordering::SeqCst)) > deadline;
            if stalled {
                slot.evict.notify_one();
            }
            !stalled
        });
    }

    /// Closes the oldest connection that is not answering a request, if there is one,
    /// preferring one that was never served and has sent something: a client holding many
    /// connections open in their headers (slowloris) then churns through its own connections,
    /// a new client whose request has not reached its thread yet keeps its place, and a kept-alive client
    /// idle between two requests keeps its place instead of queueing behind the attacker's
    /// connects for a new one. A kept-alive connection goes only when every other one is
    /// answering and every place is held by an open connection: while a new one is still
    /// unread, this waits for its first read instead, and while an evicted one still holds its
    /// place, for it to close.
    ///
    /// Returns its place for the newcomer, who then need not wait for the evicted connection's
    /// thread to close it: under a slowloris flood every accept evicts, and that round trip
    /// between threads set the pace at which the accept queue (with a well-behaved client's
    /// connect somewhere in it) drained.
    fn evict_oldest_waiting(&mut self) -> Evicted {
        let idle = |slot: &Slot| slot.answering.load(Ordering::SeqCst) == 0;
        let read = |slot: &Slot| slot.read.load(Ordering::SeqCst);
        let never_served = |slot: &Slot| !slot.served.load(Ordering::SeqCst);
        let received = |slot: &Slot| slot.received.load(Ordering::SeqCst);
        let evictable = |slot: &Slot| never_served(slot) && read(slot) && idle(slot);
        let mut waiting = self
            .slots
            .iter()
            .find(|(_, slot)| evictable(slot) && received(slot))
            .map(|(id, _)| *id);
        if waiting.is_none() {
            // An unread one may turn out to have sent something: it is waited for before a
            // connection that has sent nothing, or a kept-alive one, goes.
            if self.slots.values().any(|slot| !read(slot)) {
                return Evicted::Nobody;
            }
            waiting = self
                .slots
                .iter()
                .find(|(_, slot)| evictable(slot))
                .map(|(id, _)| *id);
            // Under a slowloris flood the table can hold only the kept-alive clients for a
            // moment, the attacker's places still held by connections closing: one of those
            // frees a place in a moment, so a kept-alive client is not closed for it.
            if waiting.is_none() && self.slots.len() >= self.cap {
                waiting = self
                    .slots
                    .iter()
                    .find(|(_, slot)| idle(slot))
                    .map(|(id, _)| *id);
            }
        }
        let Some(slot) = waiting.and_then(|id| self.slots.remove(&id)) else {
            return Evicted::Nobody;
        };
        slot.evict.notify_one();
        if self.closing >= self.max_closing {
            return Evicted::PlaceFreedOnClose;
        }
        match lock(&slot.place).take() {
            Some(place) => {
                self.closing += 1;
                Evicted::Place(place)
            }
            None => Evicted::PlaceFreedOnClose,
        }
    }

    /// Forgets connection `id` once it has closed, releasing its place if still its own.
    fn closed(&mut self, id: u64, slot: &Slot) {
        self.slots.remove(&id);
        if lock(&slot.place).take().is_none() {
            // Its place went to the newcomer that evicted it.
            self.closing -= 1;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // What these guard stays consistent even if a holder panicked: every change is one insert,
    // remove or take.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The threads that serve connections, one per core, each with a single-threaded runtime of
/// its own; connections are dealt to them in turn and stay on theirs to the end.
///
/// The one glibc workaround kept, because it holds up the throughput row (guidance without an
/// image at 32 connections, as a share of a hello-world axum): on the multi-threaded runtime's
/// workers a connection's task moves between threads as they steal work, so a request's buffers
/// are allocated on one thread and freed on another (glibc then locks the other thread's arena,
/// and the two threads wait on each other). Issue 32's bench, same run: 0.58 of the hello-world
/// and 21.6 µs of server CPU a request here, 0.42 and 30.1 µs on the workers. What a handler
/// spawns (an action's job) runs on its connection's thread. The price: a request's own work
/// holds up the other connections of its thread while it runs (parsing a body at the 3 MB cap
/// takes a few milliseconds); sanitising an image runs on the blocking pool.
struct ConnectionThreads {
    handles: Vec<tokio::runtime::Handle>,
    next: usize,
    /// Dropped with this value, which ends every thread's runtime and with it what it still
    /// serves (as dropping the process's runtime did).
    _stop: tokio::sync::watch::Sender<()>,
}

impl ConnectionThreads {
    fn start() -> std::io::Result<Self> {
        let count = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let (stop, stopped) = tokio::sync::watch::channel(());
        let mut handles = Vec::with_capacity(count);
        for n in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(runtime.handle().clone());
            let mut stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("msguide-conn-{n}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        // Err: the sender is gone, which is the signal.
                        while stopped.changed().await.is_ok() {}
                    });
                })?;
        }
        Ok(Self {
            handles,
            next: 0,
            _stop: stop,
        })
    }

    /// The thread the next connection goes to.
    fn next(&mut self) -> &tokio::runtime::Handle {
        let handle = &self.handles[self.next % self.handles.len()];
        self.next = self.next.wrapping_add(1);
        handle
    }
}

/// Connections the kernel holds for `accept`: more than a slowloris client opens at once (a
/// thousand), so a well-behaved client's connection is queued, not dropped and retried a
/// second later (the standard library's 128 fills under such a flood).
const LISTEN_BACKLOG: u32 = 4096;

/// Largest read buffer of one connection: far above any request head the boundary lets through.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Listens on `address` with [`LISTEN_BACKLOG`].
///
/// # Errors
/// The socket's, when the address cannot be bound.
pub fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does on Unix: a restart may bind while old connections linger.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Closes the connections stalled in their headers, checking four times per deadline, until
/// dropped.
struct Sweep(tokio::task::JoinHandle<()>);

impl Sweep {
    fn start(open: &Arc<Mutex<Open>>, deadline: Duration) -> Self {
        let open = Arc::clone(open);
        let period = (deadline / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        Self(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                lock(&open).close_stalled(deadline);
            }
        }))
    }
}

impl Drop for Sweep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains for a bounded time.
/// Connections are accepted here and served on [`ConnectionThreads`] of their own.
///
/// # Errors
/// The runtime's, when a connection thread cannot be started.
pub async fn serve<S>(
    listener: TcpListener,
    app: S,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        // The deadline is the sweep's (see the module's comment).
        .header_read_timeout(None)
        // Each connection's read buffer is capped (hyper's default is about 400 KB), so the
        // start of a large body that waits for its place (see the boundary) holds at most this
        // much per connection.
        .max_buf_size(READ_BUFFER_BYTES)
        .keep_alive(true);
    tokio::pin!(shutdown);
    let mut threads = ConnectionThreads::start()?;
    let open = Arc::new(Mutex::new(Open::new(
        limits.max_connections,
        limits.max_connections,
    )));
    let _sweep = Sweep::start(&open, limits.header_timeout);
    // Signalled when a connection has been read once and so may be evicted.
    let first_reads = Arc::new(Notify::new());
    'accepting: loop {
        // Accepting is never held up by the cap, so the listen backlog cannot fill with a
        // hostile client's connections ahead of a well-behaved one's.
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break 'accepting,
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
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => break 'accepting,
            // At the cap: this client takes the place of the connection that has waited longest
            // for a request (a slow or idle one). When all are answering (or not yet read), it
            // waits for one to end (or to be read).
            Err(TryAcquireError::NoPermits) => loop {
                let evicted = lock(&open).evict_oldest_waiting();
                let nobody = match evicted {
                    Evicted::Place(place) => break place,
                    Evicted::PlaceFreedOnClose => false,
                    Evicted::Nobody => true,
                };
                tokio::select! {
                    () = &mut shutdown => break 'accepting,
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => break permit,
                        Err(_closed) => break 'accepting,
                    },
                    // Someone may be evictable now: look again.
                    () = first_reads.notified(), if nobody => {}
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // Registered with the reactor of the thread that serves it, so it leaves this one's
        // (an error here is a failed deregistration: the connection is dropped like a reset).
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let (id, slot) = lock(&open).add(permit);
        let app = app.clone();
        let answering = Arc::clone(&slot);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let answer = Answering::start(&answering);
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            let response = app.clone().oneshot(request.map(axum::body::Body::new));
            async move {
                let Ok(response) = response.await;
                // The count ends when hyper drops the body, after its last byte is written.
                Ok::<_, std::convert::Infallible>(response.map(move |body| {
                    body.map_frame(move |frame| {
                        let _ = &answer;
                        frame
                    })
                }))
            }
        });
        let open = Arc::clone(&open);
        let first_reads = Arc::clone(&first_reads);
        let builder = builder.clone();
        let watcher = graceful.watcher();
        threads.next().spawn(async move {
            if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                let stream = Received {
                    stream,
                    slot: Arc::clone(&slot),
                };
                let mut connection =
                    pin!(watcher.watch(builder.serve_connection(TokioIo::new(stream), service)));
                let mut unread = true;
                let connection = std::future::poll_fn(|cx| {
                    let served = connection.as_mut().poll(cx);
                    if std::mem::take(&mut unread) {
                        // A request sent with the connect is now being answered (or the
                        // connection is over): from here on it may be evicted.
                        slot.read.store(true, Ordering::SeqCst);
                        first_reads.notify_one();
                    }
                    served
                });
                tokio::select! {
                    // The connection first: it is what wakes this task at every request.
                    biased;
                    _ = connection => {}
                    () = slot.evict.notified() => {}
                }
            }
            lock(&open).closed(id, &slot);
        });
    }
    let _ = tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await;
    Ok(())
}

#[cfg(test)]
// The test reads the serving thread's /proc entry.
#[cfg(target_os = "linux")]
mod tests {
    use std::time::Duration;

    use axum::{Router, routing::get};
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::TcpStream,
    };

    use super::*;

    /// Sends `GET /` on `stream` and returns the answer's body: the thread that served it.
    async fn served_by(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0_u8; 1024];
        // The answer is complete when its body (the handler's thread name, ending in "|")
        // has arrived.
        while !answer.ends_with(b"|") {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed the connection mid-answer");
            answer.extend_from_slice(&chunk[..n]);
        }
        let text = String::from_utf8(answer).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        body.trim_end_matches('|').to_owned()
    }

    #[tokio::test]
    async fn a_connection_stays_on_one_thread_and_the_threads_end_with_the_server() {
        let app = Router::new().route(
            "/",
            get(|| async {
                // The thread's name and its entry under /proc (`<pid>/task/<tid>`).
                let task = std::fs::read_link("/proc/thread-self").unwrap_or_default();
                let name = std::thread::current()
                    .name()
                    .unwrap_or("unnamed")
                    .to_owned();
                format!("{name} /proc/{}|", task.display())
            }),
        );
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, app, ConnectionLimits::default(), async {
            let _ = stopped.await;
        }));

        let mut first = TcpStream::connect(address).await.unwrap();
        let mut second = TcpStream::connect(address).await.unwrap();
        let thread = served_by(&mut first).await;
        assert!(thread.starts_with("msguide-conn-"), "{thread}");
        for _ in 0..20 {
            assert_eq!(served_by(&mut first).await, thread);
        }
        // Dealt in turn: the next connection goes to the next thread (when there are two).
        let other = served_by(&mut second).await;
        assert!(other.starts_with("msguide-conn-"), "{other}");
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        if cores > 1 {
            assert_ne!(other, thread);
        }
        let tasks: Vec<String> = [&thread, &other]
            .iter()
            .map(|served| served.split_once(' ').unwrap().1.to_owned())
            .collect();
        let alive = || {
            tasks
                .iter()
                .filter(|t| std::path::Path::new(t).exists())
                .count()
        };
        assert_eq!(alive(), 2, "{tasks:?}");

        drop((first, second));
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        // Threads that outlived their server would pile up in a process that serves again.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while alive() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(alive(), 0, "connection threads still running: {tasks:?}");
    }
    /// At the cap, a newcomer takes the place of a connection that was never served (here one
    /// stuck in its headers) before that of an older kept-alive one idle between requests.
    #[tokio::test]
    async fn at_the_cap_a_never_served_connection_goes_before_a_kept_alive_one() {
        let (address, running) = Running::start(2);

        let mut kept = TcpStream::connect(address).await.unwrap();
        assert_eq!(served_by(&mut kept).await, "ok");
        let mut stuck = TcpStream::connect(address).await.unwrap();
        stuck
            .write_all(b"GET / HTTP/1.1\r\nHost: loc")
            .await
            .unwrap();
        // The server has taken both connections before the newcomer arrives.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut newcomer = TcpStream::connect(address).await.unwrap();
        assert_eq!(served_by(&mut newcomer).await, "ok");
        // The stuck one was closed; the kept-alive one, older, is still served.
        let mut rest = [0_u8; 64];
        let closed = tokio::time::timeout(Duration::from_secs(5), stuck.read(&mut rest)).await;
        assert!(matches!(closed, Ok(Ok(0) | Err(_))), "{closed:?}");
        assert_eq!(served_by(&mut kept).await, "ok");

        drop((kept, newcomer));
        running.stop().await;
    }

    /// At the cap, a client whose request has not reached its thread yet keeps its place while
    /// connections that sent something (a slowloris flood's) churn through theirs.
    #[tokio::test]
    async fn a_client_whose_request_is_on_its_way_keeps_its_place_through_a_flood() {
        let (address, running) = Running::start(4);

        let mut late = TcpStream::connect(address).await.unwrap();
        // Its thread has polled it and found nothing to read.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut flood = Vec::new();
        for _ in 0..24 {
            let mut stream = TcpStream::connect(address).await.unwrap();
            stream.write_all(b"G").await.unwrap();
            flood.push(stream);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(served_by(&mut late).await, "ok");

        drop((late, flood));
        running.stop().await;
    }

    /// A server answering `GET /` with "ok|" under a cap of `max_connections`.
    struct Running {
        stop: tokio::sync::oneshot::Sender<()>,
        server: tokio::task::JoinHandle<std::io::Result<()>>,
    }

    impl Running {
        fn start(max_connections: usize) -> (SocketAddr, Self) {
            let app = Router::new().route("/", get(|| async { "ok|" }));
            let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
            let address = listener.local_addr().unwrap();
            let limits = ConnectionLimits {
                max_connections,
                ..ConnectionLimits::default()
            };
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let server = tokio::spawn(serve(listener, app, limits, async {
                let _ = stopped.await;
            }));
            (address, Self { stop, server })
        }

        async fn stop(self) {
            self.stop.send(()).unwrap();
            self.server.await.unwrap().unwrap();
        }
    }

    /// A kept-alive connection is spared while an evicted connection still holds a place (a
    /// slowloris flood's churn), and goes only once every place is an open connection's.
    #[test]
    fn a_kept_alive_connection_is_not_evicted_while_a_closing_one_holds_a_place() {
        let places = Arc::new(Semaphore::new(3));
        let place = || Arc::clone(&places).try_acquire_owned().unwrap();
        // No place is handed over: each evicted connection keeps its own until it closes.
        let mut open = Open::new(3, 0);
        let (kept_id, kept) = open.add(place());
        kept.read.store(true, Ordering::SeqCst);
        kept.served.store(true, Ordering::SeqCst);
        let (slow_id, slow) = open.add(place());
        slow.read.store(true, Ordering::SeqCst);
        slow.received.store(true, Ordering::SeqCst);
        let (_, answering) = open.add(place());
        answering.read.store(true, Ordering::SeqCst);
        answering.answering.store(1, Ordering::SeqCst);

        assert!(matches!(
            open.evict_oldest_waiting(),
            Evicted::PlaceFreedOnClose
        ));
        assert!(!open.slots.contains_key(&slow_id));
        // The slowloris connection has not closed yet, so its place is about to be free: the
        // newcomer waits for it rather than closing the kept-alive client.
        assert!(matches!(open.evict_oldest_waiting(), Evicted::Nobody));
        assert!(open.slots.contains_key(&kept_id));

        open.closed(slow_id, &slow);
        let (_, busy) = open.add(place());
        busy.read.store(true, Ordering::SeqCst);
        busy.answering.store(1, Ordering::SeqCst);
        // Every place is an open connection's and all but the kept-alive one are answering.
        assert!(matches!(
            open.evict_oldest_waiting(),
            Evicted::PlaceFreedOnClose
        ));
        assert!(!open.slots.contains_key(&kept_id));
    }

    /// The eviction rules on the table of open connections itself.
    #[test]
    fn eviction_spares_unread_and_kept_alive_connections_and_hands_over_places() {
        let places = Arc::new(Semaphore::new(8));
        let place = || Arc::clone(&places).try_acquire_owned().unwrap();
        let mut open = Open::new(2, 1);
        let (kept_id, kept) = open.add(place());
        kept.read.store(true, Ordering::SeqCst);
        kept.served.store(true, Ordering::SeqCst);
        let (unread_id, unread) = open.add(place());
        // A connection not yet read may hold a request sent with its connect; the kept-alive
        // one is not evicted in its stead either.
        assert!(matches!(open.evict_oldest_waiting(), Evicted::Nobody));
        assert_eq!(open.slots.len(), 2);

        unread.read.store(true, Ordering::SeqCst);
        // One that has sent something (a slowloris client's) goes before an older one whose
        // request has not arrived yet.
        let (sent_id, sent) = open.add(place());
        sent.read.store(true, Ordering::SeqCst);
        sent.received.store(true, Ordering::SeqCst);
        assert!(matches!(open.evict_oldest_waiting(), Evicted::Place(_)));
        assert!(!open.slots.contains_key(&sent_id) && open.slots.contains_key(&unread_id));
        open.closed(sent_id, &sent);
        let (_, answering) = open.add(place());
        answering.read.store(true, Ordering::SeqCst);
        answering.answering.store(1, Ordering::SeqCst);
        // The never-served idle one goes first, and its place comes with it.
        assert!(matches!(open.evict_oldest_waiting(), Evicted::Place(_)));
        assert!(!open.slots.contains_key(&unread_id));
        assert_eq!(open.closing, 1);
        // At the bound of connections still closing, the next one keeps its place until closed.
        assert!(matches!(
            open.evict_oldest_waiting(),
            Evicted::PlaceFreedOnClose
        ));
        assert!(!open.slots.contains_key(&kept_id));
        assert!(lock(&kept.place).is_some());
        // Closing: the handed-over one ends the count, the other gives its place back.
        let before = places.available_permits();
        open.closed(unread_id, &unread);
        assert_eq!(open.closing, 0);
        open.closed(kept_id, &kept);
        assert_eq!(places.available_permits(), before + 1);
        // Only the answering one is left, and it stays.
        assert!(matches!(open.evict_oldest_waiting(), Evicted::Nobody));
    }
}
