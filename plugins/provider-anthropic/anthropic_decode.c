/*
 * plugins/provider-anthropic/anthropic_decode.c - Messages API stream events
 * -> weir stream chunks (see weir_provider in weir/plugin.h).
 *
 *   message_start        usage: input_tokens, cache_read_input_tokens,
 *                        cache_creation_input_tokens and its per-TTL split
 *                        cache_creation.ephemeral_5m_input_tokens /
 *                        ephemeral_1h_input_tokens
 *   content_block_start  text / thinking / redacted_thinking / tool_use (id,
 *                        name); other block types (server tools) are skipped
 *   content_block_delta  text_delta -> text-delta, thinking_delta ->
 *                        reasoning-delta, input_json_delta -> tool-call-delta
 *                        arguments, signature_delta accumulates the thinking
 *                        block's signature; others ignored
 *   content_block_stop   a thinking block's `continuation` chunk, then
 *                        block-end
 *   message_delta        stop_reason, usage.output_tokens
 *   message_stop         usage chunk, then the finish
 *   ping                 ignored
 *   error                finish error, classified by error.type
 *
 * Canonical block indexes are assigned in order of appearance (the
 * provider's `index` is only a key).  Text blocks start on their first
 * non-empty text, so an answer of empty text blocks is EMPTY_RESPONSE.
 *
 * Thinking: a `thinking` block is a reasoning block started at its
 * content_block_start (empty thinking text too: adaptive thinking with
 * display "omitted" streams none, and the block must still go back); its
 * signature arrives as signature_delta events "just before the
 * content_block_stop event" (Anthropic, "Building with extended thinking",
 * streaming; AWS Bedrock's "Thinking encryption" page says the same), and
 * anthropic-sdk-python's MessageStream accumulates them
 * (lib/streaming/_messages.py: `current_snapshot.signature +=
 * event.delta.signature`).  A `redacted_thinking` block carries its
 * encrypted `data` whole in content_block_start (types/
 * redacted_thinking_block.py: {data, type}); it becomes a reasoning block
 * with no text.  Both must be passed back unmodified on the next request of
 * a tool loop ("pass thinking blocks back exactly as received"), so at the
 * block's stop the decoder emits a `continuation` chunk (weir/plugin.h)
 * {"provider": the row id, "model": the request's model, "data":
 * {"signature": ...} or {"redacted_data": ...}}; anthropic_request.c sends
 * it back.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup */
#endif
#include "anthropic.h"

#include <stdlib.h>
#include <string.h>

#include "provider_common.h"

typedef enum slot_kind {
    KIND_TEXT,
    KIND_THINKING,
    KIND_TOOL,
    KIND_REDACTED, /* redacted_thinking: a reasoning block with no text */
    KIND_SKIPPED,
    KIND_COMPACTION, /* compaction (server compaction): a text block at its stop */
} slot_kind;

typedef struct slot {
    json_int_t key; /* the provider's content block index */
    slot_kind kind;
    int block;      /* canonical block index, -1 until started */
    bool stopped;   /* content_block_stop seen */
    size_t args_len;
    pc_buf opaque;  /* thinking: the signature so far; redacted: its data (owned) */
    json_t *compaction; /* compaction: {type, content, encrypted_content} so far (owned) */
} slot;

typedef struct count {
    json_int_t value;
    bool present;
} count;

struct anthropic_decoder {
    pc_out out; /* chunks, block count, finish state */
    slot *slots;
    size_t nslots, cap;
    char *stop_reason;
    char *model; /* the request's model, named in continuations (owned; NULL: "") */
    count input, output, cache_read, cache_write, cache_write_5m, cache_write_1h;
};

/* ------------------------------------------------------------------------ */
/* Blocks                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const block_types[] = {"text",      "reasoning", "tool_call",
                                          "reasoning", NULL,        "text"};

/* Start the canonical block of `s` unless it is started already. */
static int block_start(anthropic_decoder *d, slot *s) {
    if (s->block >= 0)
        return 0;
    return pc_block_start(&d->out, block_types[s->kind], &s->block);
}

/* The continuation chunk of a thinking / redacted_thinking block (see the
 * file comment), or 0 when it has nothing to carry (no signature came). */
