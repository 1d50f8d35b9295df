// Drives the real `autogpt-shim mcp` with the official MCP TypeScript SDK's client (npm
// @modelcontextprotocol/sdk, pinned in scripts/inspector-env, which puts it on the require path
// of the Node.js it prints as MSGUIDE_TEST_MCP_NODE), for tests/tests/suite/mcp_http.rs.
//
// Usage: sdk.mjs TRANSPORT SCENARIO, TRANSPORT `stdio` or `http`; the environment names the
// binary (MCP_SHIM), its home (MCP_HOME), the allowed root (MCP_ROOT) and a folder outside it
// holding `secret.txt` (MCP_OUTSIDE). Over `http` the driver starts `mcp --http 0`, reads the
// address and the token it prints once, connects with that token, and at the end stops the
// server with SIGTERM (exit 0). Scenarios: `tools` (every file tool and run_command with every
// optional parameter, then out-of-root refusals), `budget` (--max-answer-chars 5000: pages and
// their continuation), `roots` (the client's roots narrow the tools, a change applies) and,
// over `http` only, `signal` (SIGTERM under a running command); `desktop` (every desktop tool
// with every optional parameter) needs the private desktop's variables and a witness window.
//
// Every check asserts exact codes and messages; the first failure ends the run with a stack
// and exit status 1. Each passed check prints `ok NAME`, which the Rust test counts.

import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import crypto from "node:crypto";

const require = createRequire(import.meta.url);
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ListRootsRequestSchema, McpError } = require("@modelcontextprotocol/sdk/types.js");

const [transportName, scenario] = process.argv.slice(2);
const SHIM = process.env.MCP_SHIM;
const HOME = process.env.MCP_HOME;
const ROOT = process.env.MCP_ROOT;
const OUTSIDE = process.env.MCP_OUTSIDE;
const OUTSIDE_ROOT = "PATH_OUTSIDE_ALLOWED_ROOT: path is outside the allowed root";
const MAX_FILE_SIZE = 4096;

function ok(name) {
  console.log(`ok ${name}`);
}

function serverEnv(extra = {}) {
  return {
    PATH: process.env.PATH,
    HOME,
    XDG_CONFIG_HOME: path.join(HOME, ".config"),
    XDG_STATE_HOME: path.join(HOME, ".local/state"),
    AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES: String(MAX_FILE_SIZE),
    ...extra,
  };
}

