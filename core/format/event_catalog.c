/*
 * core/format/event_catalog.c - the event catalog: every event an agent writes to
 * its session log or delivers live, with its data fields.  docs/events.md
 * (`weir events --markdown`) and `weir events` print it; a plugin may not
 * register one of these types (core/runtime/host.c).  test_events checks it
 * against the types the session log accepts and the live events the core
 * sources raise, and docs/events.md against its output.
 */
#include <stdio.h>
#include <string.h>

#include "event_catalog.h"
#include "hook_catalog.h"
#include "weir/host.h"

#define FAILURE "{code, message, status?, retry_after_ms?, request_id?, provider, host?, rate_limit?}"

const weir__event_def weir__event_catalog[] = {
    /* --- durable: the session log's core types ------------------------- */
    {"turn/start", WEIR__EVENT_DURABLE, "{turn}", "A turn began (turn numbers count from 1)."},
    {"turn/end", WEIR__EVENT_DURABLE,
     "{turn, reason:{kind:\"completed\"|\"max-tokens\"|\"error\"|\"aborted\"|\"blocked\"|"
     "\"interrupted\", error?:" FAILURE ", cause?, plugin?, reason?}}",
     "A turn ended. `kind`: completed; max-tokens (a step hit the output limit); error (with "
     "the canonical failure); aborted (cancelled, with the cancel's `cause`); blocked "
     "(agent/pre-step rejected the step: `plugin` is the row that rejected, `reason` the text "
     "its reject gave); interrupted (closed on resume after a crash). "
     "weir_agent_last_turn() reads it."},
    {"step/start", WEIR__EVENT_DURABLE, "{turn, step}", "A step began: one model request."},
    {"step/end", WEIR__EVENT_DURABLE, "{turn, step}", "A step ended."},
    {"system/message", WEIR__EVENT_DURABLE,
     "{turn, step, message:{role:\"system\", content:[{type:\"text\", text}], source?}, "
     "prompt?} (surface)",
     "The rendered system prompt: the first surface node, replaced when the text changes "
     "before the first request (empty content: no system prompt); once a request was sent, a "
     "system-update appended at the end (`source` {kind:\"system-update\", update:"
     "\"system-prompt\"} with `prompt` the new prompt, or update:\"tools\" with added, "
     "removed, changed; docs/lifecycle.md)."},
    {"user/message", WEIR__EVENT_DURABLE,
     "{turn, step, message:{role:\"user\", content:[blocks], id, source}} (surface)",
     "A user message entered the conversation; `id` is its input id."},
    {"assistant/message", WEIR__EVENT_DURABLE,
     "{turn, step, message:{role:\"assistant\", content:[blocks]}, stream:[chunks], usage?, "
     "interrupted?, provider, model, http?:{host?, rate_limit?}} (surface)",
     "A model answer, committed (`interrupted`: the prefix a cancel kept). Its text blocks "
     "are the final text weir_agent_last_turn() reports."},
    {"assistant/attempt", WEIR__EVENT_DURABLE,
     "{turn, step, stream:[chunks], failure?:" FAILURE ", provider, model, "
     "http?:{host?, rate_limit?}}",
     "A failed attempt (logged only, never model-visible)."},
    {"tool/call", WEIR__EVENT_DURABLE,
     "{turn, step, call_id, name, arguments, idempotency_key?}",
     "The model called a tool (`arguments`: the raw JSON text)."},
    {"tool/result", WEIR__EVENT_DURABLE,
     "{turn, step, message:{role:\"tool\", content:[{type:\"tool_result\", call_id, "
     "content, is_error?}]}, error?:{name, code, reason?}} (surface)",
     "A tool call's result, in model order."},
    {"request/header", WEIR__EVENT_DURABLE,
     "{header:{config, tools?, removed_tools?}, reason:\"initial\"|\"resume\"|\"change\"|"
     "\"series\", starts_series?}",
     "The call config and tools of the requests from here on changed (`removed_tools`: the "
     "names of tools sent earlier and kept in place, no longer offered)."},
    {"request/context", WEIR__EVENT_DURABLE, "{provider, model, context_window?}",
     "The provider, model or known context window changed."},
    {"agent/inbox/spliced", WEIR__EVENT_DURABLE,
     "{target:\"next-turn\"|\"next-step\", start, removed_count?, inserted:[messages], "
     "outcome?:\"canceled\"|\"held\"}",
     "The durable inbox changed: queued input was inserted or removed."},
    /* --- durable, written "ignorable":true ------------------------------ */
    {"session/start", WEIR__EVENT_IGNORABLE,
     "{deployment?:{files:[string], config_hash}, cwd?, ...}",
     "A new session's first event: the header its embedder gave "
     "(weir_agent_options.session_header). `weir run` records the deployment (the -c files "
     "as given, [] for the built-in one, and `config_hash`, a hash of the composed config "
     "with its secrets redacted) and the working directory; `weir sessions` shows them and "
     "`weir resume` compares them (docs/session-log.md, \"The session header\")."},
    {"log/checkpoint", WEIR__EVENT_IGNORABLE,
     "{events, turns, usage?:{input_tokens, cache_read_tokens, cache_write_tokens, "
     "output_tokens}, cost?:{usd}}",
     "What the log before it adds up to, written after a turn/end once `session.checkpoint_bytes` "
     "(default 4 MiB) of log followed the last one; `--check` verifies each, `weir sessions` "
     "starts from the last (docs/session-log.md, \"Checkpoints\")."},
    {"tool/rerun", WEIR__EVENT_IGNORABLE,
     "{turn, step, call_id, name, idempotency_key, attempt}",
     "On resume, an idempotent tool's call cut by a crash runs again (docs/tools.md)."},
    {"job/queued", WEIR__EVENT_IGNORABLE,
     "{turn, step, job_id, call_id, tool, idempotency_key}",
     "A background tool call became a job (docs/tools.md, \"Background tools\")."},
    {"job/returned", WEIR__EVENT_IGNORABLE,
     "{turn, step, job_id, call_id, tool, result:{content, is_error, error?}, "
     "delivered?:false}",
     "A background job's body returned; its result goes back to the agent."},
    {"job/failed", WEIR__EVENT_IGNORABLE,
     "{turn, step, job_id, call_id, tool, result:{content, is_error, error?}, "
     "delivered?:false}",
     "A background job's body failed."},
    {"job/cancelled", WEIR__EVENT_IGNORABLE,
     "{turn, step, job_id, call_id, tool, effects:\"not_rolled_back\", cause, "
     "delivered?:false}",
     "A background job was cancelled."},
    {"request/continuations-dropped", WEIR__EVENT_IGNORABLE,
     "{provider, model, count, reasons:{malformed?, route?, prefix?}}",
     "The next request leaves out `count` reasoning continuations of its history (the "
     "route `provider`/`model` is the request's): malformed blobs, ones another provider or "
     "model produced, ones whose prefix a surface replace changed (docs/session-log.md, "
     "\"Reasoning continuations\"). Logged before the request when it differs from the "
     "last one."},
    {"hook/decision", WEIR__EVENT_IGNORABLE,
     "{hook, plugin, row, decision, turn, step, input_id?, latency_us, detail?}",
     "A hook listener decided (its result is not what weir_next() gave it, or it "
     "short-circuited): docs/hooks.md, \"Provenance\" (`session.provenance`). `input_id`: "
     "the input an agent/admit decision was about (a refusal's only trace)."},
    {"hook/quarantined", WEIR__EVENT_IGNORABLE, "{hook, plugin, row, turn, step, failures, error}",
     "A row reached its max_failures: its listeners are passed over for the rest of the "
     "process (docs/hooks.md, \"Fault policy\")."},
    {"hook/slow", WEIR__EVENT_IGNORABLE,
     "{hook, plugin, row, turn, step, latency_us, budget_ms}",
     "A listener took longer than its row's budget_ms (a warning; it was not stopped)."},
    /* --- live ----------------------------------------------------------- */
    {"agent/status", WEIR__EVENT_LIVE, "{status:\"running\"|\"idle\"}",
     "The driver started working (waking input) or went idle."},
    {"agent/assistant-stream", WEIR__EVENT_LIVE,
     "{frame:{type:\"start\", turn, step} | {type:\"chunk\", index, time, chunk} | "
     "{type:\"end\", index, outcome:{kind:\"committed\", event_type, seq} | "
     "{kind:\"abandoned\"}}, each with attempt_id and revision}",
     "The model's output as it streams: one start, the provider's chunks (plugin.h lists "
     "them), one end saying which log event kept it."},
    {"agent/error", WEIR__EVENT_LIVE, "{turn, step, error:" FAILURE ", fatal?:true}",
     "An error ended a step or the turn (fatal: the turn/end could not be logged)."},
    {"agent/inbox/inserted", WEIR__EVENT_LIVE, "{message}", "Input was queued."},
    {"agent/inbox/claimed", WEIR__EVENT_LIVE, "{message, turn}",
     "Queued input was taken into a turn."},
    {"agent/inbox/discarded", WEIR__EVENT_LIVE, "{message}",
     "Queued input was removed without being delivered (a cancel)."},
    {"agent/inbox/held", WEIR__EVENT_LIVE, "{message, turn}",
     "Anchored input its turn did not take was removed."},
    {"agent/inbox/acknowledged", WEIR__EVENT_LIVE, "{message, duplicate:true}",
     "Input sent again with the same id and content: nothing was queued."},
    {"steering/owned", WEIR__EVENT_LIVE, "{input_id, turn, step, message, provider}",
     "The streaming provider took a steer (native steering, docs/generations.md)."},
    {"steering/accepted", WEIR__EVENT_LIVE, "{input_id, turn, step}",
     "The remote side accepted native input."},
    {"steering/applied", WEIR__EVENT_LIVE, "{input_id, turn, step}",
     "Native input was applied; what agent/pre-step let enter was logged as user/message."},
    {"steering/discarded", WEIR__EVENT_LIVE,
     "{input_id, turn, step, message, reason:\"rejected\"|\"pre-step\"|\"error\", error}",
     "Native input the provider applied went through agent/pre-step and none of it entered "
     "(a reject, an empty enter, a failure): nothing was logged."},
    {"steering/refused", WEIR__EVENT_LIVE, "{input_id, turn, step}",
     "The provider refused native input it had taken; it was queued instead."},
    {"steering/unknown", WEIR__EVENT_LIVE,
     "{input_id, turn, step, message, provider, route:\"native\", error}",
     "Native steering failed without a definite answer: the input's effect is unknown."},
    {"job/finished", WEIR__EVENT_LIVE, "{job_id, call_id, tool, is_error}",
     "A background job's body returned; the driver settles it next."},
    {"tool/progress", WEIR__EVENT_LIVE,
     "{turn, step, call_id, name, progress:{progress, total?, message?, ...}}",
     "A running tool reported progress (tool_exec_progress); never logged."},
};