static int continuation(anthropic_decoder *d, slot *s) {
    if ((s->kind != KIND_THINKING && s->kind != KIND_REDACTED) || s->opaque.len == 0)
        return 0;
    json_t *value = json_stringn(s->opaque.p, s->opaque.len);
    json_t *data = json_object();
    if (!value || !data ||
        json_object_set_new(data, s->kind == KIND_THINKING ? "signature" : "redacted_data",
                            value) != 0) {
        json_decref(data);
        pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
        return -1;
    }
    return pc_put(&d->out, json_pack("{s:s,s:i,s:{s:s,s:s,s:o}}", "type", "continuation", "index",
                                     s->block, "continuation", "provider", d->out.provider,
                                     "model", d->model ? d->model : "", "data", data));
}

static int text_delta(anthropic_decoder *d, slot *s, const char *text);

/*
 * A compaction block at its stop (server compaction, beta compact-2026-01-12:
 * platform.claude.com/docs/en/build-with-claude/compaction): one text block,
 * its summary `content` as the text, whose continuation {"compaction": "<the
 * block's JSON>"} (prefix_bound false: it stands for what came before it)
 * lets the request builder send the block back verbatim.  A block whose
 * content is null is a failed compaction ("the server treats these as
 * no-ops", types/beta/beta_compaction_block_param.py): nothing is emitted.
 */
static int compaction_stop(anthropic_decoder *d, slot *s) {
    const json_t *content = json_object_get(s->compaction, "content");
    if (!json_is_string(content))
        return 0;
    char *text = json_dumps(s->compaction, JSON_COMPACT);
    json_t *data = text ? json_pack("{s:s}", "compaction", text) : NULL;
    free(text);
    if (!data || block_start(d, s) != 0) {
        json_decref(data);
        if (!d->out.done)
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
        return -1;
    }
    if (text_delta(d, s, json_string_value(content)) != 0) {
        json_decref(data);
        return -1;
    }
    if (pc_put(&d->out, json_pack("{s:s,s:i,s:{s:s,s:s,s:o,s:b}}", "type", "continuation",
                                  "index", s->block, "continuation", "provider",
                                  d->out.provider, "model", d->model ? d->model : "", "data",
                                  data, "prefix_bound", 0)) != 0)
        return -1;
    return pc_block_end(&d->out, s->block, false);
}

/* End a started block: its continuation first; a tool call without
 * arguments gets "{}". */
static int block_stop(anthropic_decoder *d, slot *s) {
    if (s->stopped)
        return 0;
    s->stopped = true;
    if (s->kind == KIND_COMPACTION)
        return compaction_stop(d, s);
    if (s->block < 0)
        return 0;
    if (continuation(d, s) != 0)
        return -1;
    return pc_block_end(&d->out, s->block, s->kind == KIND_TOOL && s->args_len == 0);
}

static slot *slot_find(anthropic_decoder *d, json_int_t key) {
    for (size_t i = 0; i < d->nslots; i++)
        if (d->slots[i].key == key)
            return &d->slots[i];
    return NULL;
}

static slot *slot_add(anthropic_decoder *d, json_int_t key, slot_kind kind) {
    if (d->nslots >= PC_MAX_BLOCKS) {
        pc_fail(&d->out, "TRANSPORT", "malformed stream: more than %d content blocks",
                PC_MAX_BLOCKS);
        return NULL;
    }
    if (d->nslots == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        slot *grown = realloc(d->slots, cap * sizeof *grown);
        if (!grown) {
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return NULL;
        }
        d->slots = grown;
        d->cap = cap;
    }
    slot *s = &d->slots[d->nslots++];
    memset(s, 0, sizeof *s);
    s->key = key;
    s->kind = kind;
    s->block = -1;
    return s;
}

/* Append to a slot's signature / redacted data. */
static const char *opaque_add(anthropic_decoder *d, slot *s, const char *v) {
    if (pc_buf_add(&s->opaque, v, strlen(v)) == 0)
        return NULL;
    pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
    return "";
}

