//! Round-trip tests over PROTOCOL.md's own JSON examples (copied verbatim, comments and
//! all) plus hand-written frames for the types the spec only describes in prose, and the
//! checks that keep `docs/protocol.md` (its examples and names) true to the code.

use serde_json::Value;

use super::{Message, MessageType, Parsed, parse_frame};

/// Every JSON example of PROTOCOL.md that is a concrete message, in document order.
pub(super) const SPEC_EXAMPLES: &[&str] = &[
    // HELLO
    r#"{
  "type": "HELLO",
  "id": "uuid",
  "ts": 1234567890.0,
  "version": "1.1",
  "payload": {
    "shim_version": "0.1.0",
    "protocol_version": "1.1",     // max wire version this shim supports
    "machine_id": "hostname-uuid4",
    "platform": "darwin",          // "darwin" | "linux" | "windows" | "wsl2"
    "arch": "arm64",               // "x86_64" | "arm64" (normalized; see below)
    "screen_resolution": [2560, 1440],   // null if computer_use not available
    "capabilities": [
      "directory_browse",          // control WS only
      "shell",                     // optional: explicit local --enable-shell opt-in
      "files",                     // always present
      "computer_use",              // optional: pyautogui available
      "local_llm",                 // optional: ollama running
      "hardware_serial",           // optional: pyserial available
      "hardware_usb",              // optional: pyusb available
      "hardware_gpio"              // optional: RPi.GPIO available
    ],
    "allowed_root": null,        // control WS; canonical root on a data WS
    "local_llm_models": ["llama3.2:3b", "mistral:7b"],   // empty if no local_llm cap
    "hardware_devices": [
      {"type": "serial", "port": "/dev/ttyUSB0", "desc": "Arduino Uno"},
      {"type": "usb",    "vid": "2341", "pid": "0043", "desc": "Arduino Uno"}
    ]
  }
}"#,
    // HELLO_ACK
    r#"{
  "type": "HELLO_ACK",
  "id": "same-uuid-as-HELLO",
  "ts": 1234567890.1,
  "version": "1.1",
  "payload": {
    "session_id": null,          // null on control; exact ID on data WS
    "connection_id": null,       // optional platform presence generation
    "protocol_version": "1.1",     // max wire version this platform supports
    "granted_capabilities": ["shell", "files"],  // subset platform approved
    "max_file_size_bytes": 10485760,
    "command_timeout_seconds": 30,
    "max_concurrent": 4                          // shim caps in-flight requests
  }
}"#,
    // DIRECTORY_LIST_REQUEST
    r#"{
  "type": "DIRECTORY_LIST_REQUEST",
  "id": "request-uuid",
  "ts": 1234567890.0,
  "payload": {"browse_id": null, "directory_ref": null}
}"#,
    // DIRECTORY_LIST_RESPONSE
    r#"{
  "type": "DIRECTORY_LIST_RESPONSE",
  "id": "request-uuid",
  "ts": 1234567890.1,
  "payload": {
    "browse_id": "host-opaque-id",
    "current": null,
    "parent_ref": null,
    "entries": [{
      "directory_ref": "host-opaque-ref",
      "name": "Home",
      "path": "/Users/alice"
    }],
    "next_cursor": null,
    "truncated": false,
    "expires_at": 1234568190.0
  }
}"#,
    // ATTACH_SESSION
    r#"{
  "type": "ATTACH_SESSION",
  "id": "request-uuid",
  "ts": 1234567890.0,
  "payload": {
    "session_id": "session-uuid",
    "browse_id": "host-opaque-id",
    "directory_ref": "host-opaque-ref",
    "expected_connection_id": "platform-generation-or-null"
  }
}"#,
    // SESSION_ATTACHED
    r#"{
  "type": "SESSION_ATTACHED",
  "id": "request-uuid",
  "ts": 1234567890.1,
  "payload": {
    "session_id": "session-uuid",
    "allowed_root": "/Users/alice/Projects/AutoGPT",
    "fingerprint": "64-lowercase-hex-characters",
    "revision": 1,
    "root_grant": "v1.base64url-claims.base64url-hmac"
  }
}"#,
    // EXECUTE_COMMAND
    r#"{
  "type": "EXECUTE_COMMAND",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "command": "ls -la /tmp",     // mutually exclusive with "argv"
    "argv": null,                  // OR ["ls", "-la", "/tmp"] — no shell parsing
    "shell": "auto",               // "auto" | "bash" | "sh" | "zsh" | "pwsh"
                                   //   | "powershell" | "cmd"
                                   // ignored when "argv" is set
    "cwd": "/Users/alice/autogpt-workspace",
    "timeout_seconds": 30,
    "env": {"MY_VAR": "value"}    // merged with shim's safe env (see below)
  }
}"#,
    // COMMAND_RESULT
    r#"{
  "type": "COMMAND_RESULT",
  "id": "req-uuid",
  "ts": 1234567890.5,
  "payload": {
    "stdout": "total 48\n...",
    "stderr": "",
    "exit_code": 0,
    "timed_out": false,
    "duration_seconds": 0.12,
    "output_truncated": false
  }
}"#,
    // FILE_READ
    r#"{
  "type": "FILE_READ",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "path": "/Users/alice/autogpt-workspace/data.csv",
    "encoding": "utf-8",    // "utf-8" | "base64"
    "format": "text",        // "text" | "bytes" — see mapping below
    "offset": 0,
    "length": null          // null = whole file
  }
}"#,
    // FILE_CONTENTS
    r#"{
  "type": "FILE_CONTENTS",
  "id": "req-uuid",
  "ts": 1234567890.1,
  "payload": {
    "content": "col1,col2\n1,2\n",
    "encoding": "utf-8",
    "size_bytes": 16,
    "truncated": false
  }
}"#,
    // FILE_WRITE
    r#"{
  "type": "FILE_WRITE",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "path": "/Users/alice/autogpt-workspace/output.txt",
    "content": "hello world\n",
    "encoding": "utf-8",
    "create_parents": true
  }
}"#,
    // ACK
    r#"{
  "type": "ACK",
  "id": "req-uuid",
  "ts": 1234567890.1,
  "payload": { "ok": true }
}"#,
    // FILE_STAT
    r#"{
  "type": "FILE_STAT",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "path": "/Users/alice/autogpt-workspace/data.csv",
    "follow_symlinks": true
  }
}"#,
    // FILE_STAT_RESPONSE
    r#"{
  "type": "FILE_STAT_RESPONSE",
  "id": "req-uuid",
  "ts": 1234567890.1,
  "payload": {
    "exists": true,
    "is_file": true,
    "is_dir": false,
    "is_symlink": false,
    "size_bytes": 16,
    "mtime": 1712345678.0,        // seconds since epoch, float
    "ctime": 1712345670.0,
    "mode": "0644",                // POSIX octal; on Windows, derived from
                                   // FILE_ATTRIBUTE_READONLY + ACLs
    "owner_uid": 501,              // null on Windows
    "owner_gid": 20,               // null on Windows
    "mime_type": "text/csv",       // best-effort; null if unknown
    "path": "/Users/alice/autogpt-workspace/data.csv"   // canonical path
                                   // (realpath-resolved when follow_symlinks=true)
  }
}"#,
    // FILE_LIST
    r#"{
  "type": "FILE_LIST",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "path": "/Users/alice/autogpt-workspace",
    "glob": "*.csv",               // null = list everything
    "recursive": false,
    "include_hidden": false,
    "max_entries": 1000            // shim caps at this; truncated flag in response
  }
}"#,
    // FILE_LIST_RESPONSE
    r#"{
  "type": "FILE_LIST_RESPONSE",
  "id": "req-uuid",
  "ts": 1234567890.1,
  "payload": {
    "entries": [
      {
        "name": "data.csv",
        "path": "/Users/alice/autogpt-workspace/data.csv",
        "is_file": true,
        "is_dir": false,
        "is_symlink": false,
        "size_bytes": 16,
        "mtime": 1712345678.0
      }
    ],
    "truncated": false
  }
}"#,
    // FILE_DELETE
    r#"{
  "type": "FILE_DELETE",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "path": "/Users/alice/autogpt-workspace/old.csv",
    "recursive": false,            // required true to delete a non-empty dir
    "missing_ok": false            // if true, no error when path doesn't exist
  }
}"#,
    // FILE_MOVE
    r#"{
  "type": "FILE_MOVE",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "src": "/Users/alice/autogpt-workspace/a.csv",
    "dst": "/Users/alice/autogpt-workspace/b.csv",
    "overwrite": false             // if true, dst is replaced atomically when possible
  }
}"#,
    // LOCAL_LLM_COMPLETION
    r#"{
  "type": "LOCAL_LLM_COMPLETION",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "version": "1.1",
  "payload": {
    "model": "llama3.2:3b",
    "messages": [
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "Summarize X in 3 bullets."}
    ],
    "max_tokens": 1024,
    "temperature": 0.0,
    "top_p": 1.0,
    "stream": true
  }
}"#,
    // LOCAL_LLM_COMPLETION_CHUNK
    r#"{
  "type": "LOCAL_LLM_COMPLETION_CHUNK",
  "id": "req-uuid",
  "ts": 1234567890.1,
  "version": "1.1",
  "payload": {
    "delta": "The user spent ",
    "finish_reason": null
  }
}"#,
    // LOCAL_LLM_COMPLETION_RESPONSE
    r#"{
  "type": "LOCAL_LLM_COMPLETION_RESPONSE",
  "id": "req-uuid",
  "ts": 1234567890.5,
  "version": "1.1",
  "payload": {
    "content": "The user spent ...",
    "finish_reason": "stop",
    "tokens": {"prompt": 42, "completion": 384, "total": 426},
    "duration_seconds": 4.2
  }
}"#,
    // SCREENSHOT_REQUEST
    r#"{
  "type": "SCREENSHOT_REQUEST",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "monitor": 0,                       // 0 = primary, -1 = all monitors stitched
    "quality": 75,                      // JPEG quality 1-100
    "region": null,                     // optional [x1, y1, x2, y2]
    "window_id": null,                  // optional opaque ID from WINDOW_LIST_RESPONSE
    "format": "jpeg",                   // "jpeg" | "png"
    "include_cursor": true              // overlay the OS cursor in the capture
  }
}"#,
    // SCREENSHOT_RESPONSE
    r#"{
  "type": "SCREENSHOT_RESPONSE",
  "id": "req-uuid",
  "ts": 1234567890.2,
  "payload": {
    "image_base64": "...",
    "mime_type": "image/jpeg",
    "width": 2560,
    "height": 1440,
    "monitor": 0,
    "region": null,                     // echoed when request had one
    "display_scale": 1.0,
    "logical_size": [2560, 1440],
    "meta": {                           // see COMPUTER_USE.md Q1
      "origin": [0, 0],
      "display_id": 0
    }
  }
}"#,
    // INPUT_ACTION
    r#"{
  "type": "INPUT_ACTION",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "action": "left_click",     // "left_click" | "right_click" | "double_click"
                                // | "middle_click" | "triple_click"
                                // | "mouse_move" | "mouse_down" | "mouse_up"
                                // | "drag" | "type" | "key" | "hold_key"
                                // | "scroll" | "wait"
    "coordinate": [500, 300],   // for click/move/scroll
    "text": null,               // for "type"
    "key": null,                // for "key" e.g. "ctrl+s"
    "direction": null,          // for "scroll": "up" | "down"
    "clicks": null,             // for "scroll": number of clicks
    "button": null,             // "left" | "middle" | "right" — for mouse_down/up/drag
    "modifiers": null,          // subset of "shift"|"ctrl"|"alt"|"super" — for click/scroll
    "scroll_amount": null,      // alternative to clicks for "scroll"
    "scroll_direction": null,   // alternative to direction for "scroll"
    "duration_ms": null,        // for "hold_key" and "wait"
    "path": null,               // [[x,y], ...] for "drag"
    "paste": false,             // for "type" — see Q4
    "preserve_clipboard": false // for "type" with paste — see Q4
  }
}"#,
    // ERROR
    r#"{
  "type": "ERROR",
  "id": "req-uuid",
  "ts": 1234567890.0,
  "payload": {
    "code": "PATH_OUTSIDE_ALLOWED_ROOT",
    "message": "Path /etc/passwd is outside allowed root /Users/alice/autogpt-workspace",
    "fatal": false
  }
}"#,
    // PING
    r#"{ "type": "PING", "id": "uuid", "ts": 1234567890.0, "payload": {} }"#,
    // PONG
    r#"{ "type": "PONG", "id": "same-uuid", "ts": 1234567890.01, "payload": {} }"#,
    // SESSION_REVOKED
    r#"{
  "type": "SESSION_REVOKED",
  "id": "uuid",
  "ts": 1234567890.0,
  "version": "1.1",
  "payload": {
    "reason": "another_shim_connected",   // | "user_revoked" | "platform_shutdown"
    "new_shim_machine_id": "macbook-air-7f3c"   // optional, set when reason is another_shim_connected
  }
}"#,
    // STATUS
    r#"{
  "type": "STATUS",
  "id": "uuid",
  "ts": 1234567890.0,
  "version": "1.1",
  "pending_capacity": 3,
  "payload": {
    "in_flight": 1,
    "max_concurrent": 4,
    "queue_depth": 0,
    "audit_log_bytes": 12345,
    "uptime_seconds": 137.4
  }
}"#,
];

