/*
 * core/format/hook_catalog.c - the hook catalog: the one table of hook names,
 * modes, payloads and results.  docs/hooks.md (weir hooks --markdown),
 * `weir hooks --catalog` and waterfall result validation all come from it.
 * In every payload `agent` is the agent's session id string.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hook_catalog.h"
#include "weir/host.h"

/* Result schemas (JSON Schema subset of docs/schema.md). */
#define S_ASSEMBLY                                                                      \
    "{\"type\":\"object\",\"required\":[\"sections\",\"tools\",\"variables\"],"         \
    "\"properties\":{"                                                                  \
    "\"sections\":{\"type\":\"array\",\"items\":{\"type\":\"object\","                  \
    "\"required\":[\"name\",\"order\",\"text\"],\"properties\":{"                       \
    "\"name\":{\"type\":\"string\"},\"order\":{\"type\":\"integer\"},"                  \
    "\"text\":{\"type\":\"string\"}}}},"                                                \
    "\"tools\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"                   \
    "\"variables\":{\"type\":\"object\"}}}"

#define S_ADMIT                                                                         \
    "{\"oneOf\":["                                                                      \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"admit\"},\"message\":{\"type\":\"object\"}}},"                \
    "{\"type\":\"object\",\"required\":[\"kind\",\"reason\"],\"properties\":{"          \
    "\"kind\":{\"const\":\"refuse\"},\"reason\":{\"type\":\"string\"}}}]}"

#define S_PRE_STEP                                                                      \
    "{\"oneOf\":["                                                                      \
    "{\"type\":\"object\",\"required\":[\"kind\",\"messages\"],\"properties\":{"        \
    "\"kind\":{\"const\":\"enter\"},\"messages\":{\"type\":\"array\"},"                 \
    "\"starts_request_series\":{\"type\":\"boolean\"}}},"                               \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"reject\"},\"reason\":{\"type\":\"string\"}}}]}"

#define S_REQUEST                                                                       \
    "{\"type\":\"object\",\"required\":[\"provider\",\"model\"],\"properties\":{"       \
    "\"provider\":{\"type\":\"string\"},\"model\":{\"type\":\"string\"},"               \
    "\"max_tokens\":{\"type\":\"integer\"},\"temperature\":{\"type\":\"number\"},"    \
    "\"options\":{\"type\":\"object\"}}}"

#define S_STREAM                                                                        \
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"type\"],"       \
    "\"properties\":{\"type\":{\"type\":\"string\"}}}}"

#define S_REQUEST_ERROR                                                                 \
    "{\"oneOf\":[{\"type\":\"null\"},"                                                  \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"retry\"}}},"                                                  \
    "{\"type\":\"object\",\"required\":[\"kind\",\"error\"],\"properties\":{"          \
    "\"kind\":{\"const\":\"error\"},\"error\":{\"type\":\"object\","                   \
    "\"required\":[\"code\",\"message\"],\"properties\":{"                              \
    "\"code\":{\"type\":\"string\"},\"message\":{\"type\":\"string\"}}}}}]}"

#define S_PRE_EXECUTE                                                                   \
    "{\"oneOf\":["                                                                      \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"allow\"},\"arguments\":{\"type\":\"object\"}}},"              \
    "{\"type\":\"object\",\"required\":[\"kind\",\"reason\"],\"properties\":{"          \
    "\"kind\":{\"const\":\"deny\"},\"reason\":{\"type\":\"string\"}}}]}"

#define S_PRE_COMPACT                                                                   \
    "{\"oneOf\":["                                                                      \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"proceed\"}}},"                                               \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"const\":\"block\"},\"reason\":{\"type\":\"string\"}}}]}"

#define S_POST_EXECUTE                                                                  \
    "{\"type\":\"object\",\"required\":[\"content\"],\"properties\":{"                  \
    "\"content\":{\"type\":\"array\"},\"is_error\":{\"type\":\"boolean\"},"             \
    "\"additional_contexts\":{\"type\":\"array\"}}}"