const size_t weir__event_catalog_len = sizeof weir__event_catalog / sizeof weir__event_catalog[0];

const weir__event_def *weir__event_find(const char *type) {
    for (size_t i = 0; type && i < weir__event_catalog_len; i++)
        if (strcmp(weir__event_catalog[i].type, type) == 0)
            return &weir__event_catalog[i];
    return NULL;
}

static const char *kind_name(weir__event_kind kind) {
    switch (kind) {
    case WEIR__EVENT_DURABLE:
        return "durable";
    case WEIR__EVENT_IGNORABLE:
        return "durable, ignorable";
    case WEIR__EVENT_LIVE:
        return "live";
    }
    return "unknown";
}

static const char MD_INTRO[] =
    "# Event catalog\n"
    "\n"
    "<!-- Generated from core/format/event_catalog.c by `weir events --markdown > docs/events.md`.\n"
    "     Do not edit by hand: test_events fails when this file differs. -->\n"
    "\n"
    "An agent's events reach an embedder through `weir_agent_options.on_event(event,\n"
    "durable, user_data)` and plugins through hooks, one at a time, in the order\n"
    "raised:\n"
    "\n"
    "- **durable** events are appended to the session log first. `event` is the log\n"
    "  envelope `{seq, time, type, data, surface_op?, source_seqs?, ignorable?}`\n"
    "  (docs/session-log.md) and `durable` is true; plugins see them on the emit hook\n"
    "  `session/event` `{agent, event}`. `weir log ID --json` and `weir run --json`\n"
    "  print them as they are. *Ignorable* ones carry `\"ignorable\":true`: a reader\n"
    "  that does not know the type skips it.\n"
    "- **live** events are only delivered: `event` is `{type, time, data}` and `durable`\n"
    "  is false; plugins see each on the emit hook of the same name, with the payload\n"
    "  `{agent, ...data}` (docs/hooks.md), unless the table says it has none.\n"
    "\n"
    "Durable events come in seq order, and a live event after every durable event\n"
    "logged before it was raised: a send made inside a callback (or on another\n"
    "thread during one) has its `agent/inbox/spliced` delivered, then its\n"
    "`agent/inbox/inserted`, once the callback returns.\n"
    "\n"
    "Each is delivered on the thread that raised it or, when another thread is\n"
    "delivering at that moment, on that one once its callback returns: the\n"
    "lifecycle's events on the driver's thread, what `weir_agent_send*()` and\n"
    "`weir_agent_cancel()` log (`agent/inbox/*`) on their caller's, what\n"
    "`weir_agent_compact()` and `weir_agent_close()` log (`compaction/*`, `job/*`)\n"
    "on theirs, `job/finished` on the job's worker and `tool/progress` on the\n"
    "tool's. So a callback or emit listener may run while the driver runs a step;\n"
    "the readers it may call there (`weir_agent_messages`, `weir_agent_last_turn`,\n"
    "and the plugin API's `agent_surface`, `agent_replace_generation`,\n"
    "`agent_last_event`, `agent_event`, `agent_event_ref`) hold what they read.\n"
    "\n"
    "`event` is borrowed for the call. Plugins add their own durable events, always\n"
    "ignorable: `compaction/*` (compaction-basic, docs/compaction.md) and `retry/*`\n"
    "(retry, docs/retry.md). Their types are registered by the plugin and listed in\n"
    "its doc, each `<namespace>/<name>` in the plugin's namespace (its name, or one it\n"
    "claims); the namespaces of this catalog are the core's (docs/plugins.md, \"Event\n"
    "types are namespaced\"). A plugin's event whose data carries `status` {kind, text,\n"
    "delay_ms?, done?} is shown by `weir run`, its REPL and serve as a status line\n"
    "(docs/plugins.md, \"Status lines\").\n"
    "\n"
    "How a turn ended, its failure and its final text are also one call away:\n"
    "`weir_agent_last_turn(agent, &outcome, &err)` (weir/host.h) reads the last\n"
    "`turn/end` and the turn's last `assistant/message`.\n"
    "\n"
    "In the data below, `failure` is the canonical failure object\n"
    "`" FAILURE "`\n"
    "(docs/providers.md), `?` marks a field that may be absent, and `(surface)`\n"
    "marks the types that contribute to the model-visible history.\n";

