/*
 * plugins/provider-openai/openai_decode.c - Chat Completions stream chunks
 * -> weir stream chunks (see weir_provider in weir/plugin.h).
 *
 * Mapping: delta.reasoning_content / delta.reasoning -> reasoning-delta,
 * delta.content -> text-delta, delta.tool_calls[] (assembled by `index`) ->
 * tool-call-delta, finish_reason stop|tool_calls|length -> finish
 * stop|tool-calls|max-tokens, the usage chunk -> one usage chunk just before
 * the finish, `[DONE]` -> the finish.  Text and reasoning blocks open on
 * their first non-empty delta and close when another block starts; tool
 * call blocks stay open until the finish_reason (fragments of parallel calls
 * may interleave).  A stop with nothing but empty reasoning is EMPTY_RESPONSE.
 *
 * Continuations (weir/plugin.h, the `continuation` chunk), emitted for a
 * block after its deltas, just before its block-end, with the row id as
 * provider and the request's model (openai_decoder_set_model; none without
 * one):
 *   - DeepSeek thinking mode streams the chain of thought as
 *     delta.reasoning_content (OpenRouter, Ollama and newer vLLM as
 *     delta.reasoning).  DeepSeek refuses the next request of a tool loop
 *     unless that text comes back on its assistant message ("The
 *     reasoning_content in the thinking mode must be passed back to the
 *     API."; api-docs.deepseek.com/guides/thinking_mode, "Tool Calls").  So
 *     the reasoning block of a stream that had the field at all, even as ""
 *     (a thought that was empty still has to go back), gets
 *     {"field":"reasoning_content"} (or "reasoning"): openai_request.c sends
 *     its text back under that member.  The text is bound to no prefix (the
 *     API checks only that it is there), so the continuation says
 *     "prefix_bound": false and a compaction before it does not drop it
 *     (core/format/continuation.h).  An empty field opens a block only
 *     when nothing else has started (servers that repeat "" beside every
 *     content delta do not split the text).
 *   - Gemini 3 through its OpenAI-compatible endpoint puts the function
 *     call's thought signature on the tool call, usually in the call's first
 *     delta: tool_calls[i].extra_content.google.thought_signature.  Gemini
 *     answers 400 "Function call is missing a thought_signature in
 *     functionCall parts." unless it comes back exactly as received
 *     (ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI
 *     compatibility").  The tool_call block gets {"thought_signature": sig}
 *     (the last one a call carried).  A malformed extra_content is ignored
 *     (it is an extension; the call itself still counts).
 *
 * Two ways in, one behaviour: a chunk of the usual shape is read by the
 * pull scanner of delta_scan.c straight from its bytes (no JSON tree), any
 * other one is parsed with jansson and read by decode().  Both hand the same
 * fields to the same chunk builders, so the scanner only decides how fast a
 * chunk is read, never what it means (tests/fuzz/fuzz_openai_scan.c checks
 * that the two ways agree).
 */
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#include "delta_scan.h"
#include "provider_common.h"

typedef enum finish_reason {
    REASON_NONE = 0,
    REASON_STOP,   /* stop, tool_calls, function_call, anything unknown */
    REASON_LENGTH, /* length */
    REASON_FILTER  /* content_filter */
} finish_reason;

typedef struct tool_slot {
    json_int_t key; /* the provider's tool_calls[].index */
    int block;      /* canonical block index */
    bool has_id, has_name, closed;
    size_t args_len;
    char *sig; /* Gemini's thought_signature of the call (owned), or NULL */
} tool_slot;

struct openai_decoder {
    pc_out out;            /* chunks, block count, finish state */
    int open_block;        /* the open text/reasoning block, or -1 */
    const char *open_type; /* "text" or "reasoning" */
    const char *open_field; /* the open reasoning block's delta member
                               ("reasoning_content", "reasoning"; static) */
    char *model;           /* the request's model (owned): continuations; NULL: none */
    bool content;          /* a block with content started (not only empty reasoning) */
    tool_slot *tools;
    size_t ntools, tools_cap;
    finish_reason reason;
    json_t *usage; /* latest mapped usage, emitted before the finish */
    openai_scan scan; /* the fast path's reused buffers */
    bool slow_only;   /* every chunk takes the jansson path (tests) */
};

/* ------------------------------------------------------------------------ */
/* Chunk building                                                           */
/* ------------------------------------------------------------------------ */

