/*
 * plugins/provider-anthropic/anthropic_request.c - canonical request
 * (docs/providers.md) -> Messages API request body.
 *
 *   system messages   -> top-level "system": texts joined by a blank line
 *   user text/image   -> {type:text} / {type:image,source:{type:base64,...}}
 *   assistant         -> text and {type:tool_use,id,name,input:<parsed
 *                        arguments, {} when not a JSON object>}; reasoning
 *                        is not resent (it carries no signature)
 *   tool_result       -> a user message of {type:tool_result,tool_use_id,
 *                        content,is_error?} blocks, placed first
 *   consecutive messages of the same role are merged; empty text blocks and
 *   messages left without content are dropped (the API rejects both)
 *   tools             -> [{name,description,input_schema}]
 *   max_tokens        -> the request's, else `default_max_tokens`
 *   tool_choice       -> "auto" {type:auto} | "none" {type:none} | "required"
 *                        {type:any}, sent only with tools
 *   options           -> merged last, member by member (provider_options.h);
 *                        the keys of anthropic_owned_keys are refused, and a
 *                        `thinking` the model's table entry refuses too
 *                        (model_table.h, pc_thinking_rule)
 */
#include "anthropic.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_cache.h"
#include "provider_common.h"
#include "provider_options.h"

/*
 * The members the body builder writes itself, refused as options: model,
 * messages, system (the canonical system messages), tools, tool_choice,
 * stream (the decoder reads SSE) and max_tokens (the call config's, else
 * the model's max_output).  temperature is not owned: an option overrides
 * the call config's (and a null drops it).
 */
const char *const anthropic_owned_keys[] = {
    "model", "messages", "system", "tools", "tool_choice", "stream", "max_tokens", NULL,
};

static bool is_type(const json_t *block, const char *type) {
    const char *t = pc_block_type(block);
    return t && strcmp(t, type) == 0;
}

static json_t *text_block(const char *text) {
    return json_pack("{s:s,s:s}", "type", "text", "text", text);
}

static json_t *image_block(const json_t *block, const char *where, char *msg, size_t size) {
    const char *media, *data;
    if (pc_image_fields(block, where, &media, &data, msg, size) != 0)
        return NULL;
    json_t *b = json_pack("{s:s,s:{s:s,s:s,s:s}}", "type", "image", "source", "type", "base64",
                          "media_type", media, "data", data);
    if (!b)
        PC_OOM(msg, size);
    return b;
}

/* Append `b` (stolen; NULL means out of memory) to `blocks`. */
static int push(json_t *blocks, json_t *b, char *msg, size_t size) {
    if (!b || json_array_append_new(blocks, b) != 0)
        return PC_OOM(msg, size);
    return 0;
}

static json_t *tool_result_block(const json_t *block, const char *where, char *msg,
                                 size_t size) {
    const char *call_id = json_string_value(json_object_get(block, "call_id"));
    json_t *content = json_object_get(block, "content");
    json_t *is_error = json_object_get(block, "is_error");
    if (!call_id) {
        pc_bad(msg, size, "%s: tool_result needs a string \"call_id\"", where);
        return NULL;
    }
    if (content && !json_is_array(content) && !json_is_string(content)) {
        pc_bad(msg, size, "%s.content: expected an array of blocks", where);
        return NULL;
    }
    json_t *out = json_array();
    json_t *b = json_pack("{s:s,s:s}", "type", "tool_result", "tool_use_id", call_id);
    if (!out || !b) {
        json_decref(out);
        json_decref(b);
        PC_OOM(msg, size);
        return NULL;
    }
    int rc = 0;
    if (json_is_string(content) && json_string_length(content) > 0)
        rc = push(out, text_block(json_string_value(content)), msg, size);
    size_t i;
    json_t *c;
    json_array_foreach(json_is_array(content) ? content : NULL, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        char at[128];
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        if (is_type(c, "text") && text) {
            if (text[0])
                rc = push(out, text_block(text), msg, size);
        } else if (is_type(c, "image")) {
            json_t *img = image_block(c, at, msg, size);
            rc = img ? push(out, img, msg, size) : -1;
        } else {
            rc = pc_bad(msg, size, "%s: unsupported block in a tool result", at);
        }
        if (rc != 0)
            break;
    }
    if (rc == 0 && json_array_size(out) > 0 && json_object_set(b, "content", out) != 0)
        rc = PC_OOM(msg, size);
    if (rc == 0 && json_is_true(is_error) && json_object_set_new(b, "is_error", json_true()))
        rc = PC_OOM(msg, size);
    json_decref(out);
    if (rc != 0) {
        json_decref(b);
        return NULL;
    }
    return b;
}

