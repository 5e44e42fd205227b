// tests/acp/client.mjs - drives `weir acp` with the client side of the
// official Agent Client Protocol SDK (@agentclientprotocol/sdk, pinned by
// tests/acp/package-lock.json), as an editor would.  Run by
// tests/scripts/acp_client.sh, which starts the mock LLM and writes the
// deployment; every address is 127.0.0.1.
//
//   node client.mjs   with WEIR (the weir binary), WEIR_ACP_CONFIG (the -c
//   file), WEIR_ACP_MODULES (the node_modules the SDK was installed in),
//   WEIR_MCP_FAKE (weir-mcp-fake) and WEIR_ACP_CWD (an absolute folder).
//
// First process: initialize; session/new with one stdio MCP server
// (weir-mcp-fake, with an env variable); a prompt whose tool call needs
// approval (hooks-shell's "ask"): the permission request arrives with the
// tool call and is allowed once, the call goes pending -> in_progress ->
// completed; a prompt calling the MCP server's tool; a prompt cancelled
// while its permission request waits and one cancelled while the model
// streams, by session/cancel and by the SDK's $/cancel_request (stopReason
// cancelled); a reply cut at the output limit
// (max_tokens) and a turn the provider failed (-32603 naming AUTH); a call
// rejected once, then two calls of which the first is allowed always (the
// second is not asked for); a malformed
// line (-32700), an unknown method (-32601) and a prompt without `prompt`
// (-32602), after which the session still answers a prompt.  Second
// process: session/load replays the same user and agent messages and tool
// calls.  Every session/update and request the SDK takes is checked against
// the schema by the SDK itself; the responses here against its zod schemas.
// Exit 0 when every check passed; else each failure is printed and exit 1.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join, dirname } from "node:path";
import { pathToFileURL } from "node:url";

const env = (k) => {
  const v = process.env[k];
  if (!v) {
    console.error(`FAIL: ${k} is not set`);
    process.exit(1);
  }
  return v;
};
const WEIR = env("WEIR");
const CONFIG = env("WEIR_ACP_CONFIG");
const MODULES = env("WEIR_ACP_MODULES");
const MCP_FAKE = env("WEIR_MCP_FAKE");
const CWD = env("WEIR_ACP_CWD");

// The SDK's entry point as its package.json "exports" names it.
const require = createRequire(join(MODULES, "resolve-from-here.js"));
const entry = require.resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(entry).href);
const zod = await import(pathToFileURL(join(dirname(entry), "../schema/zod.gen.js")).href);

let failures = 0;
const fail = (msg) => {
  failures++;
  console.error(`FAIL: ${msg}`);
};
const check = (cond, msg) => {
  if (!cond) fail(msg);
};
const schemaCheck = (schema, value, what) => {
  const r = schema.safeParse(value);
  if (!r.success) fail(`${what} does not match the ACP schema: ${r.error.message}`);
};
const withTimeout = (p, ms, what) =>
  Promise.race([
    p,
    // unref: a timer that did not fire keeps no process alive
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms).unref()),
  ]);