/// A connected client and how to end it: stdio (the SDK spawns the server) or Streamable HTTP
/// (the driver spawns `mcp --http 0` and reads what it prints).
async function connect(switches, { extraEnv = {}, capabilities = {}, stderrTo } = {}) {
  const args = ["--allowed-root", ROOT, "mcp", ...switches];
  const client = new Client({ name: "msguide-sdk-driver", version: "1.0.0" }, { capabilities });
  if (transportName === "stdio") {
    const transport = new StdioClientTransport({
      command: SHIM,
      args,
      env: serverEnv(extraEnv),
      stderr: "pipe",
    });
    const logged = [];
    transport.stderr.on("data", (chunk) => logged.push(chunk));
    return {
      client,
      connect: () => client.connect(transport),
      stderr: () => Buffer.concat(logged).toString(),
      close: async () => {
        await client.close();
        return 0;
      },
    };
  }
  const server = spawn(SHIM, [...args, "--http", "0"], {
    env: serverEnv(extraEnv),
    stdio: ["ignore", "pipe", "pipe"],
  });
  // A failed check ends the driver at once: the server it started goes with it.
  process.on("exit", () => server.exitCode === null && server.signalCode === null && server.kill("SIGKILL"));
  const logged = [];
  server.stderr.on("data", (chunk) => logged.push(chunk));
  let printed = "";
  const { url, token } = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address printed: ${printed} ${Buffer.concat(logged)}`)), 20000);
    server.stdout.on("data", (chunk) => {
      printed += chunk;
      const url = printed.match(/^MCP over Streamable HTTP: (http:\/\/127\.0\.0\.1:\d+\/mcp)$/m);
      const token = printed.match(/^Bearer token \(shown only now\): (\S+)$/m);
      if (url && token && printed.includes("Authorization: Bearer <token>")) {
        clearTimeout(timer);
        resolve({ url: url[1], token: token[1] });
      }
    });
    server.on("exit", (code) => reject(new Error(`the server exited (${code}): ${Buffer.concat(logged)}`)));
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    client,
    url,
    token,
    connect: () => client.connect(transport),
    stderr: () => Buffer.concat(logged).toString(),
    stop: async () => {
      server.kill("SIGTERM");
      const { code, signal } = await exited;
      assert.equal(signal, null, `the server died of ${signal}`);
      // Nothing of the token reaches the log, and it was printed once.
      const stderr = Buffer.concat(logged).toString();
      assert.ok(!stderr.includes(token), "the token reached the log");
      assert.equal(printed.split(token).length - 1, 1, "the token was printed more than once");
      return code;
    },
    close: async function close() {
      await client.close();
      return this.stop();
    },
  };
}

function payload(result) {
  assert.notEqual(result.isError, true, `unexpected error: ${JSON.stringify(result.content)}`);
  const text = JSON.parse(result.content.at(-1).text);
  assert.deepEqual(result.structuredContent, text);
  return text;
}

function failed(result, code, message) {
  assert.equal(result.isError, true, `expected ${code}, got ${JSON.stringify(result.content)}`);
  const text = result.content[0].text;
  assert.ok(text.startsWith(`${code}: `), text);
  assert.equal(result.structuredContent.code, code);
  if (message !== undefined) assert.equal(text, `${code}: ${message}`);
  return result.structuredContent;
}

/// Calls tools and remembers which arguments each got, so the run can show that every
/// parameter of every tool it called was set at least once.
function caller(client) {
  const used = new Map();
  const call = async (name, args) => {
    const keys = used.get(name) ?? new Set();
    for (const key of Object.keys(args)) keys.add(key);
    used.set(name, keys);
    return client.callTool({ name, arguments: args });
  };
  return { call, used };
}

async function protocolError(client, name, args) {
  try {
    await client.callTool({ name, arguments: args });
  } catch (err) {
    assert.ok(err instanceof McpError, String(err));
    assert.equal(err.code, -32602, err.message);
    // The SDK puts its own prefix before the server's message.
    assert.ok(err.message.startsWith("MCP error -32602: "), err.message);
    return err.message.slice("MCP error -32602: ".length);
  }
  assert.fail(`${name}(${JSON.stringify(args)}) answered instead of a protocol error`);
}

async function listing(client, expected) {
  assert.equal(client.getServerVersion().name, "autogpt-shim");
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tool) => tool.name), expected);
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, "object", tool.name);
    assert.ok(tool.title && tool.outputSchema && tool.annotations, tool.name);
    for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
      assert.equal(typeof tool.annotations[hint], "boolean", `${tool.name} ${hint}`);
    }
    for (const [name, property] of Object.entries(tool.inputSchema.properties ?? {})) {
      assert.ok(!Array.isArray(property.type), `${tool.name}.${name} has one type`);
      if ("default" in property) assert.ok(!(tool.inputSchema.required ?? []).includes(name), `${tool.name}.${name}`);
    }
  }
  return Object.fromEntries(tools.map((tool) => [tool.name, tool]));
}

const FILE_TOOLS = ["read_file", "write_file", "stat", "list_directory", "delete", "move"];

async function tools() {
  const session = await connect(["--enable-shell"]);
  const { client } = session;
  await session.connect();
  const listed = await listing(client, [...FILE_TOOLS, "run_command"]);
  ok("list_tools");

  const { call, used } = caller(client);
  assert.deepEqual(payload(await call("write_file", { path: "a/b/note.txt", content: "hello world", encoding: "utf-8", create_parents: true })), { ok: true });
  const raw = crypto.randomBytes(256);
  assert.equal(payload(await call("write_file", { path: "bin.dat", content: raw.toString("base64"), encoding: "base64" })).ok, true);
  const read = payload(await call("read_file", { path: "a/b/note.txt" }));
  assert.deepEqual(read, { content: "hello world", encoding: "utf-8", size_bytes: 11, truncated: false });
  const ranged = payload(await call("read_file", { path: "a/b/note.txt", encoding: "utf-8", offset: 6, length: 3 }));
  assert.equal(ranged.content, "wor");
  const binary = payload(await call("read_file", { path: "bin.dat", encoding: "base64", offset: 0, length: 256 }));
  assert.ok(Buffer.from(binary.content, "base64").equals(raw));
  fs.symlinkSync("a/b/note.txt", path.join(ROOT, "note-link"));
  const followed = payload(await call("stat", { path: "note-link", follow_symlinks: true }));
  assert.ok(followed.exists && followed.is_file && followed.size_bytes === 11, JSON.stringify(followed));
  const link = payload(await call("stat", { path: "note-link", follow_symlinks: false }));
  assert.ok(link.exists && link.is_symlink === true, JSON.stringify(link));
  const missing = payload(await call("stat", { path: "nope.txt" }));
  assert.equal(missing.exists, false);
  for (const name of ["x1.txt", "x2.txt", "x3.txt", "y.md", ".hidden"]) {
    payload(await call("write_file", { path: `list/${name}`, content: "x", create_parents: true }));
  }
  const globbed = payload(await call("list_directory", { path: "list", glob: "*.txt", recursive: false, include_hidden: false, offset: 1, max_entries: 1 }));
  assert.deepEqual(globbed.entries.map((e) => e.name), ["x2.txt"]);
  assert.equal(globbed.truncated, true);
  const hidden = payload(await call("list_directory", { path: "list", include_hidden: true }));
  assert.ok(hidden.entries.some((e) => e.name === ".hidden"));
  const deep = payload(await call("list_directory", { path: ".", recursive: true }));
  assert.ok(deep.entries.some((e) => e.name === "note.txt"));
  assert.equal(payload(await call("move", { src: "list/y.md", dst: "list/z.md" })).ok, true);
  failed(await call("move", { src: "list/x1.txt", dst: "list/x2.txt", overwrite: false }), "PATH_EXISTS");
  assert.equal(payload(await call("move", { src: "list/x1.txt", dst: "list/x2.txt", overwrite: true })).ok, true);
  failed(await call("delete", { path: "list" }), "PATH_NOT_EMPTY");
  assert.equal(payload(await call("delete", { path: "list", recursive: true, missing_ok: false })).ok, true);
  failed(await call("delete", { path: "list" }), "PATH_NOT_FOUND");
  assert.equal(payload(await call("delete", { path: "list", missing_ok: true })).ok, true);
  ok("file_tools_with_every_parameter");

  fs.mkdirSync(path.join(ROOT, "work"));
  const ran = payload(await call("run_command", { argv: ["sh", "-c", 'pwd; printf "%s" "$GREETING"'], cwd: "work", timeout_seconds: 10, env: { GREETING: "hi" } }));
  assert.equal(ran.stdout, `${path.join(ROOT, "work")}\nhi`);
  assert.equal(ran.exit_code, 0);
  const shelled = payload(await call("run_command", { command: "echo $((6 * 7)) >&2; exit 3", shell: "sh" }));
  assert.equal(shelled.stderr, "42\n");
  assert.equal(shelled.exit_code, 3);
  const slow = payload(await call("run_command", { argv: ["sleep", "5"], timeout_seconds: 0.5 }));
  assert.equal(slow.timed_out, true);
  ok("run_command_with_every_parameter");

  // Every parameter of every tool listed was set by some call above.
  for (const [name, tool] of Object.entries(listed)) {
    const missed = Object.keys(tool.inputSchema.properties).filter((key) => !used.get(name)?.has(key));
    assert.deepEqual(missed, [], `${name}: parameters never set`);
  }
  ok("every_parameter_was_set");

  fs.symlinkSync(OUTSIDE, path.join(ROOT, "link"));
  for (const p of ["../outside/secret.txt", path.join(OUTSIDE, "secret.txt"), "link/secret.txt"]) {
    failed(await call("read_file", { path: p }), "PATH_OUTSIDE_ALLOWED_ROOT", "path is outside the allowed root");
    failed(await call("write_file", { path: p, content: "pwned" }), "PATH_OUTSIDE_ALLOWED_ROOT");
    failed(await call("stat", { path: p }), "PATH_OUTSIDE_ALLOWED_ROOT");
    failed(await call("delete", { path: p }), "PATH_OUTSIDE_ALLOWED_ROOT");
  }
  failed(await call("move", { src: "a/b/note.txt", dst: "link/stolen.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("list_directory", { path: "link" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("run_command", { argv: ["pwd"], cwd: "../outside" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  assert.equal(fs.readFileSync(path.join(OUTSIDE, "secret.txt"), "utf8"), "secret");
  assert.ok(!fs.existsSync(path.join(OUTSIDE, "stolen.txt")));
  ok("out_of_root_refused");

  assert.equal(await protocolError(client, "read_file", {}), "`path` is required; see read_file's inputSchema");
  assert.equal(await protocolError(client, "read_file", { path: "a", offset: -1 }), "`offset` must be a non-negative integer");
  ok("bad_arguments_are_protocol_errors");
  assert.equal(await session.close(), 0);
}

async function pagedRead(call, file, encoding, budget) {
  const pieces = [];
  let offset = 0;
  let pages = 0;
  for (;;) {
    const result = await call("read_file", { path: file, encoding, offset });
    assert.ok(result.content[0].text.length <= budget, String(result.content[0].text.length));
    const page = payload(result);
    pieces.push(page.content);
    pages += 1;
    if (!("next_offset" in page)) {
      assert.equal(page.truncated, false);
      return { pieces, pages };
    }
    assert.equal(page.truncated, true);
    assert.ok(page.note.includes(`offset ${page.next_offset}`), page.note);
    assert.equal(page.next_offset, offset + page.size_bytes);
    offset = page.next_offset;
  }
}

async function budget() {
  const limit = 5000;
  const session = await connect(["--enable-shell", "--max-answer-chars", String(limit)], {
    extraEnv: { AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES: String(1 << 20) },
  });
  const { client } = session;
  await session.connect();
  const listed = await listing(client, [...FILE_TOOLS, "run_command"]);
  assert.ok(listed.read_file.description.includes(`at most ${limit} characters`));
  const { call } = caller(client);

  let text = "";
  for (let i = 0; i < 1500; i++) text += `line ${i}: "\u00e9t\u00e9" \u{1F600}\n`;
  fs.writeFileSync(path.join(ROOT, "long.txt"), text);
  const utf8 = await pagedRead(call, "long.txt", "utf-8", limit);
  assert.equal(utf8.pieces.join(""), text);
  assert.ok(utf8.pages >= 5, String(utf8.pages));
  const raw = crypto.randomBytes(20000);
  fs.writeFileSync(path.join(ROOT, "long.bin"), raw);
  const b64 = await pagedRead(call, "long.bin", "base64", limit);
  assert.ok(Buffer.concat(b64.pieces.map((piece) => Buffer.from(piece, "base64"))).equals(raw));
  ok("long_files_read_in_pages");

  const names = Array.from({ length: 300 }, (_, i) => `entry-${String(i).padStart(4, "0")}.txt`);
  fs.mkdirSync(path.join(ROOT, "many"));
  for (const name of names) fs.writeFileSync(path.join(ROOT, "many", name), "x");
  const seen = [];
  let offset = 0;
  let pages = 0;
  for (;;) {
    const result = await call("list_directory", { path: "many", offset });
    assert.ok(result.content[0].text.length <= limit);
    const page = payload(result);
    seen.push(...page.entries.map((entry) => entry.name));
    pages += 1;
    if (!("next_offset" in page)) break;
    assert.equal(page.truncated, true);
    assert.ok(page.note.includes("offset"), page.note);
    offset = page.next_offset;
  }
  assert.deepEqual(seen, names);
  assert.ok(pages >= 5, String(pages));
  ok("listings_page_with_offset");

  const loud = payload(await call("run_command", { command: "seq 1 20000; echo done >&2", shell: "sh" }));
  assert.ok(loud.stdout.startsWith("1\n2\n3\n") && loud.stdout.endsWith("19999\n20000\n"));
  assert.ok(loud.stdout.includes(" characters elided ...]\n") && loud.output_truncated === true);
  assert.equal(loud.stderr, "done\n");
  ok("command_output_keeps_head_and_tail");
  assert.equal(await session.close(), 0);
}

async function roots() {
  for (const name of ["proj", "other"]) {
    fs.mkdirSync(path.join(ROOT, name));
    fs.writeFileSync(path.join(ROOT, name, `${name}.txt`), name);
  }
  fs.symlinkSync(path.join(ROOT, "other"), path.join(ROOT, "proj", "link"));
  let listed = [path.join(ROOT, "proj"), OUTSIDE];
  let asked = 0;
  const session = await connect(["--enable-shell"], { capabilities: { roots: { listChanged: true } } });
  const { client } = session;
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    asked += 1;
    return { roots: listed.map((folder) => ({ uri: pathToFileURL(folder).href })) };
  });
  await session.connect();
  const { call } = caller(client);
  // The first call waits for the roots: it never runs on the whole allowed root.
  failed(await call("read_file", { path: "other/other.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  assert.ok(asked >= 1);
  assert.equal(payload(await call("read_file", { path: "proj/proj.txt" })).content, "proj");
  assert.equal(payload(await call("write_file", { path: "proj/new.txt", content: "n" })).ok, true);
  failed(await call("read_file", { path: "proj/link/other.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("read_file", { path: "proj/../other/other.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("list_directory", { path: "." }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("move", { src: "proj/new.txt", dst: "other/new.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  failed(await call("read_file", { path: path.join(OUTSIDE, "secret.txt") }), OUTSIDE_ROOT.split(": ")[0]);
  assert.equal(payload(await call("run_command", { argv: ["pwd"] })).stdout, `${path.join(ROOT, "proj")}\n`);
  failed(await call("run_command", { argv: ["pwd"], cwd: "other" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  ok("roots_narrow_the_tools");

  // A change of roots applies once the server has asked again.
  listed = [path.join(ROOT, "other")];
  const before = asked;
  await client.sendRootsListChanged();
  const deadline = Date.now() + 10000;
  while (asked === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(asked > before, "the server did not ask for the roots again");
  assert.equal(payload(await call("read_file", { path: "other/other.txt" })).content, "other");
  failed(await call("read_file", { path: "proj/proj.txt" }), "PATH_OUTSIDE_ALLOWED_ROOT");
  ok("a_change_of_roots_applies");

  const stderr = session.stderr();
  assert.equal(await session.close(), 0);
  const outsideUri = pathToFileURL(OUTSIDE).href;
  assert.ok(stderr.includes(`root=${outsideUri}`) && stderr.includes("it is outside the allowed root"), stderr);
  assert.equal(fs.readFileSync(path.join(OUTSIDE, "secret.txt"), "utf8"), "secret");
}

/// Whether `pid` has ended: gone, or a zombie nobody has reaped yet.
function ended(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

async function until(what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    assert.ok(Date.now() < deadline, what);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/// SIGTERM while a command runs (its grandchild would outlive it): the call ends, the tree is
/// killed, the server exits 0.
async function signal() {
  const session = await connect(["--enable-shell"]);
  const { client } = session;
  await session.connect();
  const pidfile = path.join(ROOT, "sleep.pid");
  const running = client
    .callTool({ name: "run_command", arguments: { command: `sleep 60 & echo $! > ${pidfile}; wait`, shell: "sh", timeout_seconds: 60 } })
    .then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
  await until("the command never started", () => fs.existsSync(pidfile) && fs.readFileSync(pidfile, "utf8").trim() !== "");
  const grandchild = Number(fs.readFileSync(pidfile, "utf8").trim());
  assert.ok(!ended(grandchild));
  assert.equal(await session.stop(), 0, "SIGTERM is a clean stop");
  await until("the command's tree outlived the server", () => ended(grandchild));
  // The call got no answer: closing the client ends it (instead of its 60 s timeout).
  await client.close();
  const outcome = await running;
  assert.ok(outcome.error || outcome.result?.isError, JSON.stringify(outcome.result));
  ok("a_signal_stops_the_server_and_its_command");
}

const COMPUTER_TOOLS = [
  "screenshot",
  "input_action",
  "cursor_position",
  "display_info",
  "list_windows",
  "focus_window",
  "list_apps",
  "launch_app",
  "accessibility_snapshot",
  "click_element",
  "type_into_element",
];

function pngSize(base64) {
  const data = Buffer.from(base64, "base64");
  assert.ok(data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])));
  return [data.readUInt32BE(16), data.readUInt32BE(20)];
}

/// Every desktop tool with every optional parameter on the private desktop the Rust side
/// started (its variables passed through), beside a witness window titled MCP_WITNESS_TITLE
/// whose process is MCP_WITNESS_PID.
async function desktop() {
  const [width, height] = [Number(process.env.MCP_SCREEN_WIDTH), Number(process.env.MCP_SCREEN_HEIGHT)];
  const title = process.env.MCP_WITNESS_TITLE;
  const witnessPid = Number(process.env.MCP_WITNESS_PID);
  const desktopEnv = {};
  for (const key of ["DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_SESSION_TYPE"]) {
    if (process.env[key] !== undefined) desktopEnv[key] = process.env[key];
  }
  const session = await connect(["--enable-computer-use", "--enable-clipboard"], {
    extraEnv: { ...desktopEnv, AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES: String(10 * 1024 * 1024) },
  });
  const { client } = session;
  await session.connect();
  const listed = await listing(client, [...FILE_TOOLS, ...COMPUTER_TOOLS, "read_clipboard", "write_clipboard"]);
  const { call, used } = caller(client);

  const info = payload(await call("display_info", {}));
  assert.deepEqual(info.monitors.map((m) => m.physical_size), [[width, height]]);
  const windows = payload(await call("list_windows", { include_minimized: true, include_offscreen: true }));
  const mine = windows.windows.filter((w) => w.title === title);
  assert.equal(mine.length, 1, JSON.stringify(windows));
  const [{ app_name: appName }] = mine;
  // Each listing binds ids of its own: the latest one's are used from here on.
  const byApp = payload(await call("list_windows", { app_bundle_id: appName ?? "python3" }));
  const ours = byApp.windows.filter((w) => w.title === title);
  assert.equal(ours.length, 1, JSON.stringify(byApp));
  const [{ window_id: windowId, bounds }] = ours;
  assert.deepEqual(payload(await call("focus_window", { window_id: windowId, raise: true })), { ok: true });
  ok("windows");

  const shot = await call("screenshot", { monitor: 0, format: "png", include_cursor: false });
  assert.notEqual(shot.isError, true);
  assert.deepEqual(pngSize(shot.content[0].data), [width, height]);
  const region = await call("screenshot", { region: [10, 20, 110, 70], format: "jpeg", quality: 60, include_cursor: true });
  assert.equal(region.content[0].mimeType, "image/jpeg");
  assert.ok(Buffer.from(region.content[0].data, "base64").subarray(0, 2).equals(Buffer.from([0xff, 0xd8])));
  const window = await call("screenshot", { window_id: windowId, format: "png" });
  const [w, h] = pngSize(window.content[0].data);
  assert.ok(w > 0 && w <= bounds[2] - bounds[0] + 64 && h > 0, JSON.stringify([w, h, bounds]));
  ok("screenshot");

  const centre = [Math.round((bounds[0] + bounds[2]) / 2), Math.round((bounds[1] + bounds[3]) / 2)];
  const acts = [
    { action: "mouse_move", coordinate: centre },
    { action: "left_click", coordinate: centre, button: "left", modifiers: ["shift"] },
    { action: "scroll", coordinate: centre, scroll_direction: "down", scroll_amount: 1, modifiers: [] },
    { action: "drag", path: [centre, [centre[0] + 5, centre[1] + 5]] },
    { action: "hold_key", key: "shift", duration_ms: 20 },
    { action: "wait", duration_ms: 20 },
    { action: "type", text: "ts", paste: false },
  ];
  for (const act of acts) assert.deepEqual(payload(await call("input_action", act)), { ok: true }, JSON.stringify(act));
  const at = payload(await call("cursor_position", {}));
  assert.equal(at.monitor, 0);
  failed(await call("input_action", { action: "left_click", coordinate: [width + 50, 10] }), "INPUT_OUT_OF_BOUNDS");
  ok("input_action");

  const apps = payload(await call("list_apps", { include_background: true })).apps;
  assert.ok(apps.some((app) => app.pid === witnessPid), JSON.stringify(apps));
  const launched = payload(await call("launch_app", { executable_path: "/bin/sleep", args: ["30"], activate: false }));
  assert.equal(typeof launched.pid, "number");
  process.kill(launched.pid, "SIGTERM");
  ok("apps");

  const snapshot = payload(await call("accessibility_snapshot", { window_id: windowId, max_elements: 50, max_depth: 32, deadline_ms: 8000 }));
  // "Press me", or "Pressed" once an earlier run on this witness clicked it.
  const button = snapshot.elements.find((e) => ["Press me", "Pressed"].includes(e.label) && e.role === "button");
  const entry = snapshot.elements.find((e) => e.label === "Your name");
  assert.ok(button && entry, JSON.stringify(snapshot));
  failed(await call("accessibility_snapshot", { window_id: "w-stale" }), "WINDOW_STALE");
  // Acting on a snapshot's ids: the click relabels the button, the entry keeps its id.
  assert.deepEqual(payload(await call("click_element", { element_id: button.id })), { ok: true });
  assert.deepEqual(payload(await call("type_into_element", { element_id: entry.id, text: "ts" })), { ok: true });
  // An id whose element changed (the first click relabels the button) or never existed is refused.
  if (button.label === "Press me") {
    for (let tries = 0; ; tries++) {
      const now = payload(await call("accessibility_snapshot", { window_id: windowId, max_elements: 50 }));
      if (now.elements.some((e) => e.label === "Pressed" && e.role === "button")) break;
      assert.ok(tries < 50, "the button did not relabel itself after the click");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    failed(await call("click_element", { element_id: button.id }), "WINDOW_STALE");
  }
  failed(await call("click_element", { element_id: "e999999" }), "WINDOW_STALE");
  assert.deepEqual(payload(await call("write_clipboard", { content: "from the ts sdk" })), { ok: true });
  assert.equal(payload(await call("read_clipboard", {})).content, "from the ts sdk");
  ok("accessibility_and_clipboard");

  for (const [name, tool] of Object.entries(listed)) {
    if (!COMPUTER_TOOLS.includes(name) && !name.endsWith("_clipboard")) continue;
    const missed = Object.keys(tool.inputSchema.properties).filter((key) => !used.get(name)?.has(key));
    assert.deepEqual(missed, [], `${name}: parameters never set`);
  }
  ok("every_parameter_was_set");
  assert.equal(await session.close(), 0);
}

const SCENARIOS = { tools, budget, roots, signal, desktop };
assert.ok(["stdio", "http"].includes(transportName), `unknown transport ${transportName}`);
assert.ok(SCENARIOS[scenario], `unknown scenario ${scenario}`);
await SCENARIOS[scenario]();