/* Set obj[key] (a static ASCII key) = value (stolen); on failure drop *obj. */
static void set_new(json_t **obj, const char *key, json_t *value) {
    if (*obj && json_object_set_new_nocheck(*obj, key, value) != 0) {
        json_decref(*obj);
        *obj = NULL;
    } else if (!*obj) {
        json_decref(value);
    }
}

/* A string value from text both ways in validated (UTF-8, no NUL byte). */
static json_t *valid_string(const char *text, size_t len) {
    return json_stringn_nocheck(text, len);
}

/* A NUL-terminated malloc'd copy of `len` bytes of `p`, or NULL. */
static char *copy_bytes(const char *p, size_t len) {
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, p, len);
        copy[len] = '\0';
    }
    return copy;
}

/* {"type": type, "index": index}, new reference or NULL. */
static json_t *typed_chunk(const char *type, int index) {
    json_t *chunk = json_object();
    set_new(&chunk, "type", json_string_nocheck(type));
    set_new(&chunk, "index", json_integer(index));
    return chunk;
}

/* ------------------------------------------------------------------------ */
/* Blocks                                                                   */
/* ------------------------------------------------------------------------ */

/* Start a block; its canonical index, or -1 when the stream stopped. */
static int block_start(openai_decoder *d, const char *type) {
    int index;
    return pc_block_start(&d->out, type, &index) == 0 ? index : -1;
}

/* Emit {"type":"continuation","index":index,"continuation":{"provider",
 * "model","data":{key:value}}} for block `index` (value: `len` bytes of valid
 * UTF-8), with "prefix_bound": false when `bound` is false (core/
 * continuation.h: compaction before it does not drop it).  Nothing without a
 * model.  0, or -1 when the stream stopped. */
static int continuation(openai_decoder *d, int index, const char *key, const char *value,
                        size_t len, bool bound) {
    if (!d->model)
        return 0;
    json_t *data = json_object(), *c = json_object();
    set_new(&data, key, valid_string(value, len));
    set_new(&c, "provider", json_string(d->out.provider));
    set_new(&c, "model", json_string(d->model));
    set_new(&c, "data", data);
    if (!bound)
        set_new(&c, "prefix_bound", json_false());
    json_t *chunk = typed_chunk("continuation", index);
    set_new(&chunk, "continuation", c);
    return pc_put(&d->out, chunk);
}

static int close_simple(openai_decoder *d) {
    if (d->open_block < 0)
        return 0;
    int index = d->open_block;
    const char *field = strcmp(d->open_type, "reasoning") == 0 ? d->open_field : NULL;
    d->open_block = -1;
    d->open_field = NULL;
    if (field && continuation(d, index, "field", field, strlen(field), false) != 0)
        return -1;
    return pc_block_end(&d->out, index, false);
}

/* A tool call block ends; a call that never got arguments gets "{}". */
static int close_tool(openai_decoder *d, tool_slot *t) {
    if (t->closed)
        return 0;
    t->closed = true;
    if (t->sig && continuation(d, t->block, "thought_signature", t->sig, strlen(t->sig), true) != 0)
        return -1;
    return pc_block_end(&d->out, t->block, t->args_len == 0);
}

static int close_all(openai_decoder *d) {
    if (close_simple(d) != 0)
        return -1;
    for (size_t i = 0; i < d->ntools; i++)
        if (close_tool(d, &d->tools[i]) != 0)
            return -1;
    return 0;
}

/* Make the open block one of `block_type` (closing another).  0, or -1 when
 * the stream stopped. */
static int open_simple(openai_decoder *d, const char *block_type) {
    if (d->open_block >= 0 && strcmp(d->open_type, block_type) == 0)
        return 0;
    if (close_simple(d) != 0)
        return -1;
    int index = block_start(d, block_type);
    if (index < 0)
        return -1;
    d->open_block = index;
    d->open_type = block_type;
    return 0;
}

/* Text or reasoning: continue the open block of that type or start one.
 * `field` (static) names the member reasoning came in (NULL for text). */
static int simple_delta(openai_decoder *d, const char *block_type, const char *chunk_type,
                        const char *field, const char *text, size_t len) {
    if (!text[0]) {
        /* a reasoning member that is there but empty: the block it opens
         * goes back empty (DeepSeek wants the member on a tool turn) */
        if (!field || (d->open_block < 0 ? d->out.nblocks > 0
                                         : strcmp(d->open_type, "reasoning") != 0))
            return 0;
        if (open_simple(d, block_type) != 0)
            return -1;
        if (!d->open_field)
            d->open_field = field;
        return 0;
    }
    if (open_simple(d, block_type) != 0)
        return -1;
    if (field && !d->open_field)
        d->open_field = field;
    d->content = true;
    json_t *chunk = typed_chunk(chunk_type, d->open_block);
    set_new(&chunk, "text", valid_string(text, len));
    return pc_put(&d->out, chunk);
}

