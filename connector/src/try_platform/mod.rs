//! `autogpt-shim try`: a small platform on this machine to try the connector against, shipped
//! in the same binary so that whoever has the connector has it too (no second program to find,
//! and its protocol is the connector's own, so the two cannot drift apart).
//!
//! It serves PROTOCOL.md's endpoints on 127.0.0.1: the control endpoint `/ws/local-executor`
//! and the data endpoint `/ws/local-executor/{session_id}`. Each dial must carry the bearer
//! token of a 0600 file it keeps in the state directory (`try/token`, made on first use) or
//! reads from `--token-file`; anything else is refused with HTTP 401, as the real platform
//! refuses a bad token. It answers HELLO with a HELLO_ACK granting what the connector offers,
//! then turns the lines a person types (or `--send` gives) into requests, printing each
//! request and each answer as it happens. A screenshot is saved next to the token.
//!
//! Layout: this file holds the listener, one task per connection and the loop that sends what
//! is typed; `lines.rs` understands a typed line (and the menu of ready requests); `show.rs`
//! prints a frame in one line and the hint for a common refusal. Nothing here prints to the
//! terminal itself: every line goes to the writer `main` passes in.

mod lines;
mod show;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use local_core::machine::own_files;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Message as WsMessage, Utf8Bytes};

use crate::cli::{Cli, TryArgs};
use crate::config::{self, Env};
use crate::link::Token;
use crate::preflight::shell_quote;
use crate::protocol::{close_code, is_valid_session_id};
use crate::ws::websocket_config;
use lines::{Action, Target};
use local_core::io_words::io_words;

/// The session id the printed command uses unless `--session-id` names another.
pub const DEFAULT_SESSION: &str = "try-it";
/// How long the connector has to send HELLO after the upgrade.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// How long a request waits for its reply: past the longest command timeout (30 s) and a
/// screenshot of a large desktop.
const REPLY_WAIT: Duration = Duration::from_secs(120);
/// The close code the try platform leaves with: the connector reconnects until stopped.
const GOING_AWAY: u16 = 1001;

/// Runs `autogpt-shim try` to its end: 0 after `quit` (or the end of the input), 1 when a
/// `--send` request was answered with an ERROR, 78 when it cannot start (port in use, no
/// state directory, an unusable token file). `input` is what the person types, `out` where
/// everything is shown.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the input moves to its reading thread"
)]
pub fn main(
    cli: &Cli,
    args: &TryArgs,
    env: &impl Env,
    input: Box<dyn BufRead + Send>,
    out: Box<dyn Write + Send>,
) -> u8 {
    let console = Console(Arc::new(Mutex::new(out)));
    let setup = match Setup::new(cli, args, env) {
        Ok(setup) => setup,
        Err(problem) => {
            console.say(&format!("autogpt-shim try: {problem}"));
            return crate::cli::EXIT_PREFLIGHT;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            console.say(&format!(
                "autogpt-shim try: cannot start the runtime ({}): close some programs and try again",
                io_words(&err)
            ));
            return crate::cli::EXIT_PREFLIGHT;
        }
    };
    let code = runtime.block_on(run(setup, input, console));
    // A blocking read of the terminal cannot be interrupted; nothing waits for it now.
    runtime.shutdown_background();
    code
}

/// What the try platform needs before it listens.
struct Setup {
    port: u16,
    session: String,
    token: Token,
    token_file: PathBuf,
    /// Where screenshots go: the token's folder.
    folder: PathBuf,
    allowed_root: Option<PathBuf>,
    program: PathBuf,
    send: Vec<String>,
}

impl Setup {
    fn new(cli: &Cli, args: &TryArgs, env: &impl Env) -> Result<Self, String> {
        let session = cli
            .session_id
            .clone()
            .filter(|id| !id.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned());
        if !is_valid_session_id(&session) {
            return Err("--session-id must be 1-256 letters, digits, '.', '_', ':' or '-', starting with a letter or digit".to_owned());
        }
        let folder = config::state_dir(env)
            .ok_or("no state directory to keep the token in: set HOME or XDG_STATE_HOME")?
            .join("try");
        let token_file = match &cli.token_file {
            Some(path) => path.clone(),
            None => {
                let path = folder.join("token");
                mint_token(&path)?;
                path
            }
        };
        let token = config::read_token_file(&token_file).map_err(|err| err.to_string())?;
        // The allowed root the printed command names: the configured one (flags,
        // environment, config file), or the default.
        let allowed_root = config::load_all(&crate::cli::overrides(cli), env)
            .config
            .allowed_root;
        Ok(Self {
            port: args.port,
            session,
            token,
            token_file,
            folder,
            allowed_root,
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("autogpt-shim")),
            send: args.send.clone(),
        })
    }
}

