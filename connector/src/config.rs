//! The connector configuration: TOML file, `AUTOGPT_SHIM_*` environment and flags, per-OS paths, token sources.