/* Text or thinking content: start the block on the first non-empty text. */
static int text_delta(anthropic_decoder *d, slot *s, const char *text) {
    if (!text[0])
        return 0;
    if (block_start(d, s) != 0)
        return -1;
    return pc_put(&d->out, json_pack("{s:s,s:i,s:s}", "type",
                                     s->kind == KIND_TEXT || s->kind == KIND_COMPACTION
                                         ? "text-delta"
                                         : "reasoning-delta",
                                     "index", s->block, "text", text));
}

static int args_delta(anthropic_decoder *d, slot *s, const char *args) {
    if (!args[0])
        return 0;
    s->args_len += strlen(args);
    return pc_put(&d->out, json_pack("{s:s,s:i,s:s}", "type", "tool-call-delta", "index", s->block,
                                     "arguments_delta", args));
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

/* Optional non-negative integer member; -1 when it has another type. */
static int read_count(const json_t *obj, const char *key, count *c) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    c->value = json_integer_value(v);
    c->present = true;
    return 0;
}

static const char *read_usage(anthropic_decoder *d, const json_t *usage) {
    if (!usage || json_is_null(usage))
        return NULL;
    if (!json_is_object(usage))
        return "usage is not an object";
    if (read_count(usage, "input_tokens", &d->input) ||
        read_count(usage, "output_tokens", &d->output) ||
        read_count(usage, "cache_read_input_tokens", &d->cache_read) ||
        read_count(usage, "cache_creation_input_tokens", &d->cache_write))
        return "usage token counts are not integers";
    /* The per-TTL split of the cache write (anthropic-sdk-python,
     * types/cache_creation.py: ephemeral_5m_input_tokens and
     * ephemeral_1h_input_tokens, "the number of input tokens used to create
     * the 5 minute / 1 hour cache entry"; types/usage.py: cache_creation is
     * optional). */
    json_t *split = json_object_get(usage, "cache_creation");
    if (split && !json_is_null(split) && !json_is_object(split))
        return "usage.cache_creation is not an object";
    if (read_count(split, "ephemeral_5m_input_tokens", &d->cache_write_5m) ||
        read_count(split, "ephemeral_1h_input_tokens", &d->cache_write_1h))
        return "usage token counts are not integers";
    return NULL;
}

/* The block index of a content_block_* event. */
static const char *read_index(const json_t *root, json_int_t *key) {
    json_t *v = json_object_get(root, "index");
    if (!json_is_integer(v))
        return "index is not an integer";
    *key = json_integer_value(v);
    return NULL;
}