/* {"type":"tool_use","id","name","input"}: input is the parsed arguments
 * when they are a JSON object, else {}. */
static json_t *tool_use_block(const json_t *block, const char *where, char *msg, size_t size) {
    const char *id = json_string_value(json_object_get(block, "id"));
    const char *name = json_string_value(json_object_get(block, "name"));
    const char *args = json_string_value(json_object_get(block, "arguments"));
    if (!id || !name || !args) {
        pc_bad(msg, size, "%s: tool_call needs string \"id\", \"name\" and \"arguments\"", where);
        return NULL;
    }
    json_error_t jerr;
    json_t *input = json_loads(args, 0, &jerr);
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    json_t *b = input ? json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name",
                                  name, "input", input)
                      : NULL;
    if (!b)
        PC_OOM(msg, size);
    return b;
}

/* Translate one message's blocks.  System text goes to `sys`; the rest to
 * `blocks` (a new array). */
static int translate_blocks(const json_t *content, const char *role, const char *where, pc_buf *sys,
                            json_t *blocks, char *msg, size_t size) {
    bool system = strcmp(role, "system") == 0, user = strcmp(role, "user") == 0;
    bool assistant = strcmp(role, "assistant") == 0, tool = strcmp(role, "tool") == 0;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        char at[96];
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        const char *type = pc_block_type(b);
        const char *text = json_string_value(json_object_get(b, "text"));
        int rc;
        if (is_type(b, "text") && text && system) {
            rc = pc_buf_piece(sys, text) == 0 ? 0 : PC_OOM(msg, size);
        } else if (is_type(b, "text") && text && (user || assistant)) {
            rc = text[0] ? push(blocks, text_block(text), msg, size) : 0;
        } else if (is_type(b, "image") && user) {
            json_t *img = image_block(b, at, msg, size);
            rc = img ? push(blocks, img, msg, size) : -1;
        } else if (is_type(b, "tool_result") && (user || tool)) {
            json_t *r = tool_result_block(b, at, msg, size);
            rc = r ? push(blocks, r, msg, size) : -1;
        } else if (is_type(b, "tool_call") && assistant) {
            json_t *u = tool_use_block(b, at, msg, size);
            rc = u ? push(blocks, u, msg, size) : -1;
        } else if (is_type(b, "reasoning") && assistant) {
            rc = 0; /* never resent: canonical reasoning carries no signature */
        } else {
            rc = pc_bad(msg, size, "%s: unsupported block type \"%s\" in a %s message", at,
                        type ? type : "(none)", role);
        }
        if (rc != 0)
            return -1;
    }
    return 0;
}

/*
 * The wire text of one canonical message (messages[i]), as cached: one
 * kind byte, then two parts.  's' (system): the message's system text, then
 * nothing.  'u' / 'a' (the API role: user and tool messages are 'u'): its
 * tool_result blocks, then its other blocks, each part comma-joined JSON
 * (the API wants tool results first in a user message).  The first part's
 * length is written before it: "<kind><len>:<part1><part2>".
 */