#define S_COMPACT                                                                       \
    "{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"                     \
    "\"kind\":{\"enum\":[\"compacted\",\"declined\",\"failed\"]},"                      \
    "\"message\":{\"type\":\"string\"}}}"

#define NONE "none (results are ignored)"

const weir__hook_def weir__hook_catalog[] = {
    /* --- waterfall ------------------------------------------------------ */
    {"agent/admit", WEIR__HOOK_WATERFALL,
     "{agent, input_id, mode:\"followup\"|\"steer\"|\"inject\", origin:\"send\"|\"store\", "
     "message:{role:\"user\", content:[blocks], id, source}} (every input of a send or of a "
     "shared store's queue, before anything of it is logged; on the sender's thread)",
     "{kind:\"admit\", message?} (default: the message as given; message: a user message "
     "that replaces it, keeping its id; it is what is logged and checked against the caps) "
     "or {kind:\"refuse\", reason} (nothing of the input is logged; the send fails with "
     "E_REFUSED and the reason). A failure refuses too (fail closed, E_HOOK_FAILED)",
     S_ADMIT, "Admit, rewrite or refuse one input before it is logged (a guard's redaction)."},
    {"system-prompt/assemble", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, assembly:{sections:[{name, order, text}], tools:[schema], "
     "variables:{}}} (order: an integer)",
     "the assembly {sections, tools, variables}; default: the assembly as given. The core "
     "renders the sections whose text is not empty by ascending integer `order` (ties keep "
     "their order in the list), joined by a blank line, with each {{name}} replaced by the "
     "string or number variables.name. The core adds no section of its own: each "
     "system-prompt row adds one per `text` and per file, named after the row id (or its "
     "config `name`), with its config `order` (default 0). The default deployment has one, "
     "{name:\"prompt\", order:0}",
     S_ASSEMBLY, "Build the system prompt: add, change or drop sections, tools and variables."},
    {"agent/pre-step", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, messages:[user messages], native?}",
     "{kind:\"enter\", messages, starts_request_series?} (default: the claimed messages) or "
     "{kind:\"reject\", reason?} (the turn ends blocked: turn/end reason {kind:\"blocked\", "
     "plugin, reason?}, plugin = the row that rejected); with native:true (native input the "
     "provider applied inside the running step's stream) the entered messages are logged there "
     "and a reject only drops the input",
     S_PRE_STEP, "Decide whether a step starts and which user messages enter it."},
    {"agent/request", WEIR__HOOK_WATERFALL, "{agent, turn, step}",
     "call config {provider, model, max_tokens?, temperature?, options?, ...} (options: an "
     "object merged last into the request body, over the provider row's and model's; keys the "
     "provider owns are refused); default: the agent options on the first request, the logged "
     "header after",
     S_REQUEST, "Choose the provider, model and options of the next model request."},
    {"llm/stream", WEIR__HOOK_WATERFALL, "{agent, turn, step, request, purpose?} (request = "
     "the frozen model request; purpose only on a plugin's direct call, e.g. \"compaction\" "
     "for a summary: agent_complete_stream)",
     "the array of stream chunks (each with a string `type`); default: the provider's stream",
     S_STREAM, "Wrap a model call: observe or transform the chunks, or produce them (replay)."},
    {"agent/request-error", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, provider, failure, prior_failures:[failure]}",
     "{kind:\"retry\"}, null (default: null = the failure is terminal) or {kind:\"error\", "
     "error:{code, message, ...}} (terminal: the turn ends with this failure instead)",
     S_REQUEST_ERROR,
     "Handle one failed model request: return {kind:\"retry\"} to try again."},
    {"tools/pre-execute", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, call_id, name, arguments, idempotency_key, attempt} (attempt 2+: "
     "an idempotent call run again after a crash)",
     "{kind:\"allow\", arguments?} (default {kind:\"allow\"}; arguments: an object the "
     "call runs with instead, checked against the tool's schema) or {kind:\"deny\", reason}",
     S_PRE_EXECUTE,
     "Allow or deny one tool call before it runs."},
    {"tools/post-execute", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, call_id, name, arguments, idempotency_key, attempt, job_id?, "
     "result:{content, is_error}} (job_id: a background job's result, when it is settled; "
     "the receipt skips this hook)",
     "{content:[blocks], is_error?, additional_contexts?:[messages]}; default: the result",
     S_POST_EXECUTE, "Change a tool result before the model sees it, or add context."},
    {"agent/compact", WEIR__HOOK_WATERFALL, "{agent, turn, instructions?} (turn = the last "
     "closed turn; between turns only)",
     "{kind:\"compacted\"|\"declined\"|\"failed\", message?, ...}; default: {kind:"
     "\"declined\"} (no plugin compacts)",
     S_COMPACT, "Compact the context now, on request (weir_agent_compact, `weir compact`)."},
    {"agent/pre-compact", WEIR__HOOK_WATERFALL,
     "{agent, turn, step, trigger:\"auto\"|\"manual\", cause?, instructions?} (raised by "
     "a compaction plugin through api->hook_invoke, before its compaction/start; "
     "compaction-basic's cause: pressure, overflow or manual)",
     "{kind:\"proceed\"} (default) or {kind:\"block\", reason?} (the compaction does not "
     "start)",
     S_PRE_COMPACT, "A compaction is about to start: let it go on or block it."},
    /* --- serial --------------------------------------------------------- */
    {"agent/turn-stopping", WEIR__HOOK_SERIAL, "{agent, turn}",
     "none; a listener that objects calls weir_agent_steer()", NULL,
     "The turn is about to end; a listener may steer to keep it going."},
    {"agent/created", WEIR__HOOK_SERIAL, "{agent, source}", "none", NULL,
     "An agent was created or resumed (source says which)."},
    /* --- emit ----------------------------------------------------------- */
    {"agent/status", WEIR__HOOK_EMIT, "{agent, status}", NONE, NULL,
     "The agent's status changed."},
    {"agent/inbox/inserted", WEIR__HOOK_EMIT, "{agent, message}", NONE, NULL,
     "A message was queued in the inbox."},
    {"agent/inbox/discarded", WEIR__HOOK_EMIT, "{agent, message}", NONE, NULL,
     "A queued message was removed without being delivered."},
    {"agent/inbox/claimed", WEIR__HOOK_EMIT, "{agent, message, turn}", NONE, NULL,
     "A queued message was taken into a turn."},
    {"agent/inbox/acknowledged", WEIR__HOOK_EMIT, "{agent, message, duplicate:true}", NONE,
     NULL, "An input was sent again with the same id and content: nothing was queued."},
    {"agent/inbox/held", WEIR__HOOK_EMIT, "{agent, message, turn}", NONE, NULL,
     "Anchored input its turn did not take was removed (never falls forward)."},
    {"steering/owned", WEIR__HOOK_EMIT, "{agent, input_id, turn, step, message, provider}", NONE,
     NULL, "The streaming provider took a steer (native steering): it owns it now."},
    {"steering/accepted", WEIR__HOOK_EMIT, "{agent, input_id, turn, step}", NONE, NULL,
     "The provider reports that the remote side accepted native input."},
    {"steering/applied", WEIR__HOOK_EMIT, "{agent, input_id, turn, step}", NONE, NULL,
     "The provider reports native input applied; it was logged as user/message."},
    {"steering/refused", WEIR__HOOK_EMIT, "{agent, input_id, turn, step}", NONE, NULL,
     "The provider refused native input it had taken; it was queued instead."},
    {"steering/unknown", WEIR__HOOK_EMIT,
     "{agent, input_id, turn, step, message, provider, route:\"native\", error}", NONE, NULL,
     "steer_live failed or gave no definite answer: the input's effect is unknown."},
    {"agent/assistant-stream", WEIR__HOOK_EMIT, "{agent, frame}", NONE, NULL,
     "One frame of the assistant's streamed output."},
    {"agent/error", WEIR__HOOK_EMIT, "{agent, turn, step, error}", NONE, NULL,
     "An error ended a step or turn."},
    {"session/event", WEIR__HOOK_EMIT, "{agent, event}", NONE, NULL,
     "An event was appended to the session log (event = the log envelope)."},
    {"tool/progress", WEIR__HOOK_EMIT,
     "{agent, turn, step, call_id, name, progress:{progress, total?, message?, ...}}",
     NONE, NULL,
     "A running tool reported progress (tool_exec_progress; live only, never logged)."},
    {"tools/result", WEIR__HOOK_EMIT, "{agent, call_id, name, result}", NONE, NULL,
     "A tool call finished (after tools/post-execute)."},
    {"agent/disposed", WEIR__HOOK_EMIT, "{agent}", NONE, NULL, "The agent was disposed."},
};