static const char *on_block_start(anthropic_decoder *d, const json_t *root) {
    json_int_t key;
    const char *bad = read_index(root, &key);
    if (bad)
        return bad;
    json_t *cb = json_object_get(root, "content_block");
    const char *type = json_string_value(json_object_get(cb, "type"));
    if (!json_is_object(cb) || !type)
        return "content_block is not an object with a type";
    if (slot_find(d, key))
        return "content_block_start for an index already in use";
    slot_kind kind = strcmp(type, "text") == 0                ? KIND_TEXT
                     : strcmp(type, "thinking") == 0          ? KIND_THINKING
                     : strcmp(type, "tool_use") == 0          ? KIND_TOOL
                     : strcmp(type, "redacted_thinking") == 0 ? KIND_REDACTED
                     : strcmp(type, "compaction") == 0        ? KIND_COMPACTION
                                                              : KIND_SKIPPED;
    json_t *text = json_object_get(cb, kind == KIND_THINKING ? "thinking" : "text");
    json_t *id = json_object_get(cb, "id"), *name = json_object_get(cb, "name");
    json_t *input = json_object_get(cb, "input");
    json_t *sig = json_object_get(cb, "signature"), *data = json_object_get(cb, "data");
    if ((kind == KIND_TEXT || kind == KIND_THINKING) && text && !json_is_string(text))
        return "content_block text is not a string";
    if (kind == KIND_THINKING && sig && !json_is_null(sig) && !json_is_string(sig))
        return "thinking block signature is not a string";
    if (kind == KIND_REDACTED && !json_is_string(data))
        return "redacted_thinking block without a string data";
    if (kind == KIND_TOOL && (!json_is_string(id) || !json_is_string(name)))
        return "tool_use block without a string id and name";
    slot *s = slot_add(d, key, kind);
    if (!s)
        return "";
    if (kind == KIND_COMPACTION) {
        json_t *c = json_object_get(cb, "content"), *e = json_object_get(cb, "encrypted_content");
        if ((c && !json_is_null(c) && !json_is_string(c)) ||
            (e && !json_is_null(e) && !json_is_string(e)))
            return "compaction block content is not a string or null";
        s->compaction = json_pack("{s:s,s:O,s:O}", "type", "compaction", "content",
                                  c ? c : json_null(), "encrypted_content", e ? e : json_null());
        if (!s->compaction) {
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return "";
        }
        return NULL;
    }
    if (kind == KIND_TEXT)
        return text && text_delta(d, s, json_string_value(text)) != 0 ? "" : NULL;
    if (kind == KIND_THINKING || kind == KIND_REDACTED) {
        /* started now: an empty or redacted thinking block still goes back */
        if (block_start(d, s) != 0)
            return "";
        const char *v = json_string_value(kind == KIND_THINKING ? sig : data);
        if (v && v[0] && opaque_add(d, s, v))
            return "";
        return text && text_delta(d, s, json_string_value(text)) != 0 ? "" : NULL;
    }
    if (kind != KIND_TOOL)
        return NULL;
    if (block_start(d, s) != 0)
        return "";
    json_t *chunk = json_pack("{s:s,s:i,s:O,s:O,s:s}", "type", "tool-call-delta", "index",
                              s->block, "id", id, "name", name, "arguments_delta", "");
    if (pc_put(&d->out, chunk) != 0)
        return "";
    /* The input streams as input_json_delta; a non-empty start value counts. */
    if (json_is_object(input) && json_object_size(input) > 0) {
        pc_buf args = {0}; /* pc_buf_json: json_dumps can lose a key and succeed */
        if (pc_buf_json(&args, input, NULL, 0) != 0) {
            free(args.p);
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return "";
        }
        int rc = args_delta(d, s, args.p);
        free(args.p);
        if (rc != 0)
            return "";
    }
    return NULL;
}

static const char *on_block_delta(anthropic_decoder *d, const json_t *root) {
    json_int_t key;
    const char *bad = read_index(root, &key);
    if (bad)
        return bad;
    json_t *delta = json_object_get(root, "delta");
    const char *type = json_string_value(json_object_get(delta, "type"));
    if (!json_is_object(delta) || !type)
        return "delta is not an object with a type";
    slot *s = slot_find(d, key);
    if (!s || s->stopped)
        return "content_block_delta for a block that is not open";
    slot_kind want;
    const char *field;
    if (strcmp(type, "text_delta") == 0) {
        want = KIND_TEXT;
        field = "text";
    } else if (strcmp(type, "thinking_delta") == 0) {
        want = KIND_THINKING;
        field = "thinking";
    } else if (strcmp(type, "input_json_delta") == 0) {
        want = KIND_TOOL;
        field = "partial_json";
    } else if (strcmp(type, "compaction_delta") == 0) {
        /* content in pieces, the latest encrypted_content wins */
        if (s->kind != KIND_COMPACTION)
            return "delta type does not match its block";
        json_t *c = json_object_get(delta, "content"), *e = json_object_get(delta, "encrypted_content");
        if ((c && !json_is_null(c) && !json_is_string(c)) ||
            (e && !json_is_null(e) && !json_is_string(e)))
            return "compaction_delta content is not a string or null";
        const json_t *had = json_object_get(s->compaction, "content");
        if (json_is_string(c)) {
            size_t hl = json_string_length(had), cl = json_string_length(c);
            char *joined = malloc(hl + cl + 1);
            if (joined) {
                if (hl)
                    memcpy(joined, json_string_value(had), hl);
                memcpy(joined + hl, json_string_value(c), cl);
            }
            if (!joined || json_object_set_new(s->compaction, "content",
                                               json_stringn(joined, hl + cl)) != 0) {
                free(joined);
                pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
                return "";
            }
            free(joined);
        }
        if (json_is_string(e) &&
            json_object_set(s->compaction, "encrypted_content", e) != 0) {
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return "";
        }
        return NULL;
    } else if (strcmp(type, "signature_delta") == 0) {
        json_t *sig = json_object_get(delta, "signature");
        if (!json_is_string(sig))
            return "signature_delta signature is not a string";
        if (s->kind != KIND_THINKING)
            return NULL; /* a signature only binds a thinking block */
        return opaque_add(d, s, json_string_value(sig));
    } else {
        return NULL; /* citations_delta, ... */
    }
    if (s->kind == KIND_SKIPPED)
        return NULL;
    if (s->kind != want)
        return "delta type does not match its block";
    json_t *v = json_object_get(delta, field);
    if (!json_is_string(v))
        return "delta text is not a string";
    int rc = want == KIND_TOOL ? args_delta(d, s, json_string_value(v))
                               : text_delta(d, s, json_string_value(v));
    return rc == 0 ? NULL : "";
}