/// Makes the token file at `path` (0600) unless it already holds a token, so a connector
/// started against an earlier run of `try` still gets in.
fn mint_token(path: &Path) -> Result<(), String> {
    if config::read_token_file(path).is_ok() {
        return Ok(());
    }
    let mut bytes = [0u8; 32];
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut bytes)
        .map_err(|_| "the system's random source failed: try again".to_owned())?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    own_files::write_atomic(
        path,
        format!("{token}\n").as_bytes(),
        own_files::PRIVATE_FILE_MODE,
    )
    .map_err(|err| {
        format!(
            "cannot write the token file {} ({}): check that the state folder is yours, or pass --token-file with a token file of your own",
            path.display(),
            io_words(&err)
        )
    })
}

/// Where every line goes: one writer, shared by the connections and the typing loop.
#[derive(Clone)]
struct Console(Arc<Mutex<Box<dyn Write + Send>>>);

impl Console {
    fn say(&self, text: &str) {
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A closed terminal leaves nobody to tell.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

/// One open connection, as the typing loop reaches it.
#[derive(Clone)]
struct Link {
    id: u32,
    sender: mpsc::UnboundedSender<WsMessage>,
}

/// A request waiting for its reply.
struct Pending {
    link: u32,
    sent: Instant,
    reply: oneshot::Sender<Value>,
}

/// What the connections and the typing loop share.
struct Shared {
    console: Console,
    token: Token,
    session: String,
    data: Mutex<Option<Link>>,
    control: Mutex<Option<Link>>,
    pending: Mutex<HashMap<String, Pending>>,
    connected: Notify,
    next_link: AtomicU32,
}

impl Shared {
    fn link(&self, target: Target) -> Option<Link> {
        let slot = match target {
            Target::Data => &self.data,
            Target::Control => &self.control,
        };
        slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

async fn run(setup: Setup, input: Box<dyn BufRead + Send>, console: Console) -> u8 {
    let addr = SocketAddr::from(([127, 0, 0, 1], setup.port));
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(err) => {
            console.say(&format!(
                "autogpt-shim try: cannot listen on {addr} ({}): another `autogpt-shim try` may be running there; stop it, or pick another port with --port",
                io_words(&err)
            ));
            return crate::cli::EXIT_PREFLIGHT;
        }
    };
    let url = match listener.local_addr() {
        Ok(bound) => format!("ws://{bound}"),
        Err(_) => format!("ws://{addr}"),
    };
    banner(&setup, &url, &console);
    let shared = Arc::new(Shared {
        console: console.clone(),
        token: setup.token.clone(),
        session: setup.session.clone(),
        data: Mutex::new(None),
        control: Mutex::new(None),
        pending: Mutex::new(HashMap::new()),
        connected: Notify::new(),
        next_link: AtomicU32::new(1),
    });
    let accepting = Arc::clone(&shared);
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((tcp, _)) => {
                    tokio::spawn(serve(tcp, Arc::clone(&accepting)));
                }
                Err(err) => {
                    accepting.console.say(&format!(
                        "could not accept a connection ({}); still listening",
                        io_words(&err)
                    ));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    let scripted = !setup.send.is_empty();
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    if scripted {
        // `--send`: once a data connection is up, each line in turn, then quit.
        loop {
            if shared.link(Target::Data).is_some() {
                break;
            }
            shared.connected.notified().await;
        }
        for line in &setup.send {
            let _ = lines_tx.send(line.clone());
        }
        let _ = lines_tx.send("quit".to_owned());
    } else {
        // The terminal is read on its own thread: the connections keep the runtime.
        std::thread::spawn(move || {
            for line in input.lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let mut session = Typing {
        shared: Arc::clone(&shared),
        folder: setup.folder,
        count: 0,
        failures: 0,
        listing: None,
    };
    while let Some(line) = lines.recv().await {
        match lines::parse(&line) {
            Ok(Action::Quit) => break,
            Ok(action) => session.act(action).await,
            Err(problem) => console.say(&problem),
        }
    }
    for target in [Target::Data, Target::Control] {
        if let Some(link) = shared.link(target) {
            let _ = link
                .sender
                .send(close(GOING_AWAY, "the try platform is closing"));
        }
    }
    // Give the close frames a moment to leave.
    tokio::time::sleep(Duration::from_millis(200)).await;
    console
        .say("Closed. A connector still running keeps trying to reconnect: stop it with Ctrl-C.");
    if scripted && session.failures > 0 {
        1
    } else {
        0
    }
}

fn banner(setup: &Setup, url: &str, console: &Console) {
    let program = shell_quote(&setup.program);
    let token = shell_quote(&setup.token_file);
    let root = setup
        .allowed_root
        .as_deref()
        .map_or_else(|| "~/autogpt-workspace".to_owned(), shell_quote);
    let mut text = format!(
        "autogpt-shim try: a platform on this machine to try the connector against; nothing leaves 127.0.0.1.\n\
         Listening on {url} (data endpoint /ws/local-executor/SESSION_ID, control endpoint /ws/local-executor).\n\
         Token: {token} (the connector must send it; any other dial is refused with HTTP 401).\n\
         \n\
         In a second terminal, start the connector against it, for a direct session:\n"
    );
    if setup
        .allowed_root
        .as_deref()
        .is_some_and(|root| own_files::look(root).is_err())
    {
        text.push_str(&format!("  mkdir -p {root}\n"));
    }
    text.push_str(&format!(
        "  {program} --platform-url {url} --token-file {token} --session-id {} --allowed-root {root} start --enable-shell\n\
         or for machine control mode (you pick the folder here, as a chat would):\n\
         \x20 {program} --platform-url {url} --token-file {token} start --enable-shell\n\
         \n\
         Waiting for the connector...",
        setup.session
    ));
    console.say(&text);
}

fn close(code: u16, reason: &str) -> WsMessage {
    WsMessage::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::from(reason),
    }))
}

/// What a dial asked for.
#[derive(Debug, Clone, Default)]
struct Asked {
    /// `None` for the control endpoint, the session id for a data endpoint.
    session: Option<String>,
    /// Why it was refused, if it was.
    refused: Option<String>,
}

/// One connection from upgrade to close.
async fn serve(tcp: TcpStream, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let asked = Arc::new(Mutex::new(Asked::default()));
    let record = Arc::clone(&asked);
    let checker = Arc::clone(&shared);
    // tungstenite's `Callback` fixes this error type.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &Request, response: Response| {
        let mut asked = record.lock().unwrap_or_else(PoisonError::into_inner);
        let path = request.uri().path();
        let session = match path.strip_prefix("/ws/local-executor") {
            Some("") => Some(None),
            Some(rest) => rest
                .strip_prefix('/')
                .filter(|id| is_valid_session_id(id))
                .map(|id| Some(id.to_owned())),
            None => None,
        };
        let bearer = request
            .headers()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let (status, why) = match (session, bearer) {
            (None, _) => (
                StatusCode::NOT_FOUND,
                format!("{path} is not an endpoint here (HTTP 404): use --platform-url ws://HOST:PORT without a path"),
            ),
            (Some(_), None) => (
                StatusCode::UNAUTHORIZED,
                "it carried no bearer token (HTTP 401): start the connector with the --token-file printed above".to_owned(),
            ),
            (Some(_), Some(token)) if !checker.token.matches(token) => (
                StatusCode::UNAUTHORIZED,
                "its bearer token is not this platform's (HTTP 401): start the connector with the --token-file printed above".to_owned(),
            ),
            (Some(session), Some(_)) => {
                asked.session = session;
                return Ok(response);
            }
        };
        asked.refused = Some(why);
        let mut refusal = ErrorResponse::new(None);
        *refusal.status_mut() = status;
        Err(refusal)
    };
    let upgraded =
        tokio_tungstenite::accept_hdr_async_with_config(tcp, callback, Some(websocket_config()))
            .await;
    let asked = asked.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let socket = match (upgraded, asked.refused) {
        (_, Some(why)) => {
            shared.console.say(&format!("Refused a connection: {why}."));
            return;
        }
        (Err(err), None) => {
            shared.console.say(&format!(
                "A dial failed before its WebSocket upgrade ({err}); waiting for the next one."
            ));
            return;
        }
        (Ok(socket), None) => socket,
    };
    let (mut sink, mut stream) = socket.split();
    // HELLO first.
    let hello = match tokio::time::timeout(HELLO_WAIT, stream.next()).await {
        Ok(Some(Ok(WsMessage::Text(text)))) => serde_json::from_str::<Value>(text.as_str()).ok(),
        _ => None,
    };
    let Some(hello) = hello.filter(|hello| hello["type"] == "HELLO") else {
        shared.console.say(
            "A connection sent no HELLO within 10 s; closed it (4400). Is that an autogpt-shim?",
        );
        let _ = sink
            .send(close(close_code::BAD_HANDSHAKE, "expected HELLO"))
            .await;
        return;
    };
    let link_id = shared.next_link.fetch_add(1, Ordering::Relaxed);
    let control = asked.session.is_none();
    let ack = acknowledge(&hello, asked.session.as_deref(), link_id);
    shared
        .console
        .say(&describe_hello(&hello, asked.session.as_deref(), &ack));
    if sink.send(WsMessage::text(ack.to_string())).await.is_err() {
        shared
            .console
            .say("The connector left before the HELLO_ACK.");
        return;
    }
    let (sender, mut outgoing) = mpsc::unbounded_channel();
    let link = Link {
        id: link_id,
        sender,
    };
    {
        let slot = if control {
            &shared.control
        } else {
            &shared.data
        };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some(link);
    }
    shared.console.say(&if control {
        lines::CONTROL_MENU.to_owned()
    } else {
        lines::data_menu()
    });
    shared.connected.notify_waiters();
    let ended = loop {
        tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(WsMessage::Text(text))) => received(&shared, text.as_str()),
                Some(Ok(WsMessage::Close(frame))) => {
                    break frame.map_or_else(
                        || "without a close code".to_owned(),
                        |frame| closed_words(u16::from(frame.code)),
                    );
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => break format!("with a transport error ({err})"),
                None => break "by dropping it".to_owned(),
            },
            message = outgoing.recv() => {
                let Some(message) = message else { break String::new() };
                let closing = matches!(message, WsMessage::Close(_));
                if sink.send(message).await.is_err() || closing {
                    // Closed from this side: `quit` says so itself.
                    break String::new();
                }
            }
        }
    };
    // This connection's requests will get no reply; their senders are dropped.
    shared
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|_, pending| pending.link != link_id);
    let slot = if control {
        &shared.control
    } else {
        &shared.data
    };
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.as_ref().is_some_and(|link| link.id == link_id) {
        *slot = None;
        drop(slot);
        if ended.is_empty() {
            return;
        }
        let what = if control { "control" } else { "data" };
        shared.console.say(&format!(
            "The connector closed its {what} connection {ended}."
        ));
    }
}