/// Frames for the types PROTOCOL.md names without a JSON example, shaped after its prose
/// signatures and the reference shim's field lists. Not spec text.
pub(super) const PROSE_EXAMPLES: &[&str] = &[
    r#"{"type":"ACTIVATE_SESSION","id":"a","ts":1.0,"payload":{"session_id":"s-1","revision":2}}"#,
    r#"{"type":"SESSION_ACTIVATED","id":"a","ts":1.0,"pending_capacity":3,"payload":{"session_id":"s-1","allowed_root":"/w","fingerprint":"ab","revision":2}}"#,
    r#"{"type":"RESTORE_SESSION","id":"a","ts":1.0,"payload":{"session_id":"s-1","root_grant":"v1.x.y"}}"#,
    r#"{"type":"SESSION_RESTORED","id":"a","ts":1.0,"pending_capacity":3,"payload":{"session_id":"s-1","allowed_root":"/w","fingerprint":"ab","revision":2,"root_grant":"v1.x.y"}}"#,
    r#"{"type":"DETACH_SESSION","id":"a","ts":1.0,"payload":{"session_id":"s-1"}}"#,
    r#"{"type":"CURSOR_POSITION_REQUEST","id":"c","ts":1.0,"payload":{}}"#,
    r#"{"type":"CURSOR_POSITION_RESPONSE","id":"c","ts":1.0,"pending_capacity":4,"payload":{"x":10,"y":-20,"monitor":1}}"#,
    r#"{"type":"DISPLAY_INFO_REQUEST","id":"d","ts":1.0,"payload":{}}"#,
    r#"{"type":"DISPLAY_INFO_RESPONSE","id":"d","ts":1.0,"pending_capacity":4,"payload":{"monitors":[{"index":0,"primary":true,"physical_size":[2560,1440],"logical_size":[1280,720],"scale":2.0,"origin":[0,0]}]}}"#,
    r#"{"type":"WINDOW_LIST_REQUEST","id":"w","ts":1.0,"payload":{"app_bundle_id":null,"include_minimized":true,"include_offscreen":false}}"#,
    r#"{"type":"WINDOW_LIST_RESPONSE","id":"w","ts":1.0,"pending_capacity":4,"payload":{"windows":[{"window_id":"win_1","pid":42,"app_name":"Editor","app_bundle_id":null,"title":"notes.txt","bounds":[0,0,800,600],"monitor":0,"is_focused":true,"is_minimized":false,"is_fullscreen":false}],"truncated":false}}"#,
    r#"{"type":"WINDOW_FOCUS","id":"f","ts":1.0,"payload":{"window_id":"win_1","raise":false}}"#,
    r#"{"type":"APP_LIST_REQUEST","id":"l","ts":1.0,"payload":{"include_background":true}}"#,
    r#"{"type":"APP_LIST_RESPONSE","id":"l","ts":1.0,"pending_capacity":4,"payload":{"apps":[{"pid":7,"name":"Editor","bundle_id":null,"executable_path":"/usr/bin/editor","is_frontmost":true,"window_count":1}]}}"#,
    r#"{"type":"APP_LAUNCH","id":"n","ts":1.0,"payload":{"bundle_id":null,"executable_path":"/usr/bin/editor","args":["--new"],"activate":true}}"#,
    r#"{"type":"ACK","id":"n","ts":1.0,"pending_capacity":4,"payload":{"ok":true,"pid":4242}}"#,
    r#"{"type":"CLIPBOARD_READ","id":"r","ts":1.0,"payload":{"format":"text"}}"#,
    r#"{"type":"CLIPBOARD_READ_RESPONSE","id":"r","ts":1.0,"pending_capacity":4,"payload":{"format":"text","content":"hi","size_bytes":2}}"#,
    r#"{"type":"CLIPBOARD_WRITE","id":"r","ts":1.0,"payload":{"format":"text","content":"hi"}}"#,
    r#"{"type":"PERMISSIONS_CHECK_REQUEST","id":"p","ts":1.0,"payload":{"permissions":["accessibility","screen_recording"]}}"#,
    r#"{"type":"PERMISSIONS_CHECK_RESPONSE","id":"p","ts":1.0,"pending_capacity":4,"payload":{"permissions":{"accessibility":"granted","input_monitoring":"not_applicable","screen_recording":"denied"}}}"#,
    r#"{"type":"A11Y_SNAPSHOT_REQUEST","id":"a","ts":1.0,"payload":{"window_id":"win_1","max_elements":50,"max_depth":16,"deadline_ms":1500}}"#,
    r#"{"type":"A11Y_SNAPSHOT_RESPONSE","id":"a","ts":1.0,"pending_capacity":4,"payload":{"elements":[{"role":"button","label":"Save","box":[10,20,90,44],"states":["enabled","focusable"]}],"truncated":false}}"#,
    r#"{"type":"A11Y_SNAPSHOT_RESPONSE","id":"a","ts":1.0,"pending_capacity":4,"payload":{"elements":[{"id":"e3","role":"edit","label":"Name","box":[10,50,210,74],"states":["enabled"]}],"truncated":false}}"#,
    r#"{"type":"ELEMENT_ACTION","id":"a","ts":1.0,"payload":{"element_id":"e3","action":"type","text":"hello"}}"#,
    r#"{"type":"ELEMENT_ACTION","id":"a","ts":1.0,"payload":{"element_id":"e2","action":"click"}}"#,
    r#"{"type":"ERROR","id":"e","ts":1.0,"pending_capacity":0,"payload":{"code":"SHIM_OVERLOADED","message":"The local executor is at its concurrent request limit.","fatal":false,"details":{"max_concurrent":4}}}"#,
    r#"{"type":"SESSION_REVOKED","id":"s","ts":1.0,"payload":{"reason":"maintenance_window"}}"#,
    r#"{"type":"REQUEST_RECORDING_CONSENT","id":"rc","ts":1.0,"payload":{"mode":"co_pilot"}}"#,
    r#"{"type":"RECORDING_CONSENT_RESULT","id":"rc","ts":1.0,"payload":{"granted":false}}"#,
    r#"{"type":"START_RECORDING","id":"rs","ts":1.0,"payload":{}}"#,
    r#"{"type":"RECORDING_STARTED","id":"rs","ts":1.0,"payload":{"recording_id":"rec-1"}}"#,
    r#"{"type":"STOP_RECORDING","id":"rt","ts":1.0,"payload":{"recording_id":"rec-1"}}"#,
    r#"{"type":"RECORDING_SUMMARY","id":"rt","ts":1.0,"payload":{"recording_id":"rec-1","steps":0}}"#,
    r#"{"type":"RECORDING_FETCH","id":"rf","ts":1.0,"payload":{"recording_id":"rec-1"}}"#,
    r#"{"type":"RECORDING_DATA","id":"rf","ts":1.0,"payload":{"recording_id":"rec-1","steps":[]}}"#,
    r#"{"type":"APPLY_RECORDING_REVIEW","id":"ra","ts":1.0,"payload":{"recording_id":"rec-1","remove_steps":[1]}}"#,
    r#"{"type":"RECORDING_REVIEW_APPLIED","id":"ra","ts":1.0,"payload":{"recording_id":"rec-1"}}"#,
    r#"{"type":"RECORDING_STEP","id":"st","ts":1.0,"payload":{"recording_id":"rec-1","index":0}}"#,
];