static const char *on_block_stop(anthropic_decoder *d, const json_t *root) {
    json_int_t key;
    const char *bad = read_index(root, &key);
    if (bad)
        return bad;
    slot *s = slot_find(d, key);
    if (!s || s->stopped)
        return "content_block_stop for a block that is not open";
    return block_stop(d, s) == 0 ? NULL : "";
}

static const char *on_message_delta(anthropic_decoder *d, const json_t *root) {
    json_t *delta = json_object_get(root, "delta");
    if (delta && !json_is_null(delta)) {
        if (!json_is_object(delta))
            return "delta is not an object";
        json_t *reason = json_object_get(delta, "stop_reason");
        if (reason && !json_is_null(reason)) {
            if (!json_is_string(reason))
                return "stop_reason is not a string";
            free(d->stop_reason);
            if (!(d->stop_reason = strdup(json_string_value(reason)))) {
                pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
                return "";
            }
        }
    }
    return read_usage(d, json_object_get(root, "usage"));
}

static json_t *usage_chunk(const anthropic_decoder *d) {
    json_t *u = json_pack("{s:I,s:I}", "input_tokens", d->input.value, "output_tokens",
                          d->output.value);
    if (d->cache_read.present)
        pc_set_new(&u, "cache_read_tokens", json_integer(d->cache_read.value));
    if (d->cache_write.present)
        pc_set_new(&u, "cache_write_tokens", json_integer(d->cache_write.value));
    if (d->cache_write_5m.present)
        pc_set_new(&u, "cache_write_5m_tokens", json_integer(d->cache_write_5m.value));
    if (d->cache_write_1h.present)
        pc_set_new(&u, "cache_write_1h_tokens", json_integer(d->cache_write_1h.value));
    return u ? json_pack("{s:s,s:o}", "type", "usage", "usage", u) : NULL;
}

static void on_message_stop(anthropic_decoder *d) {
    bool has_tools = false;
    for (size_t i = 0; i < d->nslots; i++) {
        block_stop(d, &d->slots[i]);
        has_tools = has_tools || (d->slots[i].kind == KIND_TOOL);
    }
    if (d->out.done)
        return;
    const char *r = d->stop_reason ? d->stop_reason : "end_turn";
    const char *kind = strcmp(r, "max_tokens") == 0 ||
                               strcmp(r, "model_context_window_exceeded") == 0
                           ? "max-tokens"
                       : strcmp(r, "tool_use") == 0 || has_tools ? "tool-calls"
                                                                 : "stop";
    if (strcmp(r, "refusal") == 0) {
        pc_fail(&d->out, "UNKNOWN", "the model declined to answer (stop_reason refusal)");
        return;
    }
    if (strcmp(kind, "max-tokens") != 0 && d->out.nblocks == 0) {
        pc_fail(&d->out, "EMPTY_RESPONSE", "the model finished without any content");
        return;
    }
    if (d->input.present || d->output.present)
        pc_put(&d->out, usage_chunk(d));
    pc_finish(&d->out, kind, NULL);
}

