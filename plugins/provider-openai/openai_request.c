/*
 * plugins/provider-openai/openai_request.c - canonical request (docs/providers.md)
 * -> Chat Completions request body.
 *
 *   system messages      -> {"role":"system","content":"<texts joined by a blank line>"}
 *   user text/image      -> {"role":"user","content":"text"} (one text block) or
 *                           parts [{type:text},{type:image_url,image_url:{url:data:...}}]
 *   assistant            -> {"role":"assistant","content":"<texts>"|null,
 *                            "tool_calls":[{id,type:"function",function:{name,arguments}}]}
 *                           (reasoning blocks are not sent back)
 *   tool_result blocks   -> one {"role":"tool","tool_call_id","content"} each
 *                           (images in tool results become "[image: <type>]")
 *   tools                -> [{type:"function",function:{name,description,parameters}}]
 *   tool_choice          -> "auto" | "none" | "required", sent only with tools
 */
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_cache.h"
#include "provider_common.h"

/* The text of a text block; NULL when the block is malformed. */
static const char *block_text(const json_t *block) {
    return json_string_value(json_object_get(block, "text"));
}

/* A tool result's content as one string: texts joined, images as a marker. */
static int result_text(const json_t *content, const char *where, pc_buf *out, char *msg,
                       size_t size) {
    if (json_is_string(content))
        return pc_buf_piece(out, json_string_value(content)) ? PC_OOM(msg, size) : 0;
    if (content && !json_is_array(content))
        return pc_bad(msg, size, "%s.content: expected an array of blocks", where);
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        int rc;
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            rc = pc_buf_piece(out, block_text(b));
        } else if (type && strcmp(type, "image") == 0) {
            const char *media = json_string_value(json_object_get(b, "media_type"));
            char marker[128];
            snprintf(marker, sizeof marker, "[image: %s]", media ? media : "unknown type");
            rc = pc_buf_piece(out, marker);
        } else {
            return pc_bad(msg, size, "%s.content[%zu]: unsupported block in a tool result", where,
                          i);
        }
        if (rc != 0)
            return PC_OOM(msg, size);
    }
    return 0;
}

/* Append {"role":"tool","tool_call_id","content"} for a tool_result block. */
static int add_tool_message(json_t *out, const json_t *block, const char *where, char *msg,
                            size_t size) {
    const char *call_id = json_string_value(json_object_get(block, "call_id"));
    if (!call_id)
        return pc_bad(msg, size, "%s: tool_result needs a string \"call_id\"", where);
    pc_buf text = {0};
    if (result_text(json_object_get(block, "content"), where, &text, msg, size) != 0) {
        free(text.p);
        return -1;
    }
    json_t *m = json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_call_id", call_id, "content",
                          text.p ? text.p : "");
    free(text.p);
    if (!m || json_array_append_new(out, m) != 0)
        return PC_OOM(msg, size);
    return 0;
}

static json_t *image_part(const json_t *block, const char *where, char *msg, size_t size) {
    const char *media, *data;
    if (pc_image_fields(block, where, &media, &data, msg, size) != 0)
        return NULL;
    pc_buf url = {0};
    if (pc_buf_add(&url, "data:", 5) || pc_buf_add(&url, media, strlen(media)) ||
        pc_buf_add(&url, ";base64,", 8) || pc_buf_add(&url, data, strlen(data))) {
        free(url.p);
        PC_OOM(msg, size);
        return NULL;
    }
    json_t *part = json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", url.p);
    free(url.p);
    if (!part)
        PC_OOM(msg, size);
    return part;
}

static int add_system(json_t *out, const json_t *content, const char *where, char *msg,
                      size_t size) {
    pc_buf text = {0};
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        if (!type || strcmp(type, "text") != 0 || !block_text(b)) {
            free(text.p);
            return pc_bad(msg, size, "%s.content[%zu]: system messages hold only text blocks",
                          where, i);
        }
        if (pc_buf_piece(&text, block_text(b)) != 0) {
            free(text.p);
            return PC_OOM(msg, size);
        }
    }
    json_t *m = json_pack("{s:s,s:s}", "role", "system", "content", text.p ? text.p : "");
    free(text.p);
    if (!m || json_array_append_new(out, m) != 0)
        return PC_OOM(msg, size);
    return 0;
}

/* user (and tool) messages: tool results first, as tool messages, then the
 * user's own text and images. */