fn closed_words(code: u16) -> String {
    match close_code::label(code) {
        Some(label) => format!("(close {code}, {label})"),
        None if code == GOING_AWAY => format!("(close {code}: it is stopping)"),
        None => format!("(close {code})"),
    }
}

/// The HELLO_ACK for `hello`: every capability it offers granted (but `directory_browse`
/// only on the control connection), the protocol's default limits.
fn acknowledge(hello: &Value, session: Option<&str>, link: u32) -> Value {
    let offered = hello["payload"]["capabilities"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let granted: Vec<Value> = offered
        .into_iter()
        .filter(|cap| session.is_none() || cap != "directory_browse")
        .collect();
    json!({
        "type": "HELLO_ACK",
        "id": hello["id"],
        "ts": now(),
        "version": "1.1",
        "payload": {
            "session_id": session,
            "connection_id": session.is_none().then(|| format!("try-control-{link}")),
            "protocol_version": "1.1",
            "granted_capabilities": granted,
            "max_file_size_bytes": 10_485_760,
            "command_timeout_seconds": 30,
            "max_concurrent": 4
        }
    })
}

fn describe_hello(hello: &Value, session: Option<&str>, ack: &Value) -> String {
    let payload = &hello["payload"];
    let text = |key: &str| payload[key].as_str().unwrap_or("?").to_owned();
    let what = session.map_or_else(
        || "the control connection (machine control mode)".to_owned(),
        |id| format!("a data connection for session {id}"),
    );
    let root = payload["allowed_root"]
        .as_str()
        .map_or_else(|| "none (control)".to_owned(), str::to_owned);
    format!(
        "\nConnected: {what}.\n<- HELLO from {} ({} {}, connector {}), allowed root {root}, offers {}\n-> HELLO_ACK grants {}",
        text("display_name"),
        text("platform"),
        text("arch"),
        text("shim_version"),
        payload["capabilities"],
        ack["payload"]["granted_capabilities"]
    )
}

/// A frame from the connector: shown, and handed to the request waiting for it.
fn received(shared: &Shared, text: &str) {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        shared.console.say("<- a frame that is not JSON (ignored)");
        return;
    };
    let kind = frame["type"].as_str().unwrap_or("?").to_owned();
    let id = frame["id"].as_str().unwrap_or_default().to_owned();
    let brief = show::brief(&frame["payload"]);
    if kind == "STATUS" {
        shared.console.say(&format!("<- STATUS {brief}"));
        return;
    }
    // Streamed pieces share the request's id; the reply is the last frame.
    let last = !kind.ends_with("_CHUNK");
    let pending = if last {
        shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
    } else {
        None
    };
    let took = pending.as_ref().map_or_else(String::new, |pending| {
        format!(" ({} ms)", pending.sent.elapsed().as_millis())
    });
    shared.console.say(&format!("<- {kind} {id}{took} {brief}"));
    if let Some(hint) = show::hint(&frame) {
        shared.console.say(&format!("   {hint}"));
    }
    if let Some(pending) = pending {
        let _ = pending.reply.send(frame);
    }
}