const size_t weir__hook_catalog_len = sizeof weir__hook_catalog / sizeof weir__hook_catalog[0];

/* Names -> catalog entries: an open-addressing table built once (every hook
 * invocation looks its name up, so a linear walk of strcmp's is per-step cost). */
#define FIND_SLOTS 128 /* a power of two, over twice the catalog */
static unsigned char find_slot[FIND_SLOTS]; /* catalog index + 1, 0 = empty */
static pthread_once_t find_once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void find_init(void) {
    _Static_assert(sizeof weir__hook_catalog / sizeof weir__hook_catalog[0] < FIND_SLOTS / 2,
                   "FIND_SLOTS must stay over twice the catalog");
    for (size_t i = 0; i < weir__hook_catalog_len; i++) {
        uint32_t at = name_hash(weir__hook_catalog[i].name) & (FIND_SLOTS - 1);
        while (find_slot[at])
            at = (at + 1) & (FIND_SLOTS - 1);
        find_slot[at] = (unsigned char)(i + 1);
    }
}

const weir__hook_def *weir__hook_find(const char *name) {
    if (!name)
        return NULL;
    pthread_once(&find_once, find_init);
    for (uint32_t at = name_hash(name) & (FIND_SLOTS - 1); find_slot[at];
         at = (at + 1) & (FIND_SLOTS - 1)) {
        const weir__hook_def *d = &weir__hook_catalog[find_slot[at] - 1];
        if (strcmp(d->name, name) == 0)
            return d;
    }
    return NULL;
}