/// Removes `// ...` comments outside JSON strings, as the spec's examples carry them.
pub(super) fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let (mut in_string, mut escaped) = (false, false);
        let mut cut = line.len();
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    (false, _) => {}
                }
            } else if b == b'"' {
                in_string = true;
            } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
                cut = i;
                break;
            }
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// Paths present in `produced` but not in `example`; fails on any path of `example` that
/// is missing from `produced` or has another value (numbers compared as f64, since the
/// spec writes `30` where the type is a float).
fn extra_paths(example: &Value, produced: &Value, path: &str, extras: &mut Vec<String>) {
    match (example, produced) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in want {
                let child = format!("{path}/{key}");
                let other = got
                    .get(key)
                    .unwrap_or_else(|| panic!("{child} missing from output"));
                extra_paths(value, other, &child, extras);
            }
            extras.extend(
                got.keys()
                    .filter(|k| !want.contains_key(*k))
                    .map(|k| format!("{path}/{k}")),
            );
        }
        (Value::Array(want), Value::Array(got)) => {
            assert_eq!(want.len(), got.len(), "{path}: array length");
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                extra_paths(w, g, &format!("{path}/{i}"), extras);
            }
        }
        (Value::Number(want), Value::Number(got)) => {
            assert_eq!(want.as_f64(), got.as_f64(), "{path}");
        }
        (want, got) => assert_eq!(want, got, "{path}"),
    }
}