/// The typing side: sends what is typed and follows up on some replies.
struct Typing {
    shared: Arc<Shared>,
    folder: PathBuf,
    count: u32,
    /// Replies that were ERRORs (`--send`'s exit code).
    failures: u32,
    /// The last DIRECTORY_LIST_RESPONSE's browse id and its entries' references.
    listing: Option<(String, Vec<Value>)>,
}

impl Typing {
    async fn act(&mut self, action: Action) {
        match action {
            Action::Nothing | Action::Quit => {}
            Action::Help => {
                let menu = if self.shared.link(Target::Data).is_some() {
                    lines::data_menu()
                } else if self.shared.link(Target::Control).is_some() {
                    lines::CONTROL_MENU.to_owned()
                } else {
                    format!(
                        "No connector is connected yet; start it with the command above.\n{}",
                        lines::data_menu()
                    )
                };
                self.shared.console.say(&menu);
            }
            Action::Request {
                target,
                kind,
                payload,
            } => {
                if let Some(reply) = self.request(target, &kind, payload).await
                    && reply["type"] == "SCREENSHOT_RESPONSE"
                {
                    self.save_screenshot(&reply);
                }
            }
            Action::Folders(entry) => {
                let payload = match entry {
                    None => json!({"browse_id": null, "directory_ref": null}),
                    Some(n) => match self.entry(n) {
                        Some((browse, reference)) => {
                            json!({"browse_id": browse, "directory_ref": reference})
                        }
                        None => return,
                    },
                };
                if let Some(reply) = self
                    .request(Target::Control, "DIRECTORY_LIST_REQUEST", payload)
                    .await
                {
                    self.remember(&reply);
                }
            }
            Action::Use(n) => self.attach(n).await,
        }
    }