static int add_user(json_t *out, const json_t *content, bool tool_role, const char *where,
                    char *msg, size_t size) {
    json_t *parts = json_array();
    if (!parts)
        return PC_OOM(msg, size);
    size_t i, ntext = 0;
    json_t *b;
    char at[96];
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        json_t *part = NULL;
        if (type && strcmp(type, "tool_result") == 0) {
            if (add_tool_message(out, b, at, msg, size) != 0)
                goto fail;
            continue;
        }
        if (tool_role) {
            pc_bad(msg, size, "%s: tool messages hold only tool_result blocks", at);
            goto fail;
        }
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            if (!block_text(b)[0])
                continue;
            part = json_pack("{s:s,s:s}", "type", "text", "text", block_text(b));
            ntext++;
        } else if (type && strcmp(type, "image") == 0) {
            if (!(part = image_part(b, at, msg, size)))
                goto fail;
        } else {
            pc_bad(msg, size, "%s: unsupported block type \"%s\" in a user message", at,
                   type ? type : "(none)");
            goto fail;
        }
        if (!part || json_array_append_new(parts, part) != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    if (json_array_size(parts) > 0) {
        json_t *m;
        if (json_array_size(parts) == 1 && ntext == 1)
            m = json_pack("{s:s,s:O}", "role", "user", "content",
                          json_object_get(json_array_get(parts, 0), "text"));
        else
            m = json_pack("{s:s,s:O}", "role", "user", "content", parts);
        if (!m || json_array_append_new(out, m) != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    json_decref(parts);
    return 0;
fail:
    json_decref(parts);
    return -1;
}

static int add_assistant(json_t *out, const json_t *content, const char *where, char *msg,
                         size_t size) {
    pc_buf text = {0};
    json_t *calls = json_array();
    json_t *m = NULL;
    if (!calls)
        return PC_OOM(msg, size);
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            if (pc_buf_piece(&text, block_text(b)) != 0) {
                PC_OOM(msg, size);
                goto fail;
            }
        } else if (type && strcmp(type, "reasoning") == 0) {
            continue; /* reasoning is never sent back */
        } else if (type && strcmp(type, "tool_call") == 0) {
            const char *id = json_string_value(json_object_get(b, "id"));
            const char *name = json_string_value(json_object_get(b, "name"));
            const char *args = json_string_value(json_object_get(b, "arguments"));
            if (!id || !name || !args) {
                pc_bad(msg, size,
                       "%s.content[%zu]: tool_call needs string \"id\", \"name\" and \"arguments\"",
                       where, i);
                goto fail;
            }
            json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function",
                                     "function", "name", name, "arguments",
                                     args[0] ? args : "{}");
            if (!call || json_array_append_new(calls, call) != 0) {
                PC_OOM(msg, size);
                goto fail;
            }
        } else {
            pc_bad(msg, size,
                   "%s.content[%zu]: unsupported block type \"%s\" in an assistant message", where,
                   i, type ? type : "(none)");
            goto fail;
        }
    }
    if (json_array_size(calls) > 0 && !text.p)
        m = json_pack("{s:s,s:n,s:O}", "role", "assistant", "content", "tool_calls", calls);
    else if (json_array_size(calls) > 0)
        m = json_pack("{s:s,s:s,s:O}", "role", "assistant", "content", text.p, "tool_calls",
                      calls);
    else
        m = json_pack("{s:s,s:s}", "role", "assistant", "content", text.p ? text.p : "");
    if (!m || json_array_append_new(out, m) != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    free(text.p);
    json_decref(calls);
    return 0;
fail:
    free(text.p);
    json_decref(calls);
    return -1;
}

/* Append the Chat Completions message(s) of canonical message `m`
 * (messages[i]) to `out`: a tool message per tool_result block, then the
 * message itself (none for a user message with nothing to send). */
static int translate_one(json_t *out, const json_t *m, size_t i, char *msg, size_t size) {
    char where[48];
    const json_t *content;
    const char *role = pc_message_role(m, i, where, sizeof where, &content, msg, size);
    if (!role)
        return -1;
    if (strcmp(role, "system") == 0)
        return add_system(out, content, where, msg, size);
    if (strcmp(role, "assistant") == 0)
        return add_assistant(out, content, where, msg, size);
    return add_user(out, content, strcmp(role, "tool") == 0, where, msg, size);
}

/* Append the wire text of canonical message `m` to `out` (which ends in '['
 * or in an earlier message): from the cache, else translated, serialized
 * and cached. */
static int add_message(pc_buf *out, json_t *m, size_t i, pc_cache *cache, char *msg,
                       size_t size) {
    size_t mark = out->len;
    if (out->p[out->len - 1] != '[' && pc_buf_add(out, ",", 1) != 0)
        return PC_OOM(msg, size);
    size_t start = out->len;
    int hit = pc_cache_get(cache, m, PC_CACHE_MESSAGE, out);
    if (hit < 0)
        return PC_OOM(msg, size);
    if (hit == 0) {
        json_t *one = json_array();
        if (!one)
            return PC_OOM(msg, size);
        int rc = translate_one(one, m, i, msg, size);
        size_t k;
        json_t *x;
        json_array_foreach(one, k, x) {
            if (rc == 0 && k > 0 && pc_buf_add(out, ",", 1) != 0)
                rc = PC_OOM(msg, size);
            if (rc == 0)
                rc = pc_buf_json(out, x, msg, size);
        }
        json_decref(one);
        if (rc != 0)
            return -1;
        /* a failed put only costs the next request a translation */
        (void)pc_cache_put(cache, m, PC_CACHE_MESSAGE, out->p + start, out->len - start);
    }
    if (out->len == start) { /* nothing to send: drop the separator */
        out->len = mark;
        out->p[mark] = '\0';
    }
    return 0;
}

