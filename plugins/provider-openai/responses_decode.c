/*
 * plugins/provider-openai/responses_decode.c - OpenAI Responses streaming
 * events -> weir stream chunks (weir_provider in weir/plugin.h).
 *
 * Every SSE event's data is an object whose `type` names it
 * (platform.openai.com/docs/api-reference/responses-streaming; openai-python
 * types/responses/response_stream_event.py).  Output items are keyed by
 * their `output_index`; each becomes at most one canonical block:
 *   response.output_item.added      a function_call item starts its tool_call
 *                                   block (call_id as the id, its name)
 *   response.output_text.delta,     text-delta of the message item's text
 *   response.refusal.delta          block (a refusal is the model's words)
 *   response.reasoning_summary_text.delta,
 *   response.reasoning_text.delta   reasoning-delta of the reasoning item's
 *                                   block (summary parts joined by a blank
 *                                   line)
 *   response.function_call_arguments.delta   tool-call-delta arguments
 *   response.output_text.done,      the whole text / arguments when no delta
 *   response.function_call_arguments.done    brought any
 *   response.output_item.done       the item's block ends.  A reasoning
 *                                   item with encrypted_content gets a
 *                                   continuation {"item": <the item's
 *                                   compact JSON>}, "prefix_bound": false,
 *                                   first: the copy of
 *                                   output_item.done, not of .added, which
 *                                   may be incomplete (openai-python
 *                                   types/responses/response_reasoning_item.py)
 *   response.completed              usage, then finish tool-calls (a function
 *                                   call came) or stop
 *   response.incomplete             incomplete_details.reason
 *                                   max_output_tokens: usage, finish
 *                                   max-tokens; content_filter and others:
 *                                   UNKNOWN failure naming the reason
 *   response.failed                 response.error {code, message} -> the
 *                                   canonical code (openai_error_code)
 *   error                           {code, message} (or an "error" object
 *                                   holding them) -> the same
 * Every other type (response.created, .in_progress, .queued,
 * .content_part.*, .reasoning_summary_part.*, the *.done of summaries and
 * refusals, and the events of hosted tools) is ignored.  A stop with no
 * content is EMPTY_RESPONSE.  Usage: input_tokens less
 * input_tokens_details.cached_tokens, output_tokens,
 * cache_read_tokens (cached_tokens), reasoning_tokens
 * (output_tokens_details.reasoning_tokens).
 */
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#include "provider_common.h"

typedef enum item_kind { ITEM_OTHER = 0, ITEM_MESSAGE, ITEM_REASONING, ITEM_CALL } item_kind;

typedef struct item {
    json_int_t output_index;
    item_kind kind;
    int block;         /* canonical block index, or -1 before it starts */
    bool closed;       /* output_item.done came (or the stream finished) */
    bool said_id;      /* tool_call: id and name went out */
    size_t text_len;   /* bytes of text / arguments emitted */
    json_int_t part;   /* reasoning: the summary part the last delta was of */
} item;

struct responses_decoder {
    pc_out out;
    char *model; /* continuations' model (owned), or NULL */
    item *items;
    size_t nitems, cap;
    bool content; /* text, reasoning text or a tool call came */
    bool calls;   /* a function call came */
};

/* ------------------------------------------------------------------------ */
/* Items and blocks                                                         */
/* ------------------------------------------------------------------------ */

static json_t *typed_chunk(const char *type, int index) {
    json_t *chunk = json_object();
    pc_set_new(&chunk, "type", json_string(type));
    pc_set_new(&chunk, "index", json_integer(index));
    return chunk;
}

static void oom(responses_decoder *d) {
    pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
}

/* The item at `output_index`, made (of `kind`) when new; NULL when the
 * stream stopped. */
