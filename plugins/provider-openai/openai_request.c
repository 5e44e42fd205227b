/*
 * plugins/provider-openai/openai_request.c - canonical request (DESIGN §5a)
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
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, strcasecmp */
#endif
#include "openai.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir/export.h"

/* Fill msg; always returns -1. */
static int bad(char *msg, size_t size, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int bad(char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && size)
        vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return -1;
}

#define OOM(msg, size) bad(msg, size, "out of memory")

/* A growable string. */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_add(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* Append a non-empty piece, separated from earlier ones by a blank line. */
static int buf_piece(buf *b, const char *s) {
    if (!s[0])
        return 0;
    if (b->len && buf_add(b, "\n\n", 2) != 0)
        return -1;
    return buf_add(b, s, strlen(s));
}

static const char *block_type(const json_t *block) {
    return json_string_value(json_object_get(block, "type"));
}

/* The text of a text block; NULL when the block is malformed. */
static const char *block_text(const json_t *block) {
    return json_string_value(json_object_get(block, "text"));
}

/* A tool result's content as one string: texts joined, images as a marker. */
static int result_text(const json_t *content, const char *where, buf *out, char *msg,
                       size_t size) {
    if (json_is_string(content))
        return buf_piece(out, json_string_value(content)) ? OOM(msg, size) : 0;
    if (content && !json_is_array(content))
        return bad(msg, size, "%s.content: expected an array of blocks", where);
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = block_type(b);
        int rc;
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            rc = buf_piece(out, block_text(b));
        } else if (type && strcmp(type, "image") == 0) {
            const char *media = json_string_value(json_object_get(b, "media_type"));
            char marker[128];
            snprintf(marker, sizeof marker, "[image: %s]", media ? media : "unknown type");
            rc = buf_piece(out, marker);
        } else {
            return bad(msg, size, "%s.content[%zu]: unsupported block in a tool result", where,
                       i);
        }
        if (rc != 0)
            return OOM(msg, size);
    }
    return 0;
}

/* Append {"role":"tool","tool_call_id","content"} for a tool_result block. */
static int add_tool_message(json_t *out, const json_t *block, const char *where, char *msg,
                            size_t size) {
    const char *call_id = json_string_value(json_object_get(block, "call_id"));
    if (!call_id)
        return bad(msg, size, "%s: tool_result needs a string \"call_id\"", where);
    buf text = {0};
    if (result_text(json_object_get(block, "content"), where, &text, msg, size) != 0) {
        free(text.p);
        return -1;
    }
    json_t *m = json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_call_id", call_id, "content",
                          text.p ? text.p : "");
    free(text.p);
    if (!m || json_array_append_new(out, m) != 0)
        return OOM(msg, size);
    return 0;
}

static json_t *image_part(const json_t *block, const char *where, char *msg, size_t size) {
    const char *media = json_string_value(json_object_get(block, "media_type"));
    const char *data = json_string_value(json_object_get(block, "data"));
    if (!media || !data) {
        bad(msg, size, "%s: image needs string \"media_type\" and \"data\"", where);
        return NULL;
    }
    buf url = {0};
    if (buf_add(&url, "data:", 5) || buf_add(&url, media, strlen(media)) ||
        buf_add(&url, ";base64,", 8) || buf_add(&url, data, strlen(data))) {
        free(url.p);
        OOM(msg, size);
        return NULL;
    }
    json_t *part = json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", url.p);
    free(url.p);
    if (!part)
        OOM(msg, size);
    return part;
}

static int add_system(json_t *out, const json_t *content, const char *where, char *msg,
                      size_t size) {
    buf text = {0};
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = block_type(b);
        if (!type || strcmp(type, "text") != 0 || !block_text(b)) {
            free(text.p);
            return bad(msg, size, "%s.content[%zu]: system messages hold only text blocks",
                       where, i);
        }
        if (buf_piece(&text, block_text(b)) != 0) {
            free(text.p);
            return OOM(msg, size);
        }
    }
    json_t *m = json_pack("{s:s,s:s}", "role", "system", "content", text.p ? text.p : "");
    free(text.p);
    if (!m || json_array_append_new(out, m) != 0)
        return OOM(msg, size);
    return 0;
}

/* user (and tool) messages: tool results first, as tool messages, then the
 * user's own text and images. */
