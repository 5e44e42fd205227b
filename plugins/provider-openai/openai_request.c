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
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static json_t *translate_messages(const json_t *messages, char *msg, size_t size) {
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
        int rc;
        if (!role || !json_is_array(content)) {
            rc = pc_bad(msg, size, "%s: needs a string \"role\" and a \"content\" array", where);
        } else if (strcmp(role, "system") == 0) {
            rc = add_system(out, content, where, msg, size);
        } else if (strcmp(role, "user") == 0 || strcmp(role, "tool") == 0) {
            rc = add_user(out, content, strcmp(role, "tool") == 0, where, msg, size);
        } else if (strcmp(role, "assistant") == 0) {
            rc = add_assistant(out, content, where, msg, size);
        } else {
            rc = pc_bad(msg, size, "%s: unknown role \"%s\"", where, role);
        }
        if (rc != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *openai_request_body(const json_t *request, char *msg, size_t size) {
    const char *model = pc_request_check(request, msg, size);
    if (!model)
        return NULL;
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    json_t *tools = json_object_get(request, "tools");
    json_t *messages = translate_messages(json_object_get(request, "messages"), msg, size);
    if (!messages)
        return NULL;
    json_t *body = json_pack("{s:s,s:o}", "model", model, "messages", messages);
    if (!body) {
        PC_OOM(msg, size);
        return NULL;
    }
    if (tools && !json_is_null(tools) && json_array_size(tools) > 0) {
        json_t *out = pc_translate_tools(tools, "parameters", true, msg, size);
        if (!out || json_object_set_new(body, "tools", out) != 0)
            goto fail;
    } else if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        pc_bad(msg, size, "tools: expected an array");
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
    PC_OOM(msg, size);
fail:
    if (msg && size && !msg[0])
        PC_OOM(msg, size);
    json_decref(body);
    return NULL;
}