/// Parses, re-serialises and re-parses one example; returns the type and the paths the
/// output has beyond the example.
fn round_trip(text: &str) -> (MessageType, Vec<String>) {
    let clean = strip_comments(text);
    let example: Value = serde_json::from_str(&clean).unwrap_or_else(|e| panic!("{e}: {clean}"));
    let envelope = match parse_frame(&clean) {
        Parsed::Message(envelope) => envelope,
        other => panic!("{other:?} for {clean}"),
    };
    assert_eq!(
        Some(envelope.message_type().as_str()),
        example["type"].as_str()
    );
    let json = envelope.to_json().unwrap();
    let produced: Value = serde_json::from_str(&json).unwrap();
    let mut extras = Vec::new();
    extra_paths(&example, &produced, "", &mut extras);
    match parse_frame(&json) {
        Parsed::Message(again) => assert_eq!(again, envelope),
        other => panic!("{other:?} for {json}"),
    }
    (envelope.message_type(), extras)
}

#[test]
fn spec_examples_round_trip() {
    let mut seen = Vec::new();
    for example in SPEC_EXAMPLES {
        let (message_type, mut extras) = round_trip(example);
        // The spec's examples mostly predate the always-present `version`.
        extras.retain(|path| path != "/version");
        extras.sort();
        let expected: &[&str] = match message_type {
            // Fields beyond PROTOCOL.md that the reference shim's HELLO carries.
            MessageType::Hello => &[
                "/payload/computer_use_features",
                "/payload/computer_use_features_coarse",
                "/payload/display_name",
                "/payload/recording_channels",
                "/payload/recording_routes",
            ],
            _ => &[],
        };
        assert_eq!(extras, expected, "{message_type}");
        seen.push(message_type.as_str());
    }
    assert_eq!(
        seen,
        [
            "HELLO",
            "HELLO_ACK",
            "DIRECTORY_LIST_REQUEST",
            "DIRECTORY_LIST_RESPONSE",
            "ATTACH_SESSION",
            "SESSION_ATTACHED",
            "EXECUTE_COMMAND",
            "COMMAND_RESULT",
            "FILE_READ",
            "FILE_CONTENTS",
            "FILE_WRITE",
            "ACK",
            "FILE_STAT",
            "FILE_STAT_RESPONSE",
            "FILE_LIST",
            "FILE_LIST_RESPONSE",
            "FILE_DELETE",
            "FILE_MOVE",
            "LOCAL_LLM_COMPLETION",
            "LOCAL_LLM_COMPLETION_CHUNK",
            "LOCAL_LLM_COMPLETION_RESPONSE",
            "SCREENSHOT_REQUEST",
            "SCREENSHOT_RESPONSE",
            "INPUT_ACTION",
            "ERROR",
            "PING",
            "PONG",
            "SESSION_REVOKED",
            "STATUS",
        ]
    );
}