// One `weir acp` child: the SDK reads its stdout except the answers to our
// raw lines (id null or "raw-..."), which `raw` collects.
function startAgent(name) {
  const child = spawn(WEIR, ["acp", "-c", CONFIG], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const raw = [];
  let rawWaiters = [];
  let controller;
  const input = new ReadableStream({
    start(c) {
      controller = c;
    },
  });
  let pending = "";
  child.stdout.on("data", (d) => {
    pending += d.toString("utf8");
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let msg = null;
      try {
        msg = JSON.parse(line);
      } catch {
        fail(`${name}: stdout line is not JSON: ${line}`);
        continue;
      }
      if (msg && (msg.id === null || (typeof msg.id === "string" && msg.id.startsWith("raw-")))) {
        raw.push(msg);
        rawWaiters.forEach((w) => w());
        rawWaiters = [];
        continue;
      }
      controller.enqueue(new TextEncoder().encode(line + "\n"));
    }
  });
  child.stdout.on("end", () => {
    try {
      controller.close();
    } catch {}
  });
  const output = new WritableStream({
    write(chunk) {
      return new Promise((resolve, reject) => child.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
    },
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    child,
    stream: acp.ndJsonStream(output, input),
    raw,
    writeRaw: (line) => child.stdin.write(line + "\n"),
    waitRaw: async (n) => {
      const until = Date.now() + 20000;
      while (raw.length < n && Date.now() < until)
        await new Promise((r) => {
          rawWaiters.push(r);
          setTimeout(r, 200).unref();
        });
    },
    stderr: () => stderr,
    exited,
  };
}

// What one process saw: every update of the session, in order, and the
// permission requests.
function makeClient(name, rec, onPermission, onUpdate = async () => {}) {
  return acp
    .client({ name })
    .onNotification(acp.methods.client.session.update, async ({ params }) => {
      rec.updates.push(params.update);
      await onUpdate(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      rec.permissions.push({ params, updatesBefore: rec.updates.length });
      return onPermission(params);
    });
}

const toolStatuses = (updates, id) =>
  updates
    .filter((u) => (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.toolCallId === id)
    .map((u) => u.status)
    .filter((s) => s);
const textOf = (updates, kind) =>
  updates
    .filter((u) => u.sessionUpdate === kind && u.content.type === "text")
    .map((u) => u.content.text)
    .join("");

// ---- the first process -----------------------------------------------------
const live = { updates: [], permissions: [] };
let permissionMode = "allow";
let cancelPrompt = null; // set while the prompt to cancel runs
let cancelOnChunk = null; // set while the prompt to cancel mid-stream runs
const first = startAgent("first");
let sessionId = null;
const prompts = [
  "run 0123456789 through Bash",
  "read ACP_TEST_VAR through the MCP server",
  "run ls through Bash",
  "write a long line",
  "write another long line",
  "write more than you may",
  "use a bad key",
  "run abc through Bash",
  "run abc and abcd through Bash",
  "are you still there?",
];
try {
  await makeClient("weir-test-first", live, async (params) => {
    if (permissionMode === "allow") return { outcome: { outcome: "selected", optionId: "allow_once" } };
    if (permissionMode.startsWith("option:"))
      return { outcome: { outcome: "selected", optionId: permissionMode.slice(7) } };
    // the prompt to cancel: session/cancel, then (ACP) the pending request
    // is answered "cancelled"
    await cancelPrompt(params);
    return { outcome: { outcome: "cancelled" } };
  }, async (params) => {
    if (cancelOnChunk && params.update.sessionUpdate === "agent_message_chunk") {
      const cancel = cancelOnChunk;
      cancelOnChunk = null;
      await cancel();
    }
  }).connectWith(first.stream, async (ctx) => {
    const init = await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "weir-test", version: "1" },
      }),
      30000,
      "initialize",
    );
    schemaCheck(zod.zInitializeResponse, init, "initialize response");
    check(init.protocolVersion === acp.PROTOCOL_VERSION, `initialize: protocolVersion ${init.protocolVersion}`);
    check(init.agentCapabilities?.loadSession === true, "initialize: loadSession is not true");
    check(init.agentCapabilities?.mcpCapabilities?.http === true, "initialize: mcpCapabilities.http");

    const created = await withTimeout(
      ctx.request(acp.methods.agent.session.new, {
        cwd: CWD,
        mcpServers: [
          { name: "fake", command: MCP_FAKE, args: [], env: [{ name: "ACP_TEST_VAR", value: "from-acp" }] },
        ],
      }),
      60000,
      "session/new",
    );
    schemaCheck(zod.zNewSessionResponse, created, "session/new response");
    sessionId = created.sessionId;
    check(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(sessionId || ""), `session/new: sessionId ${sessionId}`);
    const prompt = (text) =>
      withTimeout(
        ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] }),
        60000,
        `session/prompt "${text}"`,
      );

    // 1. a tool call that needs approval, allowed once
    let mark = live.updates.length;
    let r = await prompt(prompts[0]);
    schemaCheck(zod.zPromptResponse, r, "session/prompt response");
    check(r.stopReason === "end_turn", `prompt 1: stopReason ${r.stopReason}`);
    check(live.permissions.length === 1, `prompt 1: ${live.permissions.length} permission requests`);
    const perm = live.permissions[0];
    if (perm) {
      check(perm.params.sessionId === sessionId, "permission: another sessionId");
      check(perm.params.toolCall.toolCallId === "call_1", `permission: toolCallId ${perm.params.toolCall.toolCallId}`);
      check(perm.params.toolCall.rawInput?.command === "0123456789", "permission: rawInput lacks the command");
      const kinds = perm.params.options.map((o) => o.kind).sort().join(",");
      check(kinds === "allow_always,allow_once,reject_always,reject_once", `permission: options ${kinds}`);
      const before = live.updates.slice(mark, perm.updatesBefore);
      check(
        before.some((u) => u.sessionUpdate === "tool_call" && u.toolCallId === "call_1"),
        "permission: the tool_call update did not come before it",
      );
    }
    let upd = live.updates.slice(mark);
    const st = toolStatuses(upd, "call_1").join(" -> ");
    check(st === "pending -> in_progress -> completed", `call_1 statuses: ${st}`);
    const done = upd.find((u) => u.toolCallId === "call_1" && u.status === "completed");
    check(done?.content?.[0]?.content?.text === "10", `call_1 result: ${JSON.stringify(done?.content)}`);
    check(textOf(upd, "agent_message_chunk") === "I will run it.ran it: 10", `prompt 1 text: ${textOf(upd, "agent_message_chunk")}`);

    // 2. the MCP server the client passed is a tool of the session
    mark = live.updates.length;
    r = await prompt(prompts[1]);
    check(r.stopReason === "end_turn", `prompt 2: stopReason ${r.stopReason}`);
    upd = live.updates.slice(mark);
    const st2 = toolStatuses(upd, "call_2").join(" -> ");
    check(st2 === "pending -> in_progress -> completed", `call_2 (MCP) statuses: ${st2}`);
    const mcpCall = upd.find((u) => u.sessionUpdate === "tool_call" && u.toolCallId === "call_2");
    check(mcpCall?.title === "mcp__fake__env", `call_2 title: ${mcpCall?.title}`);
    const mcpDone = upd.find((u) => u.toolCallId === "call_2" && u.status === "completed");
    check(JSON.stringify(mcpDone?.content || "").includes("from-acp"), `call_2 result: ${JSON.stringify(mcpDone?.content)}`);
    check(live.permissions.length === 1, "prompt 2 asked for permission");

    // 3. cancelled while its permission request waits
    permissionMode = "cancel";
    let cancelled = false;
    cancelPrompt = async (params) => {
      check(params.toolCall.toolCallId === "call_3", `cancel: permission for ${params.toolCall.toolCallId}`);
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      cancelled = true;
    };
    r = await prompt(prompts[2]);
    check(cancelled, "prompt 3: no permission request to cancel at");
    check(r.stopReason === "cancelled", `prompt 3: stopReason ${r.stopReason}`);
    const st3 = toolStatuses(live.updates, "call_3");
    check(!st3.includes("in_progress") && !st3.includes("completed"), `call_3 ran: ${st3.join(" -> ")}`);

    // 4. cancelled while the model streams its answer (one character every
    // 100 ms): at its first chunk
    let streamCancelled = false;
    cancelOnChunk = async () => {
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      streamCancelled = true;
    };
    mark = live.updates.length;
    r = await prompt(prompts[3]);
    check(streamCancelled, "prompt 4: no chunk to cancel at");
    check(r.stopReason === "cancelled", `prompt 4: stopReason ${r.stopReason}`);
    const partial = textOf(live.updates.slice(mark), "agent_message_chunk");
    check(partial.length > 0 && partial.length < 30, `prompt 4: streamed "${partial}" (cancelled at once?)`);

    // 4b. the same through the SDK's own request cancellation ($/cancel_request)
    const abort = new AbortController();
    let aborted = false;
    cancelOnChunk = async () => {
      abort.abort();
      aborted = true;
    };
    r = await withTimeout(
      ctx.request(
        acp.methods.agent.session.prompt,
        { sessionId, prompt: [{ type: "text", text: prompts[4] }] },
        { cancellationSignal: abort.signal },
      ),
      60000,
      "the prompt cancelled by $/cancel_request",
    );
    check(aborted, "prompt 4b: no chunk to cancel at");
    check(r.stopReason === "cancelled", `prompt 4b ($/cancel_request): stopReason ${r.stopReason}`);

    // 5. the output limit is max_tokens; a turn that failed is a JSON-RPC
    // error naming weir's failure code
    r = await prompt(prompts[5]);
    check(r.stopReason === "max_tokens", `prompt 5: stopReason ${r.stopReason}`);
    let failed = null;
    await prompt(prompts[6]).catch((e) => (failed = e));
    check(failed?.code === -32603 && /AUTH/.test(failed?.message), `prompt 6: ${failed?.code} ${failed?.message}`);

    // 6. reject_once denies the call (failed, with the reason); allow_always
    // allows it and the next call of the tool without asking
    permissionMode = "option:reject_once";
    let asked = live.permissions.length;
    mark = live.updates.length;
    r = await prompt(prompts[7]);
    check(r.stopReason === "end_turn", `prompt 7: stopReason ${r.stopReason}`);
    check(live.permissions.length === asked + 1, "prompt 7: no permission request");
    const rejected = live.updates.slice(mark).find((u) => u.toolCallId === "call_r" && u.status === "failed");
    check(
      /not approved: rejected by the client \(reject_once\)/.test(JSON.stringify(rejected?.content)),
      `call_r: ${toolStatuses(live.updates, "call_r").join(" -> ")} ${JSON.stringify(rejected?.content)}`,
    );
    permissionMode = "option:allow_always";
    asked = live.permissions.length;
    r = await prompt(prompts[8]);
    check(r.stopReason === "end_turn", `prompt 8: stopReason ${r.stopReason}`);
    check(live.permissions.length === asked + 1, `prompt 8: ${live.permissions.length - asked} permission requests, expected 1`);
    for (const id of ["call_a", "call_b"]) {
      const st = toolStatuses(live.updates, id).join(" -> ");
      check(st === "pending -> in_progress -> completed", `${id} statuses: ${st}`);
    }

    // 7. bad input is a JSON-RPC error and the session goes on
    first.writeRaw("{not json");
    first.writeRaw(JSON.stringify({ jsonrpc: "2.0", id: "raw-1", method: "weir/no-such-method", params: {} }));
    first.writeRaw(JSON.stringify({ jsonrpc: "2.0", id: "raw-2", method: "session/prompt", params: { sessionId } }));
    first.writeRaw(JSON.stringify({ jsonrpc: "2.0", method: "weir/no-such-notification", params: {} }));
    await first.waitRaw(3);
    const byId = (id) => first.raw.find((m) => m.id === id);
    check(byId(null)?.error?.code === -32700, `malformed line: ${JSON.stringify(byId(null))}`);
    check(byId("raw-1")?.error?.code === -32601, `unknown method: ${JSON.stringify(byId("raw-1"))}`);
    const bad = byId("raw-2");
    check(bad?.error?.code === -32602 && /prompt/.test(bad?.error?.message), `bad params: ${JSON.stringify(bad)}`);
    mark = live.updates.length;
    r = await prompt(prompts[9]);
    check(r.stopReason === "end_turn", `prompt 9 after bad input: stopReason ${r.stopReason}`);
    check(textOf(live.updates.slice(mark), "agent_message_chunk") === "still here.", "prompt 9: its text");
  });
} catch (e) {
  fail(`first process: ${e?.stack || e}`);
}
first.child.stdin.end();
const firstExit = await withTimeout(first.exited, 30000, "the first weir acp to exit").catch((e) => ({ code: String(e) }));
check(firstExit.code === 0, `first weir acp exited ${JSON.stringify(firstExit)}: ${first.stderr()}`);
check(first.raw.length === 3, `${first.raw.length} answers to 3 raw lines (a notification got one?)`);
check(!/Sanitizer|runtime error/.test(first.stderr()), `first: sanitizer report: ${first.stderr()}`);

