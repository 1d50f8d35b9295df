//! The names of the `MSGUIDE_*` environment variables, defined once: the launcher sets them
//! for its children and the API, the desktop client and every child read them, so they cannot
//! disagree on a spelling. (The connector's `AUTOGPT_SHIM_*` names are its own, in
//! `autogpt-shim`'s `config` module.) A tidy test refuses the literal names anywhere else in
//! the programs' sources.

/// The launch's bearer token, which the API requires on `/v1` and `/admin`.
pub const LOCAL_TOKEN: &str = "MSGUIDE_LOCAL_TOKEN";
/// The API's mode; only `demo` exists.
pub const MODE: &str = "MSGUIDE_MODE";
/// The API's guidance provider: `demo` (the default) or `openai-compatible`.
pub const GUIDANCE_PROVIDER: &str = "MSGUIDE_GUIDANCE_PROVIDER";
/// The prefix of every model setting (the four below); the launcher keeps them all from the
/// desktop client.
pub const MODEL_PREFIX: &str = "MSGUIDE_MODEL_";
/// The OpenAI-compatible model's base URL.
pub const MODEL_URL: &str = "MSGUIDE_MODEL_URL";
/// The model's name.
pub const MODEL_NAME: &str = "MSGUIDE_MODEL_NAME";
/// The model's API key.
pub const MODEL_API_KEY: &str = "MSGUIDE_MODEL_API_KEY";
/// How the API key is sent: `bearer` or `api-key`.
pub const MODEL_AUTH_HEADER: &str = "MSGUIDE_MODEL_AUTH_HEADER";
/// `true` approves a model URL that is not on this machine.
pub const ALLOW_REMOTE_MODEL: &str = "MSGUIDE_ALLOW_REMOTE_MODEL";
/// `true` turns on the API's in-memory audit ring.
pub const ENABLE_AUDIT: &str = "MSGUIDE_ENABLE_AUDIT";
/// The API's content-free diagnostic log.
pub const DIAGNOSTIC_LOG: &str = "MSGUIDE_DIAGNOSTIC_LOG";
/// The API's base URL, for the desktop client.
pub const API_URL: &str = "MSGUIDE_API_URL";
/// The desktop client's log.
pub const DESKTOP_LOG: &str = "MSGUIDE_DESKTOP_LOG";
/// The launcher's pid, by which a child ends with the launcher ([`crate::lifetime`]).
pub const LAUNCHER_PID: &str = "MSGUIDE_LAUNCHER_PID";
