/*
 * plugins/provider-anthropic/anthropic_request.c - canonical request
 * (docs/providers.md) -> Messages API request body.
 *
 *   system messages   -> the leading ones: top-level "system", texts joined
 *                        by a blank line; a later one (the core appends one
 *                        when the system prompt or the tools change) a
 *                        mid-conversation {role:system} message where the
 *                        model takes one, else a user-role note (see
 *                        fold_system)
 *   user text/image   -> {type:text} / {type:image,source:{type:base64,...}}
 *   assistant         -> text and {type:tool_use,id,name,input:<parsed
 *                        arguments, {} when not a JSON object>}; reasoning
 *                        with a continuation -> {type:thinking,thinking,
 *                        signature} / {type:redacted_thinking,data} in place
 *                        (thinking_block), without one it is not sent
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
 *                        (model_table.h, pc_thinking_rule), and the thinking
 *                        rules of anthropic_thinking_check
 *   prompt caching    -> at most 4 cache_control breakpoints (place_breakpoints)
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

/* Append a string literal (its length known at compile time). */
#define PC_ADD_LIT(b, lit) pc_buf_add((b), (lit), sizeof(lit) - 1)

static bool is_type(const json_t *block, const char *type) {
    const char *t = pc_block_type(block);
    return t && strcmp(t, type) == 0;
}

static json_t *text_block(const char *text) {
    return json_pack("{s:s,s:s}", "type", "text", "text", text);
}

/*
 * A canonical reasoning block back as the Anthropic block it came from
 * (anthropic_decode.c): continuation.data.redacted_data ->
 * {"type":"redacted_thinking","data"}, else data.signature ->
 * {"type":"thinking","thinking":<text>,"signature"}.  Anthropic: "pass
 * thinking blocks back exactly as received", unmodified, in their place
 * before the tool_use they led to ("Extended thinking", preserving thinking
 * blocks; a missing one is the 400 "Expected thinking or
 * redacted_thinking, but found tool_use"); anthropic-sdk-python's
 * ThinkingBlockParam {signature, thinking, type} and
 * RedactedThinkingBlockParam {data, type} are the shapes.  The core has
 * already dropped continuations of another route or a changed prefix
 * (docs/providers.md, "Continuations"), so what arrives is sent.
 * *out: the new block, or NULL when the block is not sent: no continuation
 * (nothing to bind it), or data without either key (*skipped counts it).
 */