static int message_text(const json_t *m, size_t i, pc_buf *out, char *msg, size_t size) {
    char where[48];
    const json_t *content;
    const char *role = pc_message_role(m, i, where, sizeof where, &content, msg, size);
    if (!role)
        return -1;
    pc_buf sys = {0}, parts[2] = {{0}, {0}};
    json_t *blocks = json_array();
    int rc = blocks ? translate_blocks(content, role, where, &sys, blocks, msg, size)
                    : PC_OOM(msg, size);
    size_t k;
    json_t *b;
    json_array_foreach(blocks, k, b) {
        if (rc != 0)
            break;
        pc_buf *part = &parts[is_type(b, "tool_result") ? 0 : 1];
        /* pc_buf_json, not json_dumps: jansson's own buffer can lose a key
         * when it cannot grow and still report success */
        if ((part->len && pc_buf_add(part, ",", 1) != 0) || pc_buf_json(part, b, msg, size) != 0)
            rc = PC_OOM(msg, size);
    }
    json_decref(blocks);
    if (rc == 0) {
        char kind = strcmp(role, "system") == 0      ? 's'
                    : strcmp(role, "assistant") == 0 ? 'a'
                                                     : 'u';
        const pc_buf *first = kind == 's' ? &sys : &parts[0];
        char head[32];
        int n = snprintf(head, sizeof head, "%c%zu:", kind, first->len);
        if (pc_buf_add(out, head, (size_t)n) != 0 ||
            (first->len && pc_buf_add(out, first->p, first->len) != 0) ||
            (kind != 's' && parts[1].len && pc_buf_add(out, parts[1].p, parts[1].len) != 0))
            rc = PC_OOM(msg, size);
    }
    free(sys.p);
    free(parts[0].p);
    free(parts[1].p);
    return rc;
}

/*
 * The messages being assembled, in a memo (provider_cache.h): its `text` is
 * the body from `{"messages":[` through the finished messages, comma-joined;
 * its `side` the system text.  The open group of consecutive messages of one
 * API role is kept aside until a message of the other role (or the end)
 * closes it into one {"role","content"} element.
 *
 * The memo lets the next request start from this one: each message's entry
 * has `end`, the text length before it with every earlier group closed, when
 * it starts a group or no group is open (else PC_MEMO_NONE), and `side`, the
 * system text's length before it.  A request whose first p messages are the
 * same objects resumes at the last such place before message p - 1's end:
 * every group it keeps is closed, and only the rest is folded again (from
 * the cache).
 */
#define OPENING "{\"messages\":["
#define OPENING_LEN (sizeof OPENING - 1)

typedef struct assembly {
    pc_memo *m;           /* text: the body so far; side: the system text */
    char role;            /* 'u', 'a', or 0 when no group is open */
    pc_buf results, rest; /* the open group's two parts */
} assembly;

/* Close the open group into one {"role","content"} element. */
static int flush_group(assembly *a) {
    if (!a->role)
        return 0;
    pc_buf *out = &a->m->text;
    const char *head = a->role == 'a' ? "{\"role\":\"assistant\",\"content\":["
                                      : "{\"role\":\"user\",\"content\":[";
    int rc = (out->len > OPENING_LEN && pc_buf_add(out, ",", 1)) ||
             pc_buf_add(out, head, strlen(head)) ||
             (a->results.len && pc_buf_add(out, a->results.p, a->results.len)) ||
             (a->results.len && a->rest.len && pc_buf_add(out, ",", 1)) ||
             (a->rest.len && pc_buf_add(out, a->rest.p, a->rest.len)) || pc_buf_add(out, "]}", 2)
                 ? -1
                 : 0;
    a->results.len = a->rest.len = 0;
    a->role = 0;
    return rc;
}

/* Append `n` bytes of `s` to a part, comma-separated from what it holds. */
static int add_part(pc_buf *part, const char *s, size_t n) {
    if (!n)
        return 0;
    if (part->len && pc_buf_add(part, ",", 1) != 0)
        return -1;
    return pc_buf_add(part, s, n);
}

/* Fold one cached message text (see message_text) into the assembly:
 * system text joins the system prompt; a message of the open group's role
 * merges into it; a message with no blocks changes nothing.  *resume: the
 * entry's `end` (see above). */
