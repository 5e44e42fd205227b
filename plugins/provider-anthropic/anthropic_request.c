/*
 * plugins/provider-anthropic/anthropic_request.c - canonical request
 * (DESIGN §5a) -> Messages API request body.
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
 */
#include "anthropic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_common.h"

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

/* Put tool_result blocks first in a user message (the API requires it). */
static int results_first(json_t *blocks) {
    json_t *sorted = json_array();
    if (!sorted)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        json_t *b;
        json_array_foreach(blocks, i, b) {
            if (is_type(b, "tool_result") == (pass == 0) && json_array_append(sorted, b) != 0) {
                json_decref(sorted);
                return -1;
            }
        }
    }
    int rc = json_array_clear(blocks) || json_array_extend(blocks, sorted) ? -1 : 0;
    json_decref(sorted);
    return rc;
}

static json_t *translate_messages(const json_t *messages, pc_buf *sys, char *msg, size_t size) {
    json_t *out = pc_array_for(messages, "messages", msg, size);
    if (!out)
        return NULL;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (!role || !json_is_array(content)) {
            pc_bad(msg, size, "%s: needs a string \"role\" and a \"content\" array", where);
            goto fail;
        }
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            pc_bad(msg, size, "%s: unknown role \"%s\"", where, role);
            goto fail;
        }
        json_t *blocks = json_array();
        if (!blocks) {
            PC_OOM(msg, size);
            goto fail;
        }
        if (translate_blocks(content, role, where, sys, blocks, msg, size) != 0) {
            json_decref(blocks);
            goto fail;
        }
        const char *api_role = strcmp(role, "assistant") == 0 ? "assistant" : "user";
        json_t *last = json_array_get(out, json_array_size(out) - 1);
        int rc = 0;
        if (json_array_size(blocks) == 0)
            rc = 0;
        else if (last && strcmp(json_string_value(json_object_get(last, "role")), api_role) == 0)
            rc = json_array_extend(json_object_get(last, "content"), blocks);
        else
            rc = json_array_append_new(out, json_pack("{s:s,s:O}", "role", api_role, "content",
                                                      blocks));
        json_decref(blocks);
        if (rc != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    json_array_foreach(out, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "role")), "user") == 0 &&
            results_first(json_object_get(m, "content")) != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

json_t *anthropic_request_body(const json_t *request, long default_max_tokens, char *msg,
                               size_t size) {
    const char *model = pc_request_check(request, msg, size);
    if (!model)
        return NULL;
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    json_t *tools = json_object_get(request, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        pc_bad(msg, size, "tools: expected an array");
        return NULL;
    }
    pc_buf sys = {0};
    json_t *messages = translate_messages(json_object_get(request, "messages"), &sys, msg, size);
    if (!messages) {
        free(sys.p);
        return NULL;
    }
    json_int_t limit = json_is_integer(max_tokens) ? json_integer_value(max_tokens)
                       : default_max_tokens > 0    ? default_max_tokens
                                                   : 4096;
    json_t *body = json_pack("{s:s,s:I}", "model", model, "max_tokens", limit);
    if (!body)
        goto oom;
    if (sys.p && json_object_set_new(body, "system", json_string(sys.p)) != 0)
        goto oom;
    if (json_object_set(body, "messages", messages) != 0)
        goto oom;
    if (json_array_size(tools) > 0) {
        json_t *out = pc_translate_tools(tools, "input_schema", false, msg, size);
        if (!out)
            goto fail;
        if (json_object_set_new(body, "tools", out) != 0)
            goto oom;
    }
    if (json_is_number(temperature) && json_object_set(body, "temperature", temperature) != 0)
        goto oom;
    if (json_object_set_new(body, "stream", json_true()) != 0)
        goto oom;
    free(sys.p);
    json_decref(messages);
    return body;
oom:
    PC_OOM(msg, size);
fail:
    free(sys.p);
    json_decref(messages);
    json_decref(body);
    return NULL;
}