static tool_slot *tool_find(openai_decoder *d, json_int_t key) {
    for (size_t i = 0; i < d->ntools; i++)
        if (d->tools[i].key == key)
            return &d->tools[i];
    if (d->ntools == d->tools_cap) {
        size_t cap = d->tools_cap ? d->tools_cap * 2 : 4;
        tool_slot *grown = realloc(d->tools, cap * sizeof *grown);
        if (!grown) {
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return NULL;
        }
        d->tools = grown;
        d->tools_cap = cap;
    }
    if (close_simple(d) != 0)
        return NULL;
    int index = block_start(d, "tool_call");
    if (index < 0)
        return NULL;
    tool_slot *t = &d->tools[d->ntools++];
    memset(t, 0, sizeof *t);
    t->key = key;
    t->block = index;
    d->content = true;
    return t;
}

/* ------------------------------------------------------------------------ */
/* Chunk fields                                                             */
/* ------------------------------------------------------------------------ */

/* Optional string member: 0 with *out (NULL when absent or null), -1 when it
 * has another type. */
static int opt_string(const json_t *obj, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

/* Optional non-negative integer member; -1 when it has another type. */
static int opt_count(const json_t *obj, const char *key, json_int_t *out, bool *present) {
    json_t *v = json_object_get(obj, key);
    *present = false;
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = json_integer_value(v);
    *present = true;
    return 0;
}

/* The mapped usage (new reference, NULL when out of memory).  `cached`:
 * prompt_tokens_details.cached_tokens (OpenAI: platform.openai.com/docs/
 * guides/prompt-caching; Gemini's compatible endpoint and vLLM report it
 * too), else DeepSeek's prompt_cache_hit_tokens (api-docs.deepseek.com/
 * guides/kv_cache): a part of prompt_tokens, so input_tokens is the rest. */
static json_t *usage_object(json_int_t prompt, json_int_t completion, json_int_t cached,
                            bool has_cached, json_int_t reasoning, bool has_reasoning) {
    json_int_t input = prompt > cached ? prompt - cached : 0;
    json_t *m = json_object();
    set_new(&m, "input_tokens", json_integer(input));
    set_new(&m, "output_tokens", json_integer(completion));
    if (has_cached)
        set_new(&m, "cache_read_tokens", json_integer(cached));
    if (has_reasoning)
        set_new(&m, "reasoning_tokens", json_integer(reasoning));
    return m;
}

/* usage -> {input_tokens (prompt - cached), output_tokens, cache_read_tokens?,
 * reasoning_tokens?}.  Returns "wrong type" text or NULL; *out new ref. */
static const char *map_usage(const json_t *u, json_t **out) {
    json_int_t prompt, completion, cached = 0, reasoning = 0;
    bool has_prompt, has_completion, has_cached = false, has_reasoning = false;
    *out = NULL;
    if (!json_is_object(u))
        return "usage is not an object";
    if (opt_count(u, "prompt_tokens", &prompt, &has_prompt) != 0 ||
        opt_count(u, "completion_tokens", &completion, &has_completion) != 0)
        return "usage token counts are not integers";
    json_t *pd = json_object_get(u, "prompt_tokens_details");
    if (json_is_object(pd) && opt_count(pd, "cached_tokens", &cached, &has_cached) != 0)
        return "usage.prompt_tokens_details.cached_tokens is not an integer";
    json_int_t hit;
    bool has_hit;
    if (opt_count(u, "prompt_cache_hit_tokens", &hit, &has_hit) != 0)
        return "usage.prompt_cache_hit_tokens is not an integer";
    if (!has_cached && has_hit) {
        cached = hit;
        has_cached = true;
    }
    json_t *cd = json_object_get(u, "completion_tokens_details");
    if (json_is_object(cd) &&
        opt_count(cd, "reasoning_tokens", &reasoning, &has_reasoning) != 0)
        return "usage.completion_tokens_details.reasoning_tokens is not an integer";
    *out = usage_object(prompt, completion, cached, has_cached, reasoning, has_reasoning);
    return *out ? NULL : "out of memory";
}

/* One tool call fragment (strings borrowed, NULL when absent; `sig` its
 * thought signature): "" for a stopped stream, or NULL. */
static const char *tool_call_apply(openai_decoder *d, json_int_t key, const char *id,
                                   size_t id_len, const char *name, size_t name_len,
                                   const char *args, size_t alen, const char *sig,
                                   size_t sig_len) {
    tool_slot *t = tool_find(d, key);
    if (!t)
        return "";
    if (sig && sig_len > 0) {
        char *copy = copy_bytes(sig, sig_len);
        if (!copy) {
            pc_fail(&d->out, "UNKNOWN", "out of memory while decoding the stream");
            return "";
        }
        free(t->sig);
        t->sig = copy;
    }
    json_t *chunk = typed_chunk("tool-call-delta", t->block);
    bool say = false;
    if (id && id[0] && !t->has_id) {
        t->has_id = say = true;
        set_new(&chunk, "id", valid_string(id, id_len));
    }
    if (name && name[0] && !t->has_name) {
        t->has_name = say = true;
        set_new(&chunk, "name", valid_string(name, name_len));
    }
    set_new(&chunk, "arguments_delta", valid_string(args ? args : "", alen));
    t->args_len += alen;
    if (chunk && !say && alen == 0) {
        json_decref(chunk);
        return NULL;
    }
    return pc_put(&d->out, chunk) == 0 ? NULL : "";
}

/* One delta.tool_calls[] entry.  Returns "wrong type" text, "" for a stopped
 * stream, or NULL. */
static const char *tool_call_delta(openai_decoder *d, const json_t *tc, size_t position) {
    if (!json_is_object(tc))
        return "tool_calls entry is not an object";
    json_t *jindex = json_object_get(tc, "index");
    if (jindex && !json_is_integer(jindex))
        return "tool_calls[].index is not an integer";
    /* Some compatible servers omit `index`: the position stands in. */
    json_int_t key = jindex ? json_integer_value(jindex) : (json_int_t)position;
    const char *id, *name = NULL, *args = NULL;
    if (opt_string(tc, "id", &id) != 0)
        return "tool_calls[].id is not a string";
    json_t *fn = json_object_get(tc, "function");
    if (fn && !json_is_null(fn)) {
        if (!json_is_object(fn))
            return "tool_calls[].function is not an object";
        if (opt_string(fn, "name", &name) != 0)
            return "tool_calls[].function.name is not a string";
        if (opt_string(fn, "arguments", &args) != 0)
            return "tool_calls[].function.arguments is not a string";
    }
    /* Gemini: extra_content.google.thought_signature (ignored when malformed) */
    json_t *google = json_object_get(json_object_get(tc, "extra_content"), "google");
    const char *sig = json_string_value(json_object_get(google, "thought_signature"));
    return tool_call_apply(d, key, id, id ? strlen(id) : 0, name, name ? strlen(name) : 0,
                           args, args ? strlen(args) : 0, sig, sig ? strlen(sig) : 0);
}

/* An in-band {"error":{...}} object: classify by type/code, then message
 * (openai.h: the Responses decoder shares it). */
const char *openai_error_code(const char *type, const char *code, const char *message) {
    static const struct {
        const char *name, *code;
    } table[] = {
        {"context_length_exceeded", "CONTEXT_WINDOW_EXCEEDED"},
        {"insufficient_quota", "QUOTA"},
        {"rate_limit_exceeded", "RATE_LIMIT"},
        {"rate_limit_error", "RATE_LIMIT"},
        {"overloaded_error", "OVERLOADED"},
        {"overloaded", "OVERLOADED"},
        {"server_error", "SERVER"},
        {"api_error", "SERVER"},
        {"timeout", "TIMEOUT"},
        {"invalid_api_key", "AUTH"},
        {"authentication_error", "AUTH"},
        {"permission_error", "AUTH"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if ((code && strcmp(code, table[i].name) == 0) ||
            (type && strcmp(type, table[i].name) == 0))
            return table[i].code;
    if (type && strcmp(type, "invalid_request_error") == 0)
        return message && (strstr(message, "context length") ||
                           strstr(message, "context window") ||
                           strstr(message, "too many tokens"))
                   ? "CONTEXT_WINDOW_EXCEEDED"
                   : "INVALID_REQUEST";
    return "UNKNOWN";
}

static void inband_error(openai_decoder *d, const json_t *error) {
    const char *type = NULL, *code = NULL, *message = NULL;
    if (json_is_object(error)) {
        type = json_string_value(json_object_get(error, "type"));
        code = json_string_value(json_object_get(error, "code"));
        message = json_string_value(json_object_get(error, "message"));
    } else {
        message = json_string_value(error);
    }
    pc_inband_error(&d->out, openai_error_code(type, code, message), type, message);
}

/* ------------------------------------------------------------------------ */
/* The stream                                                               */
/* ------------------------------------------------------------------------ */

static void finish_normally(openai_decoder *d) {
    close_all(d);
    if (d->out.done)
        return;
    bool has_tools = d->ntools > 0;
    if (d->reason == REASON_FILTER) {
        pc_fail(&d->out, "UNKNOWN",
                "the provider stopped the answer (finish_reason content_filter)");
        return;
    }
    if (d->reason != REASON_LENGTH && !d->content) {
        pc_fail(&d->out, "EMPTY_RESPONSE", "the model finished without any content");
        return;
    }
    if (d->usage) {
        json_t *usage = d->usage;
        d->usage = NULL;
        pc_put(&d->out, json_pack("{s:s,s:o}", "type", "usage", "usage", usage));
    }
    pc_finish(&d->out,
              d->reason == REASON_LENGTH ? "max-tokens"
              : has_tools                ? "tool-calls"
                                         : "stop",
              NULL);
}

openai_decoder *openai_decoder_new(const char *provider, openai_emit_fn emit,
                                   void *user_data) {
    if (!emit)
        return NULL;
    openai_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (pc_out_init(&d->out, provider, "openai", "chunk", emit, user_data) != 0) {
        free(d);
        return NULL;
    }
    d->open_block = -1;
    return d;
}

void openai_decoder_free(openai_decoder *d) {
    if (!d)
        return;
    json_decref(d->usage);
    openai_scan_clear(&d->scan);
    for (size_t i = 0; i < d->ntools; i++)
        free(d->tools[i].sig);
    free(d->tools);
    free(d->model);
    pc_out_clear(&d->out);
    free(d);
}

bool openai_decoder_done(const openai_decoder *d) { return !d || d->out.done; }

int openai_decoder_set_model(openai_decoder *d, const char *model) {
    if (!d)
        return 0;
    char *copy = model && model[0] ? copy_bytes(model, strlen(model)) : NULL;
    if (model && model[0] && !copy)
        return -1;
    free(d->model);
    d->model = copy;
    return 0;
}

void openai_decoder_set_fast(openai_decoder *d, bool fast) {
    if (d)
        d->slow_only = !fast;
}

/* A finish_reason (borrowed, NULL when absent): "" when the stream stopped. */
static const char *finish_reason_seen(openai_decoder *d, const char *reason) {
    if (reason) {
        d->reason = strcmp(reason, "length") == 0           ? REASON_LENGTH
                    : strcmp(reason, "content_filter") == 0 ? REASON_FILTER
                                                            : REASON_STOP;
        if (close_all(d) != 0)
            return "";
    }
    return NULL;
}

/* Decode one parsed chunk.  Returns "wrong type" text, "" when the stream
 * stopped, or NULL. */
static const char *decode(openai_decoder *d, const json_t *root) {
    if (!json_is_object(root))
        return "not a JSON object";
    json_t *error = json_object_get(root, "error");
    if (error && !json_is_null(error)) {
        inband_error(d, error);
        return "";
    }
    json_t *usage = json_object_get(root, "usage");
    if (usage && !json_is_null(usage)) {
        json_t *mapped;
        const char *bad = map_usage(usage, &mapped);
        if (bad)
            return bad;
        json_decref(d->usage);
        d->usage = mapped;
    }
    json_t *choices = json_object_get(root, "choices");
    if (!choices || json_is_null(choices))
        return NULL;
    if (!json_is_array(choices))
        return "choices is not an array";
    if (json_array_size(choices) == 0)
        return NULL;
    /* One completion per request (n = 1): only the first choice counts. */
    json_t *choice = json_array_get(choices, 0);
    if (!json_is_object(choice))
        return "choices[0] is not an object";
    json_t *delta = json_object_get(choice, "delta");
    if (delta && !json_is_null(delta)) {
        if (!json_is_object(delta))
            return "choices[0].delta is not an object";
        const char *reasoning, *reasoning2, *content;
        if (opt_string(delta, "reasoning_content", &reasoning) != 0 ||
            opt_string(delta, "reasoning", &reasoning2) != 0)
            return "delta.reasoning_content is not a string";
        if (opt_string(delta, "content", &content) != 0)
            return "delta.content is not a string";
        const char *field = reasoning ? "reasoning_content" : "reasoning";
        if (!reasoning)
            reasoning = reasoning2;
        if (reasoning && simple_delta(d, "reasoning", "reasoning-delta", field, reasoning,
                                      strlen(reasoning)) != 0)
            return "";
        if (content &&
            simple_delta(d, "text", "text-delta", NULL, content, strlen(content)) != 0)
            return "";
        json_t *calls = json_object_get(delta, "tool_calls");
        if (calls && !json_is_null(calls)) {
            if (!json_is_array(calls))
                return "delta.tool_calls is not an array";
            for (size_t i = 0; i < json_array_size(calls); i++) {
                const char *bad = tool_call_delta(d, json_array_get(calls, i), i);
                if (bad)
                    return bad;
            }
        }
    }
    const char *reason;
    if (opt_string(choice, "finish_reason", &reason) != 0)
        return "finish_reason is not a string";
    return finish_reason_seen(d, reason);
}

/* Decode a chunk the scanner read (every field of the right type), the same
 * way decode() does the parsed one.  Returns "" when the stream stopped,
 * "out of memory", or NULL. */
static const char *decode_scanned(openai_decoder *d, const openai_scan_delta *v) {
    if (v->has_usage) {
        bool hit = !v->has_cached && v->has_cache_hit; /* DeepSeek's, as map_usage */
        json_t *mapped = usage_object(v->prompt_tokens, v->completion_tokens,
                                      hit ? v->cache_hit_tokens : v->cached_tokens,
                                      v->has_cached || hit, v->reasoning_tokens, v->has_reasoning);
        if (!mapped)
            return "out of memory";
        json_decref(d->usage);
        d->usage = mapped;
    }
    if (!v->has_choice)
        return NULL;
    if (v->has_delta) {
        const openai_scan_str *reasoning =
            v->reasoning_content.p ? &v->reasoning_content : &v->reasoning;
        const char *field = v->reasoning_content.p ? "reasoning_content" : "reasoning";
        if (reasoning->p && simple_delta(d, "reasoning", "reasoning-delta", field, reasoning->p,
                                         reasoning->len) != 0)
            return "";
        if (v->content.p &&
            simple_delta(d, "text", "text-delta", NULL, v->content.p, v->content.len) != 0)
            return "";
        for (size_t i = 0; i < v->ncalls; i++) {
            const openai_scan_call *c = &v->calls[i];
            const char *bad = tool_call_apply(
                d, c->has_index ? (json_int_t)c->index : (json_int_t)i, c->id.p, c->id.len,
                c->name.p, c->name.len, c->args.p, c->args.len, NULL, 0);
            if (bad)
                return bad;
        }
    }
    return finish_reason_seen(d, v->finish_reason.p);
}

static bool is_done_marker(const char *data, size_t len) {
    while (len && (data[0] == ' ' || data[0] == '\t' || data[0] == '\r' || data[0] == '\n'))
        data++, len--;
    while (len && (data[len - 1] == ' ' || data[len - 1] == '\t' || data[len - 1] == '\r' ||
                   data[len - 1] == '\n'))
        len--;
    return len == 6 && memcmp(data, "[DONE]", 6) == 0;
}

int openai_decoder_event(openai_decoder *d, const char *data, size_t len) {
    if (!d)
        return -1;
    if (d->out.done)
        return 0;
    if (!data) {
        data = "";
        len = 0;
    }
    if (d->out.refused)
        return -1;
    if (is_done_marker(data, len)) {
        if (d->reason == REASON_NONE)
            pc_fail(&d->out, "TRANSPORT",
                    "stream ended before finish ([DONE] without finish_reason)");
        else
            finish_normally(d);
        return 0;
    }
    const char *bad;
    if (!d->slow_only && openai_scan_chunk(&d->scan, data, len)) {
        bad = decode_scanned(d, &d->scan.delta);
    } else {
        json_t *root = pc_parse(&d->out, data, len);
        if (!root)
            return -1;
        bad = decode(d, root);
        json_decref(root);
    }
    if (bad && bad[0])
        pc_malformed(&d->out, bad, data, len);
    return d->out.done || d->out.refused ? -1 : 0;
}

int openai_decoder_end(openai_decoder *d, json_t *failure, bool aborted) {
    /* No failure, a finish_reason seen: servers that omit [DONE] finish. */
    if (d && !d->out.done && !json_is_object(failure) && !aborted && d->reason != REASON_NONE &&
        !d->out.refused)
        finish_normally(d);
    return pc_end(d ? &d->out : NULL, failure, aborted);
}