static int fold_message(assembly *a, const char *text, size_t len, size_t *resume) {
    char kind = text[0];
    char *end = NULL;
    size_t n1 = (size_t)strtoull(text + 1, &end, 10);
    const char *p1 = end + 1, *p2 = p1 + n1;
    size_t n2 = len - (size_t)(p2 - text);
    pc_buf *sys = &a->m->side;
    bool opens = kind != 's' && (n1 || n2); /* it joins or opens a group */
    if (opens && a->role && a->role != kind && flush_group(a) != 0)
        return -1;
    *resume = !a->role ? a->m->text.len : PC_MEMO_NONE;
    if (kind == 's') {
        if (!n1)
            return 0;
        return (sys->len && pc_buf_add(sys, "\n\n", 2)) || pc_buf_add(sys, p1, n1);
    }
    if (!opens)
        return 0; /* nothing to send: dropped, and it does not split a group */
    a->role = kind;
    return add_part(&a->results, p1, n1) || add_part(&a->rest, p2, n2) ? -1 : 0;
}

/* Where a request whose first `p` messages are the memo's resumes: the
 * entries kept, the text and the side cut (see above). */
static size_t resume_at(pc_memo *m, size_t p) {
    size_t r = p ? p - 1 : 0;
    while (r > 0 && m->at[r].end == PC_MEMO_NONE)
        r--;
    if (p == 0 || m->at[r].end == PC_MEMO_NONE) {
        pc_memo_keep(m, 0, 0, 0);
        return 0;
    }
    pc_memo_keep(m, r, m->at[r].end, m->at[r].side);
    return r;
}

int anthropic_request_build(const json_t *request, long default_max_tokens, pc_cache *cache,
                            pc_memo *memo, char *msg, size_t size) {
    return anthropic_request_build_ex(request, NULL, default_max_tokens, cache, memo, msg, size);
}