static int add_user(json_t *out, const json_t *content, bool tool_role, const char *where,
                    char *msg, size_t size) {
    json_t *parts = json_array();
    if (!parts)
        return OOM(msg, size);
    size_t i, ntext = 0;
    json_t *b;
    char at[96];
    json_array_foreach(content, i, b) {
        const char *type = block_type(b);
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        json_t *part = NULL;
        if (type && strcmp(type, "tool_result") == 0) {
            if (add_tool_message(out, b, at, msg, size) != 0)
                goto fail;
            continue;
        }
        if (tool_role) {
            bad(msg, size, "%s: tool messages hold only tool_result blocks", at);
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
            bad(msg, size, "%s: unsupported block type \"%s\" in a user message", at,
                type ? type : "(none)");
            goto fail;
        }
        if (!part || json_array_append_new(parts, part) != 0) {
            OOM(msg, size);
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
            OOM(msg, size);
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
    buf text = {0};
    json_t *calls = json_array();
    json_t *m = NULL;
    if (!calls)
        return OOM(msg, size);
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = block_type(b);
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            if (buf_piece(&text, block_text(b)) != 0) {
                OOM(msg, size);
                goto fail;
            }
        } else if (type && strcmp(type, "reasoning") == 0) {
            continue; /* reasoning is never sent back */
        } else if (type && strcmp(type, "tool_call") == 0) {
            const char *id = json_string_value(json_object_get(b, "id"));
            const char *name = json_string_value(json_object_get(b, "name"));
            const char *args = json_string_value(json_object_get(b, "arguments"));
            if (!id || !name || !args) {
                bad(msg, size,
                    "%s.content[%zu]: tool_call needs string \"id\", \"name\" and \"arguments\"",
                    where, i);
                goto fail;
            }
            json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function",
                                     "function", "name", name, "arguments",
                                     args[0] ? args : "{}");
            if (!call || json_array_append_new(calls, call) != 0) {
                OOM(msg, size);
                goto fail;
            }
        } else {
            bad(msg, size, "%s.content[%zu]: unsupported block type \"%s\" in an assistant message",
                where, i, type ? type : "(none)");
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
        OOM(msg, size);
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

static json_t *translate_messages(const json_t *messages, char *msg, size_t size) {
    if (!json_is_array(messages)) {
        bad(msg, size, "messages: expected an array");
        return NULL;
    }
    json_t *out = json_array();
    if (!out) {
        OOM(msg, size);
        return NULL;
    }
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        int rc;
        if (!role || !json_is_array(content)) {
            rc = bad(msg, size, "%s: needs a string \"role\" and a \"content\" array", where);
        } else if (strcmp(role, "system") == 0) {
            rc = add_system(out, content, where, msg, size);
        } else if (strcmp(role, "user") == 0 || strcmp(role, "tool") == 0) {
            rc = add_user(out, content, strcmp(role, "tool") == 0, where, msg, size);
        } else if (strcmp(role, "assistant") == 0) {
            rc = add_assistant(out, content, where, msg, size);
        } else {
            rc = bad(msg, size, "%s: unknown role \"%s\"", where, role);
        }
        if (rc != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *translate_tools(const json_t *tools, char *msg, size_t size) {
    if (!json_is_array(tools)) {
        bad(msg, size, "tools: expected an array");
        return NULL;
    }
    json_t *out = json_array();
    if (!out) {
        OOM(msg, size);
        return NULL;
    }
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *desc = json_object_get(t, "description");
        json_t *params = json_object_get(t, "parameters");
        if (!name || (desc && !json_is_string(desc)) || (params && !json_is_object(params))) {
            bad(msg, size,
                "tools[%zu]: needs a string \"name\", a string \"description\" and an object "
                "\"parameters\"",
                i);
            json_decref(out);
            return NULL;
        }
        json_t *fn = json_pack("{s:s}", "name", name);
        if (fn && ((desc && json_object_set(fn, "description", desc) != 0) ||
                   json_object_set_new(fn, "parameters",
                                       params ? json_incref(params)
                                              : json_pack("{s:s,s:{}}", "type", "object",
                                                          "properties")) != 0)) {
            json_decref(fn);
            fn = NULL;
        }
        json_t *entry = fn ? json_pack("{s:s,s:o}", "type", "function", "function", fn) : NULL;
        if (!entry || json_array_append_new(out, entry) != 0) {
            OOM(msg, size);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *openai_request_body(const json_t *request, char *msg, size_t size) {
    if (msg && size)
        msg[0] = '\0';
    if (!json_is_object(request)) {
        bad(msg, size, "request: expected an object");
        return NULL;
    }
    const char *model = json_string_value(json_object_get(request, "model"));
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    json_t *tools = json_object_get(request, "tools");
    if (!model || !model[0]) {
        bad(msg, size, "model: expected a non-empty string");
        return NULL;
    }
    if (max_tokens && !json_is_null(max_tokens) &&
        (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1)) {
        bad(msg, size, "max_tokens: expected a positive integer");
        return NULL;
    }
    if (temperature && !json_is_null(temperature) && !json_is_number(temperature)) {
        bad(msg, size, "temperature: expected a number");
        return NULL;
    }
    json_t *messages = translate_messages(json_object_get(request, "messages"), msg, size);
    if (!messages)
        return NULL;
    json_t *body = json_pack("{s:s,s:o}", "model", model, "messages", messages);
    if (!body) {
        OOM(msg, size);
        return NULL;
    }
    if (tools && !json_is_null(tools) && json_array_size(tools) > 0) {
        json_t *out = translate_tools(tools, msg, size);
        if (!out || json_object_set_new(body, "tools", out) != 0)
            goto fail;
    } else if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        bad(msg, size, "tools: expected an array");
        goto fail;
    }
    if (max_tokens && json_is_integer(max_tokens) &&
        json_object_set(body, "max_tokens", max_tokens) != 0)
        goto oom;
    if (temperature && json_is_number(temperature) &&
        json_object_set(body, "temperature", temperature) != 0)
        goto oom;
    if (json_object_set_new(body, "stream", json_true()) != 0 ||
        json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1)) != 0)
        goto oom;
    return body;
oom:
    OOM(msg, size);
fail:
    if (msg && size && !msg[0])
        OOM(msg, size);
    json_decref(body);
    return NULL;
}