// ---- the second process: session/load replays -------------------------------
const replay = { updates: [], permissions: [] };
const second = startAgent("second");
try {
  await makeClient("weir-test-second", replay, async () => ({ outcome: { outcome: "cancelled" } })).connectWith(
    second.stream,
    async (ctx) => {
      await withTimeout(ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION }), 30000, "initialize");
      const loaded = await withTimeout(
        ctx.request(acp.methods.agent.session.load, { sessionId, cwd: CWD, mcpServers: [] }),
        30000,
        "session/load",
      );
      schemaCheck(zod.zLoadSessionResponse, loaded, "session/load response");
      // an unknown session is an error, not a new session
      let err = null;
      await ctx
        .request(acp.methods.agent.session.load, { sessionId: "no-such-session", cwd: CWD, mcpServers: [] })
        .catch((e) => (err = e));
      check(err?.code === -32002, `session/load of an unknown session: ${err?.code} ${err?.message}`);
    },
  );
} catch (e) {
  fail(`second process: ${e?.stack || e}`);
}
second.child.stdin.end();
const secondExit = await withTimeout(second.exited, 30000, "the second weir acp to exit").catch((e) => ({ code: String(e) }));
check(secondExit.code === 0, `second weir acp exited ${JSON.stringify(secondExit)}: ${second.stderr()}`);
check(!/Sanitizer|runtime error/.test(second.stderr()), `second: sanitizer report: ${second.stderr()}`);