static item *item_at(responses_decoder *d, json_int_t output_index, item_kind kind) {
    for (size_t i = 0; i < d->nitems; i++)
        if (d->items[i].output_index == output_index) {
            if (d->items[i].kind == ITEM_OTHER)
                d->items[i].kind = kind;
            return &d->items[i];
        }
    if (d->nitems >= PC_MAX_BLOCKS) {
        pc_fail(&d->out, "TRANSPORT", "malformed stream event (more than %d output items)",
                PC_MAX_BLOCKS);
        return NULL;
    }
    if (d->nitems == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        item *grown = realloc(d->items, cap * sizeof *grown);
        if (!grown) {
            oom(d);
            return NULL;
        }
        d->items = grown;
        d->cap = cap;
    }
    item *it = &d->items[d->nitems++];
    memset(it, 0, sizeof *it);
    it->output_index = output_index;
    it->kind = kind;
    it->block = -1;
    it->part = -1;
    return it;
}

/* Start the item's block (of the type its kind gives) when it has none.
 * 0, or -1 when the stream stopped. */
static int item_open(responses_decoder *d, item *it) {
    if (it->block >= 0)
        return 0;
    const char *type = it->kind == ITEM_REASONING ? "reasoning"
                       : it->kind == ITEM_CALL    ? "tool_call"
                                                  : "text";
    return pc_block_start(&d->out, type, &it->block);
}

/* A text or reasoning delta of `len` bytes into the item's block. */
static int item_text(responses_decoder *d, item *it, const char *text, size_t len) {
    if (len == 0)
        return 0;
    if (item_open(d, it) != 0)
        return -1;
    d->content = true;
    it->text_len += len;
    json_t *chunk = typed_chunk(it->kind == ITEM_REASONING ? "reasoning-delta" : "text-delta",
                                it->block);
    pc_set_new(&chunk, "text", json_stringn(text, len));
    return pc_put(&d->out, chunk);
}

/* A tool call's id and name (once), and `len` bytes of arguments. */
static int call_delta(responses_decoder *d, item *it, const char *id, const char *name,
                      const char *args, size_t len) {
    if (item_open(d, it) != 0)
        return -1;
    d->content = d->calls = true;
    json_t *chunk = typed_chunk("tool-call-delta", it->block);
    bool say = !it->said_id && id && name;
    if (say) {
        it->said_id = true;
        pc_set_new(&chunk, "id", json_string(id));
        pc_set_new(&chunk, "name", json_string(name));
    }
    pc_set_new(&chunk, "arguments_delta", json_stringn(args ? args : "", len));
    it->text_len += len;
    if (chunk && !say && len == 0) {
        json_decref(chunk);
        return 0;
    }
    return pc_put(&d->out, chunk);
}

/* The reasoning continuation of block `index`: {"item": <item JSON>},
 * "prefix_bound": false.  An encrypted reasoning item is self-contained:
 * OpenAI reads it wherever it stands in `input`, so after a compaction the
 * kept function calls still go back with their reasoning
 * (core/format/continuation.h: such a continuation is never stale). */
static int reasoning_continuation(responses_decoder *d, int index, const json_t *item_obj) {
    if (!d->model)
        return 0;
    char *text = json_dumps(item_obj, JSON_COMPACT);
    if (!text) {
        oom(d);
        return -1;
    }
    json_t *data = json_object(), *c = json_object();
    pc_set_new(&data, "item", json_string(text));
    free(text);
    pc_set_new(&c, "provider", json_string(d->out.provider));
    pc_set_new(&c, "model", json_string(d->model));
    pc_set_new(&c, "data", data);
    pc_set_new(&c, "prefix_bound", json_false());
    json_t *chunk = typed_chunk("continuation", index);
    pc_set_new(&chunk, "continuation", c);
    return pc_put(&d->out, chunk);
}

static int item_close(responses_decoder *d, item *it) {
    if (it->closed)
        return 0;
    it->closed = true;
    if (it->block < 0)
        return 0;
    return pc_block_end(&d->out, it->block, it->kind == ITEM_CALL && it->text_len == 0);
}