#[test]
fn prose_examples_round_trip_exactly() {
    for example in PROSE_EXAMPLES {
        let (message_type, extras) = round_trip(example);
        assert_eq!(extras, ["/version"], "{message_type}");
    }
}

#[test]
fn every_message_type_has_an_example() {
    let covered: Vec<MessageType> = SPEC_EXAMPLES
        .iter()
        .chain(PROSE_EXAMPLES)
        .map(|text| round_trip(text).0)
        .collect();
    let missing: Vec<&str> = MessageType::ALL
        .iter()
        .filter(|t| !covered.contains(t))
        .map(|t| t.as_str())
        .collect();
    assert!(missing.is_empty(), "no example for {missing:?}");
}

#[test]
fn spec_hello_parses_to_the_expected_values() {
    let Parsed::Message(envelope) = parse_frame(&strip_comments(SPEC_EXAMPLES[0])) else {
        panic!("HELLO example did not parse");
    };
    let Message::Hello(hello) = envelope.message else {
        panic!("not a HELLO")
    };
    assert_eq!(hello.capabilities, super::Capability::ALL[..8]);
    assert_eq!(hello.screen_resolution, Some([2560, 1440]));
    assert_eq!(hello.hardware_devices[1].vid.as_deref(), Some("2341"));
    assert_eq!(hello.allowed_root, None);
}