int anthropic_request_build_ex(const json_t *request, pc_extra *extra, long default_max_tokens,
                               pc_cache *cache, pc_memo *memo, char *msg, size_t size) {
    if (!memo)
        return PC_OOM(msg, size);
    if (extra)
        extra->dropped_temperature = false;
    const char *model = pc_request_check(request, msg, size);
    if (!model)
        goto fail;
    const json_t *opts =
        extra && extra->options ? extra->options : json_object_get(request, "options");
    if (json_is_null(opts))
        opts = NULL;
    if (pc_options_check(opts, anthropic_owned_keys, model, "options", msg, size) != 0)
        goto fail;
    const json_t *opt_temp = json_object_get(opts, "temperature");
    json_t *messages = json_object_get(request, "messages");
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    json_t *tools = json_object_get(request, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        pc_bad(msg, size, "tools: expected an array");
        goto fail;
    }
    if (!json_is_array(messages)) {
        pc_bad(msg, size, "messages: expected an array");
        goto fail;
    }
    const char *cs;
    if (pc_tool_choice(request, &cs, msg, size) != 0)
        goto fail;
    if (cs && !strcmp(cs, "required"))
        cs = "any"; /* the Messages API's name for it */
    assembly a = {memo, 0, {0}, {0}};
    pc_buf one = {0}, *out = &memo->text;
    int rc = 0;
    size_t i = resume_at(memo, pc_memo_common(memo, messages)), n_msgs = json_array_size(messages);
    if (out->len == 0 && pc_buf_add(out, OPENING, OPENING_LEN) != 0)
        rc = PC_OOM(msg, size);
    for (; rc == 0 && i < n_msgs; i++) {
        json_t *m = json_array_get(messages, i);
        one.len = 0;
        int hit = pc_cache_get(cache, m, PC_CACHE_MESSAGE, &one);
        if (hit < 0) {
            rc = PC_OOM(msg, size);
        } else if (hit == 0) {
            rc = message_text(m, i, &one, msg, size);
            if (rc == 0) /* a failed put only costs the next request a translation */
                (void)pc_cache_put(cache, m, PC_CACHE_MESSAGE, one.p, one.len);
        }
        size_t side = memo->side.len, resume = PC_MEMO_NONE;
        if (rc == 0 && (fold_message(&a, one.p, one.len, &resume) != 0 ||
                        pc_memo_push_at(memo, m, resume, side) != 0))
            rc = PC_OOM(msg, size);
    }
    if (rc == 0 && (flush_group(&a) != 0 || pc_buf_add(out, "]", 1) != 0))
        rc = PC_OOM(msg, size);
    /* the other members: "model","max_tokens","system"?,"tools"?,"tool_choice"?,
     * "temperature"?,"stream" */
    json_int_t limit = json_is_integer(max_tokens) ? json_integer_value(max_tokens)
                       : default_max_tokens > 0    ? default_max_tokens
                                                   : 4096;
    char n[32];
    if (rc == 0 &&
        (pc_buf_add(out, ",\"model\":", 9) || pc_buf_str(out, model, strlen(model)) ||
         pc_buf_add(out, ",\"max_tokens\":", 14) ||
         pc_buf_add(out, n, (size_t)snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT, limit)) ||
         (memo->side.len && (pc_buf_add(out, ",\"system\":", 10) ||
                             pc_buf_str(out, memo->side.p, memo->side.len)))))
        rc = PC_OOM(msg, size);
    if (rc == 0 && json_array_size(tools) > 0) {
        if (pc_buf_add(out, ",\"tools\":", 9) != 0)
            rc = PC_OOM(msg, size);
        size_t start = out->len;
        int hit = rc == 0 ? pc_cache_get(cache, tools, PC_CACHE_TOOLS, out) : 1;
        if (hit < 0) {
            rc = PC_OOM(msg, size);
        } else if (hit == 0) {
            json_t *t = pc_translate_tools(tools, "input_schema", false, msg, size);
            rc = t ? pc_buf_json(out, t, msg, size) : -1;
            json_decref(t);
            if (rc == 0)
                (void)pc_cache_put(cache, tools, PC_CACHE_TOOLS, out->p + start, out->len - start);
        }
    }
    if (rc == 0 && cs && json_array_size(tools) > 0 &&
        (pc_buf_add(out, ",\"tool_choice\":{\"type\":\"", 24) != 0 ||
         pc_buf_add(out, cs, strlen(cs)) != 0 || pc_buf_add(out, "\"}", 2) != 0))
        rc = PC_OOM(msg, size);
    /* an option named temperature (a value or null) replaces the call config's */
    if (rc == 0 && json_is_number(temperature) && !opt_temp &&
        (pc_buf_add(out, ",\"temperature\":", 15) != 0 ||
         pc_buf_json(out, temperature, msg, size) != 0))
        rc = PC_OOM(msg, size);
    if (rc == 0 && opts)
        rc = pc_options_append(out, opts, msg, size);
    if (rc == 0 && pc_buf_add(out, ",\"stream\":true}", 15) != 0)
        rc = PC_OOM(msg, size);
    free(a.results.p);
    free(a.rest.p);
    free(one.p);
    if (rc == 0)
        return 0;
fail:
    return pc_memo_fail(memo, msg, size);
}

char *anthropic_request_text(const json_t *request, long default_max_tokens, pc_cache *cache,
                             char *msg, size_t size) {
    pc_memo *one = calloc(1, sizeof *one); /* this request's alone: nothing kept */
    char *text = NULL;
    if (anthropic_request_build(request, default_max_tokens, cache, one, msg, size) == 0) {
        text = one->text.p;
        one->text.p = NULL;
    }
    pc_memo_free(one);
    return text;
}

json_t *anthropic_request_body(const json_t *request, long default_max_tokens, char *msg,
                               size_t size) {
    return pc_body_from_text(anthropic_request_text(request, default_max_tokens, NULL, msg, size),
                             msg, size);
}