static int thinking_block(const json_t *block, json_t **out, size_t *skipped, char *msg,
                          size_t size) {
    *out = NULL;
    const json_t *c = json_object_get(block, "continuation");
    if (!c || json_is_null(c))
        return 0;
    const json_t *data = json_object_get(c, "data");
    const char *redacted = json_string_value(json_object_get(data, "redacted_data"));
    const char *sig = json_string_value(json_object_get(data, "signature"));
    const char *text = json_string_value(json_object_get(block, "text"));
    if (redacted)
        *out = json_pack("{s:s,s:s}", "type", "redacted_thinking", "data", redacted);
    else if (sig)
        *out = json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", text ? text : "",
                         "signature", sig);
    else {
        if (skipped)
            (*skipped)++;
        return 0;
    }
    return *out ? 0 : PC_OOM(msg, size);
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
                            json_t *blocks, size_t *skipped, char *msg, size_t size) {
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
        const json_t *held = json_object_get(
            json_object_get(json_object_get(b, "continuation"), "data"), "compaction");
        if (is_type(b, "text") && text && user && json_is_string(held)) {
            /* a server compaction's block, sent back as it came (the
             * assembly puts it in an assistant turn of its own before the
             * message's other blocks: fold_message, kind 'c') */
            json_t *cb = json_loadb(json_string_value(held), json_string_length(held), 0, NULL);
            rc = is_type(cb, "compaction")
                     ? push(blocks, cb, msg, size)
                     : pc_bad(msg, size, "%s: the continuation's compaction is not a compaction "
                                         "block",
                              at);
            if (rc == 0 && text[0])
                rc = push(blocks, text_block(text), msg, size);
            if (!is_type(cb, "compaction"))
                json_decref(cb);
        } else if (is_type(b, "text") && text && system) {
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
            json_t *t;
            rc = thinking_block(b, &t, skipped, msg, size);
            if (rc == 0 && t)
                rc = push(blocks, t, msg, size);
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
static int message_text(const json_t *m, size_t i, pc_buf *out, size_t *skipped, char *msg,
                        size_t size) {
    char where[48];
    const json_t *content;
    const char *role = pc_message_role(m, i, where, sizeof where, &content, msg, size);
    if (!role)
        return -1;
    pc_buf sys = {0}, parts[2] = {{0}, {0}}, held = {0};
    json_t *blocks = json_array();
    int rc = blocks ? translate_blocks(content, role, where, &sys, blocks, skipped, msg, size)
                    : PC_OOM(msg, size);
    size_t k;
    json_t *b;
    json_array_foreach(blocks, k, b) {
        if (rc != 0)
            break;
        pc_buf *part = is_type(b, "compaction") ? &held : &parts[is_type(b, "tool_result") ? 0 : 1];
        /* pc_buf_json, not json_dumps: jansson's own buffer can lose a key
         * when it cannot grow and still report success */
        if ((part->len && pc_buf_add(part, ",", 1) != 0) || pc_buf_json(part, b, msg, size) != 0)
            rc = PC_OOM(msg, size);
    }
    json_decref(blocks);
    if (rc == 0 && held.len && parts[0].len)
        rc = pc_bad(msg, size, "%s: a compaction block and tool results in one message", where);
    if (rc == 0) {
        char kind = strcmp(role, "system") == 0      ? 's'
                    : held.len                       ? 'c'
                    : strcmp(role, "assistant") == 0 ? 'a'
                                                     : 'u';
        const pc_buf *first = kind == 's' ? &sys : kind == 'c' ? &held : &parts[0];
        char head[32];
        int n = snprintf(head, sizeof head, "%c%zu:", kind, first->len);
        if (pc_buf_add(out, head, (size_t)n) != 0 ||
            (first->len && pc_buf_add(out, first->p, first->len) != 0) ||
            (kind != 's' && parts[1].len && pc_buf_add(out, parts[1].p, parts[1].len) != 0))
            rc = PC_OOM(msg, size);
    }
    free(sys.p);
    free(held.p);
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
    char role;            /* 'u', 'a', 's' (a mid-conversation system message),
                             or 0 when no group is open */
    pc_buf results, rest; /* the open group's two parts */
    bool mid_system;      /* the model takes {role:system} mid-conversation */
    pc_buf note;          /* scratch: one system text as a block */
} assembly;

/* Close the open group into one {"role","content"} element. */
static int flush_group(assembly *a) {
    if (!a->role)
        return 0;
    pc_buf *out = &a->m->text;
    const char *head = a->role == 'a'   ? "{\"role\":\"assistant\",\"content\":["
                       : a->role == 's' ? "{\"role\":\"system\",\"content\":["
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

/*
 * A system message after the conversation started (the core appends one
 * when the system prompt or the tool list changes, so that nothing already
 * sent is rewritten: docs/session-log.md).  Rewriting the top-level
 * `system` would invalidate the cache of everything after it (prompt
 * caching hashes tools, then system, then messages) and fail the prefix
 * check of preserved thinking blocks.  Anthropic's "Mid-conversation system
 * messages" (platform.claude.com/docs/build-with-claude/
 * mid-conversation-system-messages): a model that takes them (the model
 * table's PC_MID_SYSTEM_TAKEN, Claude Opus 4.8) accepts a {"role":"system"}
 * message "immediately after a user turn"; so it is sent as one there.
 * Elsewhere (after an assistant turn), and on every other model (which
 * answers "role 'system' is not supported on this model"), it becomes a
 * user-role text block
 *     <system-update>\n{text}\n</system-update>
 * merged into the adjacent user turn (the Messages API wants user and
 * assistant turns to alternate, so it joins the open user group, or opens
 * one that the next user message joins).  docs/providers.md documents the
 * envelope.  Sets *kind to the role it goes as and `a->note` to its block.
 */
#define NOTE_OPEN "<system-update>\n"
#define NOTE_CLOSE "\n</system-update>"

static int fold_system(assembly *a, const char *text, size_t n, char *kind) {
    bool as_system = a->mid_system && (a->role == 'u' || a->role == 's');
    *kind = as_system ? 's' : 'u';
    pc_buf *b = &a->note, s = {0};
    b->len = 0;
    int rc = 0;
    if (!as_system)
        rc = pc_buf_add(&s, NOTE_OPEN, sizeof NOTE_OPEN - 1) || pc_buf_add(&s, text, n) ||
             pc_buf_add(&s, NOTE_CLOSE, sizeof NOTE_CLOSE - 1);
    if (rc == 0)
        rc = PC_ADD_LIT(b, "{\"type\":\"text\",\"text\":") ||
             (as_system ? pc_buf_str(b, text, n) : pc_buf_str(b, s.p, s.len)) ||
             pc_buf_add(b, "}", 1);
    free(s.p);
    return rc ? -1 : 0;
}

/* Fold one cached message text (see message_text) into the assembly:
 * system text joins the system prompt while no other message came before
 * it, and is a mid-conversation system message or note after (fold_system);
 * a message of the open group's role merges into it; a message with no
 * blocks changes nothing.  *resume: the entry's `end` (see above). */
static int fold_message(assembly *a, const char *text, size_t len, size_t *resume) {
    char kind = text[0];
    char *end = NULL;
    size_t n1 = (size_t)strtoull(text + 1, &end, 10);
    const char *p1 = end + 1, *p2 = p1 + n1;
    size_t n2 = len - (size_t)(p2 - text);
    if (kind == 'c') {
        /* a server compaction's block: "On subsequent requests, append the
         * response to your messages" (platform.claude.com/docs/en/build-with-
         * claude/compaction): the block as an assistant turn of its own, then
         * the message's other blocks as a user turn the next one may join */
        if (flush_group(a) != 0)
            return -1;
        *resume = a->m->text.len;
        a->role = 'a';
        if (add_part(&a->rest, p1, n1) != 0 || flush_group(a) != 0)
            return -1;
        if (n2) {
            a->role = 'u';
            return add_part(&a->rest, p2, n2);
        }
        return 0;
    }
    pc_buf *sys = &a->m->side;
    bool leading = !a->role && a->m->text.len <= OPENING_LEN;
    bool mid = kind == 's' && n1 && !leading;
    if (mid) {
        if (fold_system(a, p1, n1, &kind) != 0)
            return -1;
        p1 = p2 = a->note.p; /* as a group's other blocks */
        n1 = 0;
        n2 = a->note.len;
    }
    bool opens = (kind != 's' || !leading) && (n1 || n2); /* it joins or opens a group */
    if (opens && a->role && a->role != kind && flush_group(a) != 0)
        return -1;
    /* a mid-conversation system message's form depends on the group before
     * it, which a resume does not restore: no place to resume at */
    *resume = !a->role && !mid ? a->m->text.len : PC_MEMO_NONE;
    if (kind == 's' && leading) {
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

/* ------------------------------------------------------------------------ */
/* Prompt caching                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Anthropic's prompt caching (platform.claude.com/docs/build-with-claude/
 * prompt-caching): a cache_control {"type":"ephemeral"} on a block caches
 * the prefix through it, in the order tools, system, messages; "you can
 * define up to 4 cache breakpoints" per request (a fifth is a 400); at each
 * breakpoint "the system automatically checks for cache hits at all previous
 * content block boundaries (up to approximately 20 blocks before your
 * explicit breakpoint)"; "thinking blocks cannot be explicitly marked with
 * cache_control" (they are cached as part of the prefix); the TTL is 5
 * minutes unless "ttl":"1h" (anthropic-sdk-python,
 * types/cache_control_ephemeral_param.py: ttl Literal["5m", "1h"]).
 *
 * Placement (docs/providers.md, "Prompt caching"):
 *   1. the stable part: the last system block, else the last tool (tools
 *      come before system, so the system breakpoint caches them too);
 *   2. rolling: the last cacheable block of the last message;
 *   3. intermediate: the blocks the request adds since the previous one's
 *      rolling breakpoint are those from the group of the last assistant
 *      message on (a tool loop step adds the model's answer and the tool
 *      results); when they are more than LOOKBACK, one more breakpoint every
 *      LOOKBACK blocks back from the rolling one, while breakpoints are left
 *      (4 in all), so each lookback reaches the entry below it and the
 *      lowest the previous request's rolling entry.
 * A pure function of the request (no state between requests), so the body
 * is the same with or without a memo.
 */
#define MAX_BREAKPOINTS 4
#define LOOKBACK 18 /* blocks between breakpoints: inside the ~20-block lookback */

static const char *cache_control(pc_prompt_cache c) {
    return c == PC_PROMPT_CACHE_1H ? ",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}"
                                   : ",\"cache_control\":{\"type\":\"ephemeral\"}";
}

/* The end of the JSON value at t[i] (one past it), or `n` when malformed. */
static size_t skip_value(const char *t, size_t i, size_t n) {
    int depth = 0;
    bool str = false;
    for (; i < n; i++) {
        char c = t[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = false;
            if (!str && depth == 0)
                return i + 1;
            continue;
        }
        if (c == '"')
            str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth <= 0)
                return i + 1;
        } else if (depth == 0 && (c == ',' || c == ' '))
            return i;
    }
    return n;
}

/* A block the API lets carry cache_control (not thinking). */
static bool cacheable(const char *t, size_t at) {
    static const char think[] = "{\"type\":\"thinking\"";
    static const char redacted[] = "{\"type\":\"redacted_thinking\"";
    return strncmp(t + at, think, sizeof think - 1) != 0 &&
           strncmp(t + at, redacted, sizeof redacted - 1) != 0;
}

typedef struct block_pos {
    size_t start, close; /* the block's '{' and its closing '}' */
} block_pos;

/* The blocks of the groups in text[from, to) (`{"role":..,"content":[...]}`
 * elements, comma-separated), in order, into *out (malloc'd).  -1: out of
 * memory. */
static int scan_blocks(const char *t, size_t from, size_t to, block_pos **out, size_t *count) {
    size_t n = 0, cap = 0;
    block_pos *v = NULL;
    size_t i = from;
    while (i < to) {
        while (i < to && t[i] != '{')
            i++;
        /* the group's content array */
        static const char content[] = "\"content\":[";
        const char *c = i < to ? strstr(t + i, content) : NULL;
        if (!c || (size_t)(c - t) >= to)
            break;
        i = (size_t)(c - t) + sizeof content - 1;
        while (i < to && t[i] == '{') {
            size_t e = skip_value(t, i, to);
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 32;
                block_pos *g = realloc(v, nc * sizeof *g);
                if (!g) {
                    free(v);
                    return -1;
                }
                v = g;
                cap = nc;
            }
            v[n].start = i;
            v[n++].close = e - 1;
            i = e < to && t[e] == ',' ? e + 1 : e;
        }
        i = skip_value(t, i, to); /* past "]}" */
        while (i < to && (t[i] == ']' || t[i] == '}' || t[i] == ','))
            i++;
    }
    *out = v;
    *count = n;
    return 0;
}

/* Insert `ins` before t[at] (the text grows by its length). */
static int insert_at(pc_buf *b, size_t at, const char *ins) {
    size_t k = strlen(ins), old = b->len;
    if (pc_buf_add(b, ins, k) != 0) /* grows it; the bytes are moved below */
        return -1;
    memmove(b->p + at + k, b->p + at, old - at);
    memcpy(b->p + at, ins, k);
    return 0;
}

static int by_offset(const void *x, const void *y) {
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return a < b ? 1 : a > b ? -1 : 0; /* descending */
}

/*
 * Place the rolling and intermediate breakpoints in the messages of the
 * memo's text, which end at its current length; `from` is where the blocks
 * the request adds start (see above), `slots` the breakpoints left.  Then no
 * memo entry after the first marker is a place to resume at: the next
 * request folds those messages again, so a marker never outlives its
 * request (the memo's text is only ever the very body of one request).
 */
static int place_breakpoints(pc_memo *m, size_t from, int slots, pc_prompt_cache c) {
    block_pos *v = NULL;
    size_t n = 0;
    if (slots <= 0 || scan_blocks(m->text.p, from, m->text.len, &v, &n) != 0)
        return slots <= 0 ? 0 : -1;
    size_t marks[MAX_BREAKPOINTS], nmarks = 0;
    /* rolling: the last cacheable block */
    size_t top = n;
    while (top > 0 && !cacheable(m->text.p, v[top - 1].start))
        top--;
    if (top > 0) {
        marks[nmarks++] = v[--top].close;
        /* intermediate: one every LOOKBACK blocks back while more than
         * LOOKBACK new blocks lie below the last one placed */
        while ((int)nmarks < slots && top > LOOKBACK) {
            size_t at = top - LOOKBACK;
            while (at < top && !cacheable(m->text.p, v[at].start))
                at++; /* upwards: the breakpoint above still reaches it */
            if (at == top)
                break;
            marks[nmarks++] = v[at].close;
            top = at;
        }
    }
    free(v);
    qsort(marks, nmarks, sizeof marks[0], by_offset);
    for (size_t k = 0; k < nmarks; k++)
        if (insert_at(&m->text, marks[k], cache_control(c)) != 0)
            return -1;
    if (nmarks > 0) {
        size_t first = marks[nmarks - 1];
        for (size_t k = 0; k < m->n; k++)
            if (m->at[k].end != PC_MEMO_NONE && m->at[k].end > first)
                m->at[k].end = PC_MEMO_NONE;
    }
    return (int)nmarks;
}

/* Where the blocks this request adds start in the memo's text: the start
 * of the group of the last assistant message (OPENING_LEN when none). */
static size_t new_blocks_from(const pc_memo *m, const json_t *messages) {
    size_t i = json_array_size(messages);
    while (i > 0) {
        const char *role = json_string_value(json_object_get(json_array_get(messages, i - 1), "role"));
        if (role && strcmp(role, "assistant") == 0)
            break;
        i--;
    }
    if (i == 0 || i > m->n)
        return OPENING_LEN;
    size_t r = i - 1;
    while (r > 0 && m->at[r].end == PC_MEMO_NONE)
        r--;
    return m->at[r].end == PC_MEMO_NONE ? OPENING_LEN : m->at[r].end;
}

/* ------------------------------------------------------------------------ */
/* Thinking rules                                                           */
/* ------------------------------------------------------------------------ */

/* The thinking type the options set ("enabled", "adaptive", "disabled"),
 * or NULL. */
static const char *thinking_type(const json_t *opts) {
    return json_string_value(json_object_get(json_object_get(opts, "thinking"), "type"));
}

bool anthropic_thinking_on(const json_t *opts, const char *model) {
    const char *t = thinking_type(opts);
    const pc_model_entry *e = pc_model_table_find(model);
    if (t)
        return strcmp(t, "enabled") == 0 || strcmp(t, "adaptive") == 0;
    return e && e->thinking == PC_THINKING_ADAPTIVE_ON; /* always on, unasked */
}

int anthropic_thinking_check(const json_t *opts, const char *model, long max_tokens,
                             const char *where, char *msg, size_t size) {
    const json_t *temp = json_object_get(opts, "temperature");
    /* "Thinking isn't compatible with temperature or top_k modifications"
     * (Anthropic, "Building with extended thinking", feature
     * compatibility); the API answers other values with the 400
     * "temperature may only be set to 1 when thinking is enabled or in
     * adaptive mode". */
    if (anthropic_thinking_on(opts, model) && json_is_number(temp) &&
        json_number_value(temp) != 1.0)
        return pc_bad(msg, size,
                      "%s.temperature: model \"%s\" thinks (thinking enabled or adaptive), and "
                      "Anthropic takes temperature only unset or 1 with thinking (a 400 "
                      "otherwise); remove the option or set it to 1",
                      where, model ? model : "");
    const char *t = thinking_type(opts);
    const json_t *budget = json_object_get(json_object_get(opts, "thinking"), "budget_tokens");
    if (!t || strcmp(t, "enabled") != 0 || !budget)
        return 0;
    if (!json_is_integer(budget))
        return pc_bad(msg, size, "%s.thinking.budget_tokens: expected an integer", where);
    json_int_t b = json_integer_value(budget);
    /* "budget_tokens must be set to a value less than max_tokens" and "the
     * minimum budget is 1,024 tokens" (Anthropic, "Building with extended
     * thinking"; both are 400s) */
    if (b < 1024)
        return pc_bad(msg, size,
                      "%s.thinking.budget_tokens: %" JSON_INTEGER_FORMAT " is below Anthropic's "
                      "minimum of 1024 (model \"%s\")",
                      where, b, model ? model : "");
    if (max_tokens > 0 && b >= max_tokens)
        return pc_bad(msg, size,
                      "%s.thinking.budget_tokens: %" JSON_INTEGER_FORMAT " must be less than "
                      "max_tokens %ld (model \"%s\": Anthropic counts thinking within "
                      "max_tokens and answers budget_tokens >= max_tokens with a 400)",
                      where, b, max_tokens, model ? model : "");
    return 0;
}

int anthropic_cache_parse(const json_t *v, const char *where, pc_prompt_cache *out, char *msg,
                          size_t size) {
    if (!v || json_is_true(v)) {
        *out = PC_PROMPT_CACHE_5M;
        return 0;
    }
    if (json_is_false(v)) {
        *out = PC_PROMPT_CACHE_OFF;
        return 0;
    }
    const char *ttl = json_string_value(json_object_get(v, "ttl"));
    if (!json_is_object(v) || json_object_size(v) > (json_object_get(v, "ttl") ? 1u : 0u) ||
        (json_object_get(v, "ttl") && !ttl) ||
        (ttl && strcmp(ttl, "5m") != 0 && strcmp(ttl, "1h") != 0))
        return pc_bad(msg, size,
                      "%s: expected false (no prompt caching) or {\"ttl\": \"5m\" | \"1h\"}",
                      where);
    *out = ttl && strcmp(ttl, "1h") == 0 ? PC_PROMPT_CACHE_1H : PC_PROMPT_CACHE_5M;
    return 0;
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
    json_int_t limit = json_is_integer(max_tokens) ? json_integer_value(max_tokens)
                       : default_max_tokens > 0    ? default_max_tokens
                                                   : 4096;
    if (anthropic_thinking_check(opts, model, (long)limit, "options", msg, size) != 0)
        goto fail;
    /* the call config's temperature is not sent to a thinking model (see
     * anthropic_thinking_check): dropped, and the caller warns once */
    bool thinking = anthropic_thinking_on(opts, model);
    if (thinking && json_is_number(temperature) && !opt_temp) {
        temperature = NULL;
        if (extra)
            extra->dropped_temperature = true;
    }
    /* without an extra (the request alone: tests, goldens) no breakpoints */
    pc_prompt_cache caching = extra ? extra->cache : PC_PROMPT_CACHE_OFF;
    const pc_model_entry *entry = pc_model_table_find(model);
    size_t skipped = 0;
    assembly a = {memo, 0, {0}, {0}, entry && entry->mid_system == PC_MID_SYSTEM_TAKEN, {0}};
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
            rc = message_text(m, i, &one, &skipped, msg, size);
            if (rc == 0) /* a failed put only costs the next request a translation */
                (void)pc_cache_put(cache, m, PC_CACHE_MESSAGE, one.p, one.len);
        }
        size_t side = memo->side.len, resume = PC_MEMO_NONE;
        if (rc == 0 && (fold_message(&a, one.p, one.len, &resume) != 0 ||
                        pc_memo_push_at(memo, m, resume, side) != 0))
            rc = PC_OOM(msg, size);
    }
    if (rc == 0 && flush_group(&a) != 0)
        rc = PC_OOM(msg, size);
    bool stable = memo->side.len > 0 || json_array_size(tools) > 0;
    if (rc == 0 && caching != PC_PROMPT_CACHE_OFF &&
        place_breakpoints(memo, new_blocks_from(memo, messages),
                          MAX_BREAKPOINTS - (stable ? 1 : 0), caching) < 0)
        rc = PC_OOM(msg, size);
    if (rc == 0 && pc_buf_add(out, "]", 1) != 0)
        rc = PC_OOM(msg, size);
    /* the other members: "model","max_tokens","system"?,"tools"?,"tool_choice"?,
     * "temperature"?,"stream" */
    char n[32];
    bool cached_system = caching != PC_PROMPT_CACHE_OFF && memo->side.len > 0;
    if (rc == 0 &&
        (pc_buf_add(out, ",\"model\":", 9) || pc_buf_str(out, model, strlen(model)) ||
         pc_buf_add(out, ",\"max_tokens\":", 14) ||
         pc_buf_add(out, n, (size_t)snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT, limit))))
        rc = PC_OOM(msg, size);
    /* with caching, system is one text block carrying the stable breakpoint */
    if (rc == 0 && memo->side.len &&
        (pc_buf_add(out, ",\"system\":", 10) ||
         (cached_system && PC_ADD_LIT(out, "[{\"type\":\"text\",\"text\":")) ||
         pc_buf_str(out, memo->side.p, memo->side.len) ||
         (cached_system && (pc_buf_add(out, cache_control(caching),
                                       strlen(cache_control(caching))) ||
                            pc_buf_add(out, "}]", 2)))))
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
        /* no system: the stable breakpoint goes on the last tool ("...}]") */
        if (rc == 0 && hit >= 0 && caching != PC_PROMPT_CACHE_OFF && !memo->side.len &&
            out->len - start >= 2 && out->p[out->len - 2] == '}' &&
            insert_at(out, out->len - 2, cache_control(caching)) != 0)
            rc = PC_OOM(msg, size);
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
    free(a.note.p);
    free(one.p);
    if (extra)
        extra->skipped_continuations = skipped;
    if (rc == 0)
        return 0;
fail:
    return pc_memo_fail(memo, msg, size);
}

char *anthropic_request_text(const json_t *request, long default_max_tokens, pc_cache *cache,
                             char *msg, size_t size) {
    return anthropic_request_text_ex(request, NULL, default_max_tokens, cache, msg, size);
}

char *anthropic_request_text_ex(const json_t *request, pc_extra *extra, long default_max_tokens,
                                pc_cache *cache, char *msg, size_t size) {
    pc_memo *one = calloc(1, sizeof *one); /* this request's alone: nothing kept */
    char *text = NULL;
    if (anthropic_request_build_ex(request, extra, default_max_tokens, cache, one, msg, size) ==
        0) {
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