#[test]
fn comment_stripper_keeps_slashes_in_strings() {
    assert_eq!(
        strip_comments(r#"{"a": "x//y\"//z"} // c"#),
        "{\"a\": \"x//y\\\"//z\"} \n"
    );
}

/// `docs/protocol.md`, the protocol as documented for people: its examples and names are
/// held to the code here, so the document cannot drift from what the shim parses.
const PROTOCOL_DOC: &str = include_str!("../../../docs/protocol.md");

/// Every JSON value in the document's `json` code blocks; a block may hold several frames,
/// one after the other.
fn doc_frames() -> Vec<Value> {
    let mut frames = Vec::new();
    for (i, block) in PROTOCOL_DOC.split("```json\n").skip(1).enumerate() {
        let body = block
            .split("```")
            .next()
            .unwrap_or_else(|| panic!("json block {i} is not closed"));
        for value in serde_json::Deserializer::from_str(body).into_iter::<Value>() {
            frames.push(value.unwrap_or_else(|e| panic!("json block {i}: {e}\n{body}")));
        }
    }
    frames
}

#[test]
fn protocol_doc_examples_parse_and_cover_every_type() {
    let mut covered = Vec::new();
    for frame in doc_frames() {
        // Fails on a field the example has and the typed payload drops (a misspelt name)
        // or changes, and on any frame that does not parse as a valid message.
        let (message_type, _) = round_trip(&frame.to_string());
        let shim_answer = message_type.direction() == super::Direction::ShimToPlatform
            && !matches!(message_type, MessageType::Hello | MessageType::Pong)
            && message_type.required_capability() != Some(super::Capability::Recording);
        if shim_answer {
            assert!(
                frame["pending_capacity"].is_u64(),
                "{message_type} example without pending_capacity: {frame}"
            );
        }
        covered.push(message_type);
    }
    let missing: Vec<&str> = MessageType::ALL
        .iter()
        .filter(|t| !covered.contains(t))
        .map(|t| t.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/protocol.md has no example for {missing:?}"
    );
}

#[test]
fn protocol_doc_names_every_type_code_capability_and_close_code() {
    let names = MessageType::ALL
        .iter()
        .map(|t| t.as_str())
        .chain(super::ErrorCode::ALL.iter().map(|c| c.as_str()))
        .chain(super::Capability::ALL.iter().map(|c| c.as_str()));
    for name in names {
        assert!(
            PROTOCOL_DOC.contains(&format!("`{name}`")),
            "docs/protocol.md never names `{name}`"
        );
    }
    use super::close_code as close;
    for code in [
        close::NORMAL,
        close::SERVER_ERROR,
        close::BAD_HANDSHAKE,
        close::SESSION_MISMATCH,
        close::PROTOCOL_VERSION_MISMATCH,
        close::SESSION_TAKEN_OVER,
        close::SESSION_REVOKED,
        close::PLATFORM_SHUTDOWN,
    ] {
        assert!(
            PROTOCOL_DOC.contains(&format!("\n| {code} "))
                || PROTOCOL_DOC.contains(&format!("\n| {code}, ")),
            "docs/protocol.md has no close-code row for {code}"
        );
        if let Some(label) = close::label(code) {
            assert!(PROTOCOL_DOC.contains(&format!("`{label}`")), "{label}");
        }
    }
    // The HELLO_ACK defaults as the handshake table states them.
    for (field, default) in [
        (
            "max_file_size_bytes",
            super::DEFAULT_MAX_FILE_SIZE_BYTES.get(),
        ),
        (
            "command_timeout_seconds",
            super::DEFAULT_COMMAND_TIMEOUT_SECONDS.get(),
        ),
        (
            "max_concurrent",
            u64::from(super::DEFAULT_MAX_CONCURRENT.get()),
        ),
    ] {
        let row = format!("| `{field}` | integer ≥ 1 | {default} |");
        assert!(PROTOCOL_DOC.contains(&row), "no row {row:?}");
    }
}