const char *weir__hook_mode_name(weir__hook_mode mode) {
    switch (mode) {
    case WEIR__HOOK_EMIT:
        return "emit";
    case WEIR__HOOK_SERIAL:
        return "serial";
    case WEIR__HOOK_WATERFALL:
        return "waterfall";
    }
    return "unknown";
}

static const char MD_INTRO[] =
    "# Hook catalog\n"
    "\n"
    "<!-- Generated from core/format/hook_catalog.c by `weir hooks --markdown > docs/hooks.md`.\n"
    "     Do not edit by hand: test_hooks fails when this file differs. -->\n"
    "\n"
    "Plugins register listeners on these hooks during `init` with\n"
    "`weir_hook_register(self, hook, fn, &opts)`. A listener is\n"
    "`json_t *fn(weir_call *call, const json_t *args, void *user_data)`: `args` is\n"
    "borrowed and read-only, the return value is a new reference. In every payload\n"
    "`agent` is the agent's session id. Listeners for one agent only are added in\n"
    "`agent/created` with `weir_agent_hook_register`, or by an embedder through\n"
    "`weir_agent_options.hooks` (docs/plugins.md, \"Hooks per agent\").\n"
    "\n"
    "## Modes\n"
    "\n"
    "- **emit**: every listener runs, in chain order; results are ignored. A listener\n"
    "  that calls `weir_call_fail()` and returns NULL is logged to stderr as\n"
    "  `weir: hook <hook>: plugin <id> failed: <message>` and the next one runs.\n"
    "- **serial**: listeners run in order; each must return a value (`json_null()` is\n"
    "  fine). The first that returns NULL stops the chain and fails the invocation.\n"
    "- **waterfall**: around-middleware. The outermost listener runs first; calling\n"
    "  `weir_next(call)` runs the rest of the chain and then the core default, and\n"
    "  returns that result (a new reference) to be returned as is, changed or\n"
    "  replaced. The result may be shared (the default often returns part of the\n"
    "  payload, a listener what it keeps): never change it in place; change a copy\n"
    "  (`json_deep_copy`), release the original and return the copy. Not calling `weir_next()` short-circuits every later listener and the\n"
    "  default. Calling it twice is allowed and runs the inner chain again. The\n"
    "  outermost result is authoritative: the core validates it against the hook's\n"
    "  result schema and fails with `E_HOOK_RESULT` naming the outermost listener's\n"
    "  plugin (or `core default` when the chain is empty). A result no listener made\n"
    "  (every listener passed `weir_next()`'s value on) of a default that is the core's\n"
    "  own code (`system-prompt/assemble`, `agent/pre-step`, `agent/request`) is not\n"
    "  validated, nor is `llm/stream`'s default result: the array the host collected\n"
    "  the provider's chunks in, each checked as it was emitted (`weir_stream_emit`\n"
    "  refuses a chunk that is not an object with a string `type`).\n"
    "\n"
    "## Failures\n"
    "\n"
    "A listener fails by returning NULL, after `weir_call_fail(call, fmt, ...)` to say\n"
    "why (otherwise the message is `returned no result`). In a waterfall the failure\n"
    "travels outward: `weir_next()` returns NULL to the outer listener, which normally\n"
    "returns NULL too; returning a value instead recovers. An unrecovered failure fails\n"
    "the invocation with `E_HOOK_FAILED`; the error names the hook and the plugin whose\n"
    "listener failed: `hook <hook>: plugin <id> failed: <message>`.\n"
    "\n"
    "## Order\n"
    "\n"
    "Chains are ordered once, when the host freezes after every plugin's `init`:\n"
    "\n"
    "1. placement `WEIR_ORDER_FIRST`, `WEIR_ORDER_MIDDLE` (default), `WEIR_ORDER_LAST`;\n"
    "2. then the plugin's position in the deployment config;\n"
    "3. then registration order;\n"
    "4. then `before`/`after` (plugin ids): each place in the chain takes the earliest\n"
    "   listener, in the order above, whose required predecessors are all placed (APR's\n"
    "   tsort), so only listeners that must wait move, and they move later.\n"
    "\n"
    "A cycle fails with `E_HOOK_ORDER` listing it (`a -> b -> a`, a runs before b);\n"
    "naming a plugin that is not loaded fails with `E_HOOK_ORDER` naming the hook, the\n"
    "registering plugin and the unknown id. After the freeze chains are read-only\n"
    "(registering fails with `E_TOO_LATE`). `weir hooks -c CONFIG` prints each chain:\n"
    "\n"
    "```\n"
    "agent/request (waterfall)\n"
    "  1. router  [first] before=audit after=-\n"
    "  2. audit  [middle] before=- after=-\n"
    "```\n"
    "\n"
    "## Tracing\n"
    "\n"
    "With `WEIR_TRACE=1` in the environment (read when the host is created), every hop\n"
    "of every invocation prints one line to stderr when it returns:\n"
    "\n"
    "```\n"
    "weir-trace: <hook> <mode> plugin=<id> outcome=<outcome> us=<microseconds>\n"
    "```\n"
    "\n"
    "`outcome` is `ok` (emit/serial listener, or the core default), `next` (a waterfall\n"
    "listener that called `weir_next()` and returned a value), `short-circuit` (one\n"
    "that returned a value without calling it) or `failed`. The core default prints\n"
    "`plugin=(default)`. Inner hops return first, so they print before outer ones;\n"
    "`us` includes the inner hops. A row's `on_error: \"skip\"` prints `skipped`, a\n"
    "quarantined row `quarantined`.\n"
    "\n"
    "## Provenance\n"
    "\n"
    "Every hop of an agent's invocation whose result differs from what its\n"
    "`weir_next()` returned, and every short-circuit (no `weir_next()` call), appends\n"
    "the ignorable event `hook/decision {hook, plugin, row, decision, turn, step,\n"
    "latency_us, detail?}` to the agent's session log. `plugin` is\n"
    "`<name>@<version>` of the row's plugin (an embedder's listener: its id), `row`\n"
    "the config row id, `turn` and `step` the payload's (0 when it has none),\n"
    "`latency_us` the hop's own time without the inner hops it ran, `detail` a short\n"
    "reason (the result's `reason`, a failure's `code`, `provider/model` for\n"
    "`agent/request`, a skipped failure's message; at most 159 bytes), never a copy\n"
    "of the payload. The decision, by hook:\n"
    "\n"
    "| hook | result | decision |\n"
    "|---|---|---|\n"
    "| `agent/admit` | `{kind:\"refuse\"}` / `admit` with a `message` / other `admit` | `refuse` / `rewrite` / `admit` (the record carries `input_id`) |\n"
    "| `agent/pre-step` | `{kind:\"reject\"}` | `reject` |\n"
    "| `agent/pre-step` | `enter` with more messages than were claimed | `inject` |\n"
    "| `agent/pre-step` | other `enter` | `enter` |\n"
    "| `tools/pre-execute` | `deny` / `allow` | `deny` / `allow` |\n"
    "| `agent/request-error` | `retry` / `error` | `retry` / `replace` |\n"
    "| `agent/request-error` | `null` | `short-circuit`, else `rewrite` |\n"
    "| `llm/stream` | chunks | `replace` (short-circuit), else `rewrite` |\n"
    "| `tools/post-execute` | result | `replace` (short-circuit), `inject` (more `additional_contexts` than `weir_next()` gave), else `rewrite` |\n"
    "| `agent/turn-stopping` (serial) | the listener steered (queued next-step input) | `steer` |\n"
    "| any other waterfall | value | `short-circuit`, else `rewrite` |\n"
    "\n"
    "A row with `on_error: \"skip\"` whose listener failed logs `skip` (below).\n"
    "*Differs* is pointer identity: a listener that returns what `weir_next()` gave\n"
    "it (`return weir_next(call);`, or that reference after reading it) is a\n"
    "pass-through hop and logs nothing; one that returns any other value, even an\n"
    "equal copy, made a decision. The core never compares payloads: the check is one\n"
    "pointer comparison per hop (the core holds a reference on `weir_next()`'s result\n"
    "until the hop returns, so its address cannot be reused by the listener's own\n"
    "value). Changing `weir_next()`'s result in place is not allowed (it may be\n"
    "shared) and would not be seen. Emit hooks log nothing (`session/event` runs\n"
    "inside the log's delivery of an append), invocations without an agent (no log)\n"
    "neither; the events are appended on the invoking thread, never under the log's\n"
    "lock. `session.provenance` sets what is logged: `\"decisions\"` (the default),\n"
    "`\"all\"` (also a `pass` for each pass-through waterfall or serial listener hop)\n"
    "or `\"off\"` (nothing). Inner hops finish first, so their decisions come first.\n"
    "\n"
    "`weir log ID --why SEQ` prints the decisions that shaped the event at SEQ, newest\n"
    "first: the `hook/decision` events before SEQ in the same turn, of the same step,\n"
    "turn-level (step 0) or `system-prompt/assemble` (one assembly serves the turn).\n"
    "An event without a turn (`request/header`) takes the turn and step of the latest\n"
    "event before it that has one; one with a turn but no step (`turn/end`) takes\n"
    "every step of its turn. `--json` prints the events themselves.\n"
    "\n"
    "## Fault policy\n"
    "\n"
    "Each plugin row may set, next to `id`, `plugin` and `config` (docs/config.md;\n"
    "validated at load):\n"
    "\n"
    "- `on_error`: `\"fail\"` (the default: a waterfall listener's failure travels\n"
    "  outward as above; a serial one fails the invocation) or `\"skip\"`: a listener\n"
    "  of the row that fails on its own (not an inner failure passed through) is\n"
    "  treated as if it had called `weir_next()` and returned its value (in a serial\n"
    "  hook: as if it returned `json_null()`), with a warning on stderr\n"
    "  (`weir: warning: hook H: plugin R failed: MSG (on_error skip: passed on)`) and\n"
    "  a `hook/decision` `skip` whose detail is the message. When the listener had\n"
    "  already called `weir_next()`, that result is used and the inner chain does not\n"
    "  run again.\n"
    "- `max_failures: N`: after N consecutive failures of the row's listeners (any\n"
    "  hook, any agent; a success resets the count) the row is quarantined for the\n"
    "  rest of the process: its listeners are passed over as if they had called\n"
    "  `weir_next()`. The core prints `weir: error: hook H: row R quarantined after N\n"
    "  consecutive failures ...` and appends the ignorable `hook/quarantined {hook,\n"
    "  plugin, row, turn, step, failures, error}`; `weir hooks` (and\n"
    "  `weir_host_dump_hooks`) marks the row `QUARANTINED`.\n"
    "- `budget_ms: N`: a hop of the row whose own time (without the inner hops it ran\n"
    "  through `weir_next()`) exceeds N ms is reported on stderr (`weir: warning: hook\n"
    "  H: plugin R took X ms (budget_ms N)`) and as the ignorable `hook/slow {hook,\n"
    "  plugin, row, turn, step, latency_us, budget_ms}`. It is a warning only: a\n"
    "  listener is in-process code, so the core cannot pre-empt it; a plugin that must\n"
    "  stop in time watches `weir_call_signal()` or bounds its own I/O.\n"
    "\n"
    "`weir hooks -c CONFIG` prints a row's policy after its order\n"
    "(`on_error=skip max_failures=3 budget_ms=50`).\n"
    "\n"
    "## Hooks\n"
    "\n"
    "| hook | mode | summary |\n"
    "|---|---|---|\n";