static int close_all(responses_decoder *d) {
    for (size_t i = 0; i < d->nitems; i++)
        if (item_close(d, &d->items[i]) != 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Event fields                                                             */
/* ------------------------------------------------------------------------ */

/* A member that must be a string: its value, or NULL (then *bad says so). */
static const char *need_string(const json_t *o, const char *key, const char **bad,
                               const char *why) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        *bad = why;
        return NULL;
    }
    return json_string_value(v);
}

/* An optional non-negative integer member: -1 when it has another type. */
static int opt_count(const json_t *o, const char *key, json_int_t *out) {
    const json_t *v = json_object_get(o, key);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

/* response.usage -> the usage chunk's object; "wrong type" text or NULL. */
static const char *map_usage(const json_t *u, json_t **out) {
    *out = NULL;
    if (!u || json_is_null(u))
        return NULL;
    if (!json_is_object(u))
        return "response.usage is not an object";
    json_int_t input, output, cached = 0, reasoning = 0;
    const json_t *idt = json_object_get(u, "input_tokens_details");
    const json_t *odt = json_object_get(u, "output_tokens_details");
    if (opt_count(u, "input_tokens", &input) != 0 || opt_count(u, "output_tokens", &output) != 0)
        return "usage token counts are not integers";
    if (opt_count(idt, "cached_tokens", &cached) != 0)
        return "usage.input_tokens_details.cached_tokens is not an integer";
    if (opt_count(odt, "reasoning_tokens", &reasoning) != 0)
        return "usage.output_tokens_details.reasoning_tokens is not an integer";
    json_t *m = json_object();
    pc_set_new(&m, "input_tokens", json_integer(input > cached ? input - cached : 0));
    pc_set_new(&m, "output_tokens", json_integer(output));
    if (json_object_get(idt, "cached_tokens"))
        pc_set_new(&m, "cache_read_tokens", json_integer(cached));
    if (json_object_get(odt, "reasoning_tokens"))
        pc_set_new(&m, "reasoning_tokens", json_integer(reasoning));
    *out = m;
    return m ? NULL : "out of memory";
}

/* usage (if any), then the finish of `kind`. */
static const char *finish_with(responses_decoder *d, const json_t *response, const char *kind) {
    json_t *usage;
    const char *bad = map_usage(json_object_get(response, "usage"), &usage);
    if (bad)
        return bad;
    if (close_all(d) != 0) {
        json_decref(usage);
        return "";
    }
    if (strcmp(kind, "max-tokens") != 0 && !d->content) {
        json_decref(usage);
        pc_fail(&d->out, "EMPTY_RESPONSE", "the model finished without any content");
        return "";
    }
    if (usage && pc_put(&d->out, json_pack("{s:s,s:o}", "type", "usage", "usage", usage)) != 0)
        return "";
    pc_finish(&d->out, kind, NULL);
    return "";
}

/* An error object {code?, message?, type?} (borrowed; `error` events are
 * the object themselves): the failure finish. */
static void error_finish(responses_decoder *d, const json_t *e, const char *fallback) {
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *message = json_string_value(json_object_get(e, "message"));
    if (type && strcmp(type, "error") == 0)
        type = NULL; /* the event's own type */
    pc_inband_error(&d->out, openai_error_code(type, code, message), code ? code : type,
                    message ? message : fallback);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

/* The item an event names by output_index; "wrong type" text in *bad. */
static item *event_item(responses_decoder *d, const json_t *ev, item_kind kind,
                        const char **bad) {
    const json_t *oi = json_object_get(ev, "output_index");
    if (!json_is_integer(oi) || json_integer_value(oi) < 0) {
        *bad = "output_index is not a non-negative integer";
        return NULL;
    }
    item *it = item_at(d, json_integer_value(oi), kind);
    if (!it)
        *bad = "";
    return it;
}

static item_kind kind_of(const char *type) {
    return !type                                 ? ITEM_OTHER
           : strcmp(type, "message") == 0        ? ITEM_MESSAGE
           : strcmp(type, "reasoning") == 0      ? ITEM_REASONING
           : strcmp(type, "function_call") == 0  ? ITEM_CALL
                                                 : ITEM_OTHER;
}

/* output_item.added / .done: `done` ends the item's block. */
static const char *output_item(responses_decoder *d, const json_t *ev, bool done) {
    const json_t *obj = json_object_get(ev, "item");
    if (!json_is_object(obj))
        return "item is not an object";
    const char *type = json_string_value(json_object_get(obj, "type"));
    if (!type)
        return "item.type is not a string";
    item_kind kind = kind_of(type);
    const char *bad = NULL;
    item *it = event_item(d, ev, kind, &bad);
    if (!it)
        return bad;
    if (it->closed || kind == ITEM_OTHER)
        return NULL; /* hosted tools' items and repeats are not ours */
    if (kind == ITEM_CALL) {
        const char *id = need_string(obj, "call_id", &bad, "item.call_id is not a string");
        const char *name = need_string(obj, "name", &bad, "item.name is not a string");
        const json_t *args = json_object_get(obj, "arguments");
        if (bad)
            return bad;
        if (args && !json_is_string(args))
            return "item.arguments is not a string";
        /* the arguments of .done only when no delta brought any */
        bool whole = done && it->text_len == 0 && json_string_length(args) > 0;
        if (call_delta(d, it, id, name, whole ? json_string_value(args) : NULL,
                       whole ? json_string_length(args) : 0) != 0)
            return "";
    }
    if (!done)
        return NULL;
    if (kind == ITEM_REASONING) {
        const json_t *enc = json_object_get(obj, "encrypted_content");
        if (enc && !json_is_null(enc) && !json_is_string(enc))
            return "item.encrypted_content is not a string";
        if (json_string_length(enc) > 0) { /* the item goes back: its block must exist */
            if (item_open(d, it) != 0 || reasoning_continuation(d, it->block, obj) != 0)
                return "";
        }
    }
    return item_close(d, it) == 0 ? NULL : "";
}

/* A delta event of `kind`: `key` holds the text. */
static const char *delta_event(responses_decoder *d, const json_t *ev, item_kind kind,
                               const char *key) {
    const char *bad = NULL;
    const json_t *delta = json_object_get(ev, key);
    if (!json_is_string(delta))
        return kind == ITEM_CALL ? "delta is not a string" : "text is not a string";
    item *it = event_item(d, ev, kind, &bad);
    if (!it)
        return bad;
    if (it->closed || it->kind != kind)
        return NULL;
    if (kind == ITEM_CALL)
        return call_delta(d, it, NULL, NULL, json_string_value(delta),
                          json_string_length(delta)) == 0
                   ? NULL
                   : "";
    if (kind == ITEM_REASONING) { /* summary parts are joined by a blank line */
        json_int_t part;
        if (opt_count(ev, "summary_index", &part) != 0)
            return "summary_index is not a non-negative integer";
        bool sep = it->part >= 0 && part != it->part && it->text_len > 0;
        it->part = part;
        if (sep && item_text(d, it, "\n\n", 2) != 0)
            return "";
    }
    return item_text(d, it, json_string_value(delta), json_string_length(delta)) == 0 ? NULL : "";
}

/* output_text.done / function_call_arguments.done: the whole text when no
 * delta brought any. */
static const char *whole_event(responses_decoder *d, const json_t *ev, item_kind kind,
                               const char *key) {
    const char *bad = NULL;
    const json_t *whole = json_object_get(ev, key);
    if (!json_is_string(whole))
        return kind == ITEM_CALL ? "arguments is not a string" : "text is not a string";
    item *it = event_item(d, ev, kind, &bad);
    if (!it)
        return bad;
    if (it->closed || it->kind != kind || it->text_len > 0 || json_string_length(whole) == 0)
        return NULL;
    if (kind == ITEM_CALL)
        return call_delta(d, it, NULL, NULL, json_string_value(whole),
                          json_string_length(whole)) == 0
                   ? NULL
                   : "";
    return item_text(d, it, json_string_value(whole), json_string_length(whole)) == 0 ? NULL : "";
}

/* response.incomplete: incomplete_details.reason. */
static const char *incomplete(responses_decoder *d, const json_t *response) {
    const json_t *details = json_object_get(response, "incomplete_details");
    const char *reason = json_string_value(json_object_get(details, "reason"));
    if (reason && strcmp(reason, "max_output_tokens") == 0)
        return finish_with(d, response, "max-tokens");
    close_all(d);
    pc_fail(&d->out, "UNKNOWN", "the provider stopped the answer (response.incomplete: %s)",
            reason ? reason : "no reason given");
    return "";
}

/* One parsed event: "wrong type" text, "" when the stream stopped, or NULL. */
static const char *decode(responses_decoder *d, const json_t *ev) {
    if (!json_is_object(ev))
        return "not a JSON object";
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        return "type is not a string";
    if (strcmp(type, "error") == 0) { /* {code, message, param}; some servers nest an
                                         "error" object */
        const json_t *inner = json_object_get(ev, "error");
        close_all(d);
        error_finish(d, json_is_object(inner) ? inner : ev, "error event");
        return "";
    }
    if (strncmp(type, "response.", 9) != 0)
        return NULL;
    const char *t = type + 9;
    if (strcmp(t, "output_item.added") == 0 || strcmp(t, "output_item.done") == 0)
        return output_item(d, ev, t[12] == 'd');
    if (strcmp(t, "output_text.delta") == 0 || strcmp(t, "refusal.delta") == 0)
        return delta_event(d, ev, ITEM_MESSAGE, "delta");
    if (strcmp(t, "output_text.done") == 0)
        return whole_event(d, ev, ITEM_MESSAGE, "text");
    if (strcmp(t, "reasoning_summary_text.delta") == 0 || strcmp(t, "reasoning_text.delta") == 0)
        return delta_event(d, ev, ITEM_REASONING, "delta");
    if (strcmp(t, "function_call_arguments.delta") == 0)
        return delta_event(d, ev, ITEM_CALL, "delta");
    if (strcmp(t, "function_call_arguments.done") == 0)
        return whole_event(d, ev, ITEM_CALL, "arguments");
    bool completed = strcmp(t, "completed") == 0, failed = strcmp(t, "failed") == 0;
    if (!completed && !failed && strcmp(t, "incomplete") != 0)
        return NULL; /* created, in_progress, queued, parts, summaries' done... */
    const json_t *response = json_object_get(ev, "response");
    if (!json_is_object(response))
        return "response is not an object";
    if (completed)
        return finish_with(d, response, d->calls ? "tool-calls" : "stop");
    if (!failed)
        return incomplete(d, response);
    close_all(d);
    const json_t *error = json_object_get(response, "error");
    error_finish(d, json_is_object(error) ? error : NULL, "response.failed");
    return "";
}

/* ------------------------------------------------------------------------ */
/* The decoder                                                              */
/* ------------------------------------------------------------------------ */

responses_decoder *responses_decoder_new(const char *provider, const char *model,
                                         openai_emit_fn emit, void *user_data) {
    if (!emit)
        return NULL;
    responses_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (pc_out_init(&d->out, provider, "openai", "event", emit, user_data) != 0) {
        free(d);
        return NULL;
    }
    size_t mlen = model ? strlen(model) : 0;
    if (mlen > 0 && (d->model = malloc(mlen + 1)) != NULL)
        memcpy(d->model, model, mlen + 1);
    if (mlen > 0 && !d->model) {
        pc_out_clear(&d->out);
        free(d);
        return NULL;
    }
    return d;
}

void responses_decoder_free(responses_decoder *d) {
    if (!d)
        return;
    free(d->items);
    free(d->model);
    pc_out_clear(&d->out);
    free(d);
}

bool responses_decoder_done(const responses_decoder *d) { return !d || d->out.done; }

int responses_decoder_event(responses_decoder *d, const char *data, size_t len) {
    if (!d)
        return -1;
    if (d->out.done)
        return 0;
    if (d->out.refused)
        return -1;
    if (!data) {
        data = "";
        len = 0;
    }
    json_t *ev = pc_parse(&d->out, data, len);
    if (!ev)
        return -1;
    const char *bad = decode(d, ev);
    json_decref(ev);
    if (bad && bad[0])
        pc_malformed(&d->out, bad, data, len);
    return d->out.done || d->out.refused ? -1 : 0;
}

int responses_decoder_end(responses_decoder *d, json_t *failure, bool aborted) {
    return pc_end(d ? &d->out : NULL, failure, aborted);
}

/* ------------------------------------------------------------------------ */
/* POST /responses/compact                                                  */
/* ------------------------------------------------------------------------ */

/* Why the compact reply `root` cannot be used (static text), or NULL: an
 * object whose `output` is an array of objects with exactly one item of type
 * "compaction" carrying a non-empty string encrypted_content
 * (platform.openai.com/docs/api-reference/responses/compact: "all user
 * messages, followed by a single compaction item"). */
static const char *compact_problem(const json_t *root) {
    const json_t *output = json_object_get(root, "output");
    if (!json_is_array(output))
        return "the compact reply has no output array";
    size_t i, compactions = 0;
    const json_t *it;
    json_array_foreach(output, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!type)
            return "an output item of the compact reply has no type";
        if (strcmp(type, "compaction") == 0) {
            const json_t *enc = json_object_get(it, "encrypted_content");
            if (!json_is_string(enc) || json_string_length(enc) == 0)
                return "the compaction item has no encrypted_content";
            compactions++;
        }
    }
    return compactions == 1 ? NULL : "the compact reply does not hold exactly one compaction item";
}

int responses_compact_reply(responses_decoder *d, const char *body, size_t len) {
    if (!d || d->out.done)
        return 0;
    json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
    const char *bad = !root ? "the compact reply is not JSON" : compact_problem(root);
    json_t *usage = NULL;
    if (!bad)
        bad = map_usage(json_object_get(root, "usage"), &usage);
    if (bad) {
        pc_malformed(&d->out, bad, body ? body : "", body ? len : 0);
        json_decref(root);
        return 0;
    }
    char *items = json_dumps(json_object_get(root, "output"), JSON_COMPACT);
    json_decref(root);
    int index = -1;
    json_t *c = json_object(), *data = json_object(), *chunk = NULL;
    pc_set_new(&data, "compaction", items ? json_string(items) : NULL);
    free(items);
    pc_set_new(&c, "provider", json_string(d->out.provider));
    pc_set_new(&c, "model", json_string(d->model ? d->model : ""));
    pc_set_new(&c, "data", data);
    pc_set_new(&c, "prefix_bound", json_false());
    if (!c) {
        json_decref(usage);
        oom(d);
        return 0;
    }
    if (pc_block_start(&d->out, "text", &index) != 0) {
        json_decref(c);
        json_decref(usage);
        return 0;
    }
    d->content = true;
    chunk = typed_chunk("text-delta", index);
    pc_set_new(&chunk, "text", json_string(RESPONSES_COMPACT_TEXT));
    if (pc_put(&d->out, chunk) != 0) {
        json_decref(c);
        json_decref(usage);
        return 0;
    }
    chunk = typed_chunk("continuation", index);
    pc_set_new(&chunk, "continuation", c);
    if (pc_put(&d->out, chunk) != 0 || pc_block_end(&d->out, index, false) != 0) {
        json_decref(usage);
        return 0;
    }
    if (usage && pc_put(&d->out, json_pack("{s:s,s:o}", "type", "usage", "usage", usage)) != 0)
        return 0;
    pc_finish(&d->out, "stop", NULL);
    return 0;
}