    /// Sends one request and waits for its reply (shown by the connection's task).
    async fn request(&mut self, target: Target, kind: &str, payload: Value) -> Option<Value> {
        let Some(link) = self.shared.link(target) else {
            let missing = match target {
                Target::Data if self.shared.link(Target::Control).is_some() => {
                    "no data connection yet: pick a folder first (folders, then use N)"
                }
                Target::Data => "no connector is connected yet: start it with the command above",
                Target::Control => {
                    "no control connection: start the connector without --session-id for machine control mode"
                }
            };
            self.shared.console.say(missing);
            return None;
        };
        self.count += 1;
        let id = format!("try-{}", self.count);
        let envelope =
            json!({"type": kind, "id": id, "ts": now(), "version": "1.1", "payload": payload});
        let (reply_tx, reply_rx) = oneshot::channel();
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Pending {
                    link: link.id,
                    sent: Instant::now(),
                    reply: reply_tx,
                },
            );
        self.shared
            .console
            .say(&format!("-> {kind} {id} {}", show::brief(&payload)));
        if link
            .sender
            .send(WsMessage::text(envelope.to_string()))
            .is_err()
        {
            self.shared.console.say("   the connection has just closed");
            return None;
        }
        match tokio::time::timeout(REPLY_WAIT, reply_rx).await {
            Ok(Ok(reply)) => {
                if reply["type"] == "ERROR" {
                    self.failures += 1;
                }
                Some(reply)
            }
            Ok(Err(_)) => {
                self.shared
                    .console
                    .say(&format!("   no reply to {id}: the connection closed first"));
                self.failures += 1;
                None
            }
            Err(_) => {
                self.shared
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                self.shared.console.say(&format!(
                    "   no reply to {id} within {} s; type the next request",
                    REPLY_WAIT.as_secs()
                ));
                self.failures += 1;
                None
            }
        }
    }

    /// Numbers the entries of a listing and keeps their references for `folders N`/`use N`.
    fn remember(&mut self, reply: &Value) {
        if reply["type"] != "DIRECTORY_LIST_RESPONSE" {
            return;
        }
        let payload = &reply["payload"];
        let entries = payload["entries"].as_array().cloned().unwrap_or_default();
        let mut text = String::new();
        for (n, entry) in entries.iter().enumerate() {
            text.push_str(&format!(
                "  {:>3}  {}  ({})\n",
                n + 1,
                entry["name"].as_str().unwrap_or("?"),
                entry["path"].as_str().unwrap_or("?")
            ));
        }
        text.push_str(if entries.is_empty() {
            "  (no folder here you may pick)"
        } else {
            "folders N lists inside entry N; use N picks it for the session"
        });
        self.shared.console.say(&text);
        let browse = payload["browse_id"].as_str().unwrap_or_default().to_owned();
        self.listing = Some((browse, entries));
    }

    /// The browse id and the reference of entry `n` of the last listing.
    fn entry(&self, n: usize) -> Option<(String, Value)> {
        let found = self.listing.as_ref().and_then(|(browse, entries)| {
            entries
                .get(n - 1)
                .map(|entry| (browse.clone(), entry["directory_ref"].clone()))
        });
        if found.is_none() {
            self.shared.console.say(&format!(
                "there is no entry {n}: type folders for a listing first"
            ));
        }
        found
    }

    /// ATTACH_SESSION and ACTIVATE_SESSION of entry `n`: the connector then dials the data
    /// endpoint for the session, jailed to that folder.
    async fn attach(&mut self, n: usize) {
        let Some((browse, reference)) = self.entry(n) else {
            return;
        };
        let session = self.shared.session.clone();
        let attach = json!({"session_id": session, "browse_id": browse, "directory_ref": reference, "expected_connection_id": null});
        let Some(attached) = self
            .request(Target::Control, "ATTACH_SESSION", attach)
            .await
        else {
            return;
        };
        if attached["type"] != "SESSION_ATTACHED" {
            return;
        }
        self.listing = None;
        let revision = attached["payload"]["revision"].clone();
        let activate = json!({"session_id": session, "revision": revision});
        if let Some(reply) = self
            .request(Target::Control, "ACTIVATE_SESSION", activate)
            .await
            && reply["type"] == "SESSION_ACTIVATED"
        {
            self.shared.console.say(&format!(
                "   session {session} is active: its data connection follows"
            ));
        }
    }

    fn save_screenshot(&self, reply: &Value) {
        let payload = &reply["payload"];
        let Some(encoded) = payload["image_base64"].as_str() else {
            return;
        };
        let extension = match payload["mime_type"].as_str() {
            Some("image/png") => "png",
            _ => "jpg",
        };
        let path = self
            .folder
            .join(format!("screenshot-{}.{extension}", self.count));
        let said = match base64::engine::general_purpose::STANDARD.decode(encoded) {
            Err(_) => "   the screenshot is not valid base64; not saved".to_owned(),
            Ok(bytes) => match own_files::write_atomic(&path, &bytes, own_files::PRIVATE_FILE_MODE)
            {
                Ok(()) => format!(
                    "   saved the {}x{} screenshot ({} bytes) to {}",
                    payload["width"],
                    payload["height"],
                    bytes.len(),
                    path.display()
                ),
                Err(err) => format!(
                    "   cannot save the screenshot to {} ({})",
                    path.display(),
                    io_words(&err)
                ),
            },
        };
        self.shared.console.say(&said);
    }
}

/// Now in epoch seconds, for the envelopes' `ts`.
fn now() -> f64 {
    crate::commands::status::epoch_seconds(std::time::SystemTime::now())
}