/* Append ,"tools":[...] for a non-empty canonical tools array. */
static int add_tools(pc_buf *out, json_t *tools, pc_cache *cache, char *msg, size_t size) {
    if (pc_buf_add(out, ",\"tools\":", 9) != 0)
        return PC_OOM(msg, size);
    size_t start = out->len;
    int hit = pc_cache_get(cache, tools, PC_CACHE_TOOLS, out);
    if (hit < 0)
        return PC_OOM(msg, size);
    if (hit == 0) {
        json_t *t = pc_translate_tools(tools, "parameters", true, msg, size);
        int rc = t ? pc_buf_json(out, t, msg, size) : -1;
        json_decref(t);
        if (rc != 0)
            return -1;
        (void)pc_cache_put(cache, tools, PC_CACHE_TOOLS, out->p + start, out->len - start);
    }
    return 0;
}

int openai_request_build(const json_t *request, pc_cache *cache, pc_memo *memo, char *msg,
                         size_t size) {
    if (!memo)
        return PC_OOM(msg, size);
    const char *model = pc_request_check(request, msg, size);
    if (!model)
        goto fail;
    json_t *messages = json_object_get(request, "messages");
    json_t *tools = json_object_get(request, "tools");
    if (!json_is_array(messages)) {
        pc_bad(msg, size, "messages: expected an array");
        goto fail;
    }
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        pc_bad(msg, size, "tools: expected an array");
        goto fail;
    }
    const json_t *choice = json_object_get(request, "tool_choice");
    const char *cs = json_string_value(choice);
    if (choice && !json_is_null(choice) &&
        (!cs || (strcmp(cs, "auto") && strcmp(cs, "none") && strcmp(cs, "required")))) {
        pc_bad(msg, size, "tool_choice: expected \"auto\", \"none\" or \"required\"");
        goto fail;
    }
    if (json_array_size(tools) == 0)
        cs = NULL; /* the API refuses a tool_choice without tools */
    /* the history the last body shares stays in place; the rest is added */
    pc_buf *out = &memo->text;
    size_t i = pc_memo_keep_prefix(memo, messages), n_msgs = json_array_size(messages);
    if (out->len == 0 && pc_buf_add(out, "{\"messages\":[", 13) != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    for (; i < n_msgs; i++) {
        json_t *m = json_array_get(messages, i);
        if (add_message(out, m, i, cache, msg, size) != 0)
            goto fail;
        if (pc_memo_push(memo, m) != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    if (pc_buf_add(out, "]", 1) != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    if (json_array_size(tools) > 0 && add_tools(out, tools, cache, msg, size) != 0)
        goto fail;
    /* the small members, as one object whose '{' the messages took */
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    json_t *rest = json_pack("{s:s, s:O*, s:O*, s:s*, s:b, s:{s:b}}", "model", model,
                             "max_tokens", json_is_integer(max_tokens) ? max_tokens : NULL,
                             "temperature", json_is_number(temperature) ? temperature : NULL,
                             "tool_choice", cs, "stream", 1, "stream_options", "include_usage",
                             1);
    char *tail = rest ? json_dumps(rest, JSON_COMPACT) : NULL;
    json_decref(rest);
    int rc = tail && pc_buf_add(out, ",", 1) == 0 &&
                     pc_buf_add(out, tail + 1, strlen(tail + 1)) == 0
                 ? 0
                 : PC_OOM(msg, size);
    free(tail);
    if (rc != 0)
        goto fail;
    return 0;
fail:
    if (msg && size && !msg[0])
        PC_OOM(msg, size);
    pc_memo_reset(memo);
    return -1;
}

char *openai_request_text(const json_t *request, pc_cache *cache, char *msg, size_t size) {
    pc_memo *one = calloc(1, sizeof *one); /* this request's alone: nothing kept */
    char *text = NULL;
    if (openai_request_build(request, cache, one, msg, size) == 0) {
        text = one->text.p;
        one->text.p = NULL;
    }
    pc_memo_free(one);
    return text;
}

json_t *openai_request_body(const json_t *request, char *msg, size_t size) {
    return pc_body_from_text(openai_request_text(request, NULL, msg, size), msg, size);
}