/* error.type -> canonical code; invalid_request_error may be an overflow. */
static const char *error_code(const char *type, const char *message) {
    static const struct {
        const char *type, *code;
    } table[] = {
        {"overloaded_error", "OVERLOADED"}, {"rate_limit_error", "RATE_LIMIT"},
        {"api_error", "SERVER"},            {"timeout_error", "TIMEOUT"},
        {"authentication_error", "AUTH"},   {"permission_error", "AUTH"},
        {"billing_error", "QUOTA"},         {"not_found_error", "INVALID_REQUEST"},
        {"request_too_large", "INVALID_REQUEST"},
    };
    if (!type)
        return "UNKNOWN";
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(type, table[i].type) == 0)
            return table[i].code;
    if (strcmp(type, "invalid_request_error") == 0)
        return message && (strstr(message, "prompt is too long") ||
                           strstr(message, "context window") ||
                           strstr(message, "context length"))
                   ? "CONTEXT_WINDOW_EXCEEDED"
                   : "INVALID_REQUEST";
    return "UNKNOWN";
}

static void on_error(anthropic_decoder *d, const json_t *root) {
    json_t *error = json_object_get(root, "error");
    const char *type = json_string_value(json_object_get(error, "type"));
    const char *message = json_string_value(json_object_get(error, "message"));
    pc_inband_error(&d->out, error_code(type, message), type, message);
}

/* Decode one parsed event.  Returns "wrong type" text, "" when the stream
 * stopped, or NULL. */
static const char *decode(anthropic_decoder *d, const char *event, const json_t *root) {
    if (!json_is_object(root))
        return "not a JSON object";
    json_t *jtype = json_object_get(root, "type");
    if (jtype && !json_is_string(jtype))
        return "type is not a string";
    const char *type = jtype ? json_string_value(jtype) : event;
    if (!type || !type[0])
        return "no event type";
    if (strcmp(type, "message_start") == 0) {
        json_t *message = json_object_get(root, "message");
        if (!json_is_object(message))
            return "message is not an object";
        return read_usage(d, json_object_get(message, "usage"));
    }
    if (strcmp(type, "content_block_start") == 0)
        return on_block_start(d, root);
    if (strcmp(type, "content_block_delta") == 0)
        return on_block_delta(d, root);
    if (strcmp(type, "content_block_stop") == 0)
        return on_block_stop(d, root);
    if (strcmp(type, "message_delta") == 0)
        return on_message_delta(d, root);
    if (strcmp(type, "message_stop") == 0) {
        on_message_stop(d);
        return NULL;
    }
    if (strcmp(type, "error") == 0) {
        on_error(d, root);
        return "";
    }
    return NULL; /* ping and event types added after this plugin */
}

/* ------------------------------------------------------------------------ */
/* Public                                                                   */
/* ------------------------------------------------------------------------ */

anthropic_decoder *anthropic_decoder_new(const char *provider, anthropic_emit_fn emit,
                                         void *user_data) {
    if (!emit)
        return NULL;
    anthropic_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (pc_out_init(&d->out, provider, "anthropic", "event", emit, user_data) != 0) {
        free(d);
        return NULL;
    }
    return d;
}

int anthropic_decoder_set_model(anthropic_decoder *d, const char *model) {
    if (!d)
        return -1;
    char *copy = model ? strdup(model) : NULL;
    if (model && !copy)
        return -1;
    free(d->model);
    d->model = copy;
    return 0;
}

void anthropic_decoder_free(anthropic_decoder *d) {
    if (!d)
        return;
    for (size_t i = 0; i < d->nslots; i++) {
        free(d->slots[i].opaque.p);
        json_decref(d->slots[i].compaction);
    }
    free(d->slots);
    free(d->model);
    free(d->stop_reason);
    pc_out_clear(&d->out);
    free(d);
}

bool anthropic_decoder_done(const anthropic_decoder *d) { return !d || d->out.done; }

int anthropic_decoder_event(anthropic_decoder *d, const char *event, const char *data,
                            size_t len) {
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
    json_t *root = pc_parse(&d->out, data, len);
    if (!root)
        return -1;
    const char *bad = decode(d, event, root);
    json_decref(root);
    if (bad && bad[0])
        pc_malformed(&d->out, bad, data, len);
    if (d->out.done)
        return bad ? -1 : 0; /* after message_stop the body drains normally */
    return d->out.refused ? -1 : 0;
}

int anthropic_decoder_end(anthropic_decoder *d, json_t *failure, bool aborted) {
    return pc_end(d ? &d->out : NULL, failure, aborted);
}