/* Markdown table cells: escape the pipe. */
static void md_cell(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void md_table(FILE *out, weir__event_kind kind, const char *title, const char *text) {
    fprintf(out, "\n## %s\n\n%s\n| type | data | when |\n|---|---|---|\n", title, text);
    for (size_t i = 0; i < weir__event_catalog_len; i++) {
        const weir__event_def *d = &weir__event_catalog[i];
        if (d->kind != kind)
            continue;
        fprintf(out, "| `%s` | `", d->type);
        md_cell(out, d->data);
        fputs("` | ", out);
        md_cell(out, d->summary);
        if (kind == WEIR__EVENT_LIVE && !weir__hook_find(d->type))
            fputs(" (No emit hook: on_event only.)", out);
        fputs(" |\n", out);
    }
}

int weir_event_catalog_write(FILE *out, bool markdown) {
    if (!out)
        return WEIR_E_INVAL;
    if (!markdown) {
        for (size_t i = 0; i < weir__event_catalog_len; i++) {
            const weir__event_def *d = &weir__event_catalog[i];
            fprintf(out, "%s%s (%s)\n  %s\n  data: %s\n", i ? "\n" : "", d->type,
                    kind_name(d->kind), d->summary, d->data);
        }
        return ferror(out) ? WEIR_E_IO : WEIR_OK;
    }
    fputs(MD_INTRO, out);
    md_table(out, WEIR__EVENT_DURABLE, "Durable events",
             "The session log's core types, in the order a turn writes them.\n");
    md_table(out, WEIR__EVENT_IGNORABLE, "Durable events the core writes as ignorable",
             "Readers that do not know them may skip them.\n");
    md_table(out, WEIR__EVENT_LIVE, "Live events", "Delivered, never logged.\n");
    return ferror(out) ? WEIR_E_IO : WEIR_OK;
}
