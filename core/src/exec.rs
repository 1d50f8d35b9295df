//! Running one EXECUTE_COMMAND: shell selection, safe environment, process group, output budget, timeout, rate limits.