/* Markdown table cells: escape the pipe. */
static void md_cell(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static int write_schema(FILE *out, const char *text) {
    json_t *schema = weir__json_loads(text, 0, NULL);
    char *pretty = schema ? json_dumps(schema, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(schema);
    if (!pretty)
        return WEIR_E_NOMEM;
    fprintf(out, "\nResult schema:\n\n```json\n%s\n```\n", pretty);
    free(pretty);
    return WEIR_OK;
}

int weir_hook_catalog_write(FILE *out, bool markdown) {
    if (!out)
        return WEIR_E_INVAL;
    if (!markdown) {
        for (size_t i = 0; i < weir__hook_catalog_len; i++) {
            const weir__hook_def *d = &weir__hook_catalog[i];
            fprintf(out, "%s%s (%s)\n  %s\n  payload: %s\n  result:  %s\n", i ? "\n" : "",
                    d->name, weir__hook_mode_name(d->mode), d->summary, d->payload, d->result);
        }
        return ferror(out) ? WEIR_E_IO : WEIR_OK;
    }
    fputs(MD_INTRO, out);
    for (size_t i = 0; i < weir__hook_catalog_len; i++) {
        const weir__hook_def *d = &weir__hook_catalog[i];
        fprintf(out, "| `%s` | %s | ", d->name, weir__hook_mode_name(d->mode));
        md_cell(out, d->summary);
        fputs(" |\n", out);
    }
    for (size_t i = 0; i < weir__hook_catalog_len; i++) {
        const weir__hook_def *d = &weir__hook_catalog[i];
        fprintf(out, "\n### `%s`\n\n%s\n\n- mode: %s\n- payload: `%s`\n- result: %s\n", d->name,
                d->summary, weir__hook_mode_name(d->mode), d->payload, d->result);
        if (d->result_schema) {
            int rc = write_schema(out, d->result_schema);
            if (rc)
                return rc;
        }
    }
    return ferror(out) ? WEIR_E_IO : WEIR_OK;
}