const users = replay.updates.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text);
check(JSON.stringify(users) === JSON.stringify(prompts), `replayed user messages: ${JSON.stringify(users)}`);
const liveText = textOf(live.updates, "agent_message_chunk");
const replayText = textOf(replay.updates, "agent_message_chunk");
check(liveText === replayText, `replayed agent text "${replayText}" is not the live "${liveText}"`);
const calls = (updates) => updates.filter((u) => u.sessionUpdate === "tool_call").map((u) => `${u.toolCallId}:${u.title}`);
check(
  JSON.stringify(calls(replay.updates)) === JSON.stringify(calls(live.updates)) && calls(live.updates).length === 6,
  `replayed tool calls ${JSON.stringify(calls(replay.updates))}, live ${JSON.stringify(calls(live.updates))}`,
);
for (const id of ["call_1", "call_2", "call_3", "call_r", "call_a", "call_b"]) {
  const last = (u) => toolStatuses(u, id).at(-1);
  check(last(replay.updates) === last(live.updates), `${id}: replayed status ${last(replay.updates)}, live ${last(live.updates)}`);
}
check(replay.permissions.length === 0, "the replay asked for permission");

if (failures) {
  console.error(`acp client: ${failures} check(s) failed`);
  process.exit(1);
}
console.log("acp client: every check passed");
