/*
 * plugins/provider-openai/responses_request.c - canonical request
 * (docs/providers.md) -> OpenAI Responses request body (POST /responses;
 * platform.openai.com/docs/api-reference/responses/create).
 *
 *   system messages      -> {"type":"message","role":"system","content":"<texts>"}
 *                           in place (the Responses API takes system input
 *                           items anywhere, like Chat Completions)
 *   user text/image      -> {"type":"message","role":"user","content":"text"}
 *                           (one text block) or parts [{type:input_text,text},
 *                           {type:input_image,image_url:"data:..."}]
 *   tool_result blocks   -> {"type":"function_call_output","call_id","output"}
 *                           each, before the user's own text (images in tool
 *                           results become "[image: <type>]")
 *   assistant            -> its blocks in order, each an input item:
 *     reasoning            the reasoning item of its continuation
 *                          {"item": "<the item's JSON text>"}, verbatim (the
 *                          item as response.output_item.done gave it, with
 *                          its encrypted_content: responses_decode.c); a
 *                          reasoning block without one is not sent (counted
 *                          in skipped_continuations when it has another)
 *     text                 {"type":"message","role":"assistant","content":
 *                          "<texts>"} (consecutive text blocks joined)
 *     tool_call            {"type":"function_call","call_id","name","arguments"}
 *   tools                -> [{name,description?,parameters,type:"function",
 *                            strict:false}] (strict mode would refuse schemas
 *                            that do not list every property as required)
 *   tool_choice          -> "auto" | "none" | "required", sent only with tools
 *   max_tokens           -> "max_output_tokens"
 *   temperature          -> "temperature", unless the model's rule keeps it
 *                           out (pc_temperature_rule; gpt-5.1 takes it with
 *                           options reasoning.effort "none")
 *   store                -> false (stateless: the whole conversation goes in
 *                           `input` every time; an option `store` beats it,
 *                           null for none: Azure refuses the member)
 *   include              -> ["reasoning.encrypted_content"] when the model
 *                           reasons (its table entry takes
 *                           max_completion_tokens: o-series, gpt-5; or the
 *                           options carry `reasoning`), whatever `store`
 *                           says: the reasoning then goes back with the
 *                           request and never depends on what the server
 *                           kept (Azure, which refuses store false, too);
 *                           an option `include` beats it
 *   options              -> merged last, member by member (provider_options.h);
 *                           the keys of openai_responses_owned_keys are refused
 */
#include "openai.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_cache.h"
#include "provider_common.h"
#include "provider_options.h"

/*
 * The members the body builder writes itself, refused as options: the
 * conversation and its tools (model, input, tools, tool_choice), streaming
 * (stream), the token limit (max_output_tokens, from the call config's
 * max_tokens), Chat Completions' names of them (messages, max_tokens,
 * max_completion_tokens, stream_options, n: a mistake on this API), and the
 * server-side state weir never uses (previous_response_id, conversation:
 * weir sends the whole conversation every time).
 */
const char *const openai_responses_owned_keys[] = {
    "model",  "input", "tools", "tool_choice", "stream", "max_output_tokens",
    "messages", "max_tokens", "max_completion_tokens", "stream_options", "n",
    "previous_response_id", "conversation", NULL,
};

#define ADD(out, lit) pc_buf_add((out), (lit), sizeof(lit) - 1)

/* `,` between items: `start` is where this canonical message's items begin. */
static int sep(pc_buf *out, size_t start) {
    return out->len > start ? pc_buf_add(out, ",", 1) : 0;
}

static const char *block_textn(const json_t *block, size_t *len) {
    const json_t *t = json_object_get(block, "text");
    *len = json_string_length(t);
    return json_string_value(t);
}

/* A message item {"type":"message","role":role,"content":<text>}. */
static int message_item(pc_buf *out, size_t start, const char *role, const pc_buf *text) {
    return sep(out, start) || ADD(out, "{\"type\":\"message\",\"role\":\"") ||
           pc_buf_add(out, role, strlen(role)) || ADD(out, "\",\"content\":") ||
           pc_buf_str(out, text->p ? text->p : "", text->len) || ADD(out, "}");
}

static int add_system(pc_buf *out, size_t start, const json_t *content, const char *where,
                      char *msg, size_t size) {
    pc_buf text = {0};
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        size_t len;
        const char *t = block_textn(b, &len);
        if (!type || strcmp(type, "text") != 0 || !t) {
            free(text.p);
            return pc_bad(msg, size, "%s.content[%zu]: system messages hold only text blocks",
                          where, i);
        }
        if (pc_buf_piece(&text, t) != 0) {
            free(text.p);
            return PC_OOM(msg, size);
        }
    }
    int rc = message_item(out, start, "system", &text) ? PC_OOM(msg, size) : 0;
    free(text.p);
    return rc;
}

/* {"type":"function_call_output","call_id","output"} for a tool_result block. */
static int add_output(pc_buf *out, size_t start, const json_t *block, const char *where,
                      char *msg, size_t size) {
    const json_t *id = json_object_get(block, "call_id");
    if (!json_is_string(id))
        return pc_bad(msg, size, "%s: tool_result needs a string \"call_id\"", where);
    pc_buf text = {0};
    if (openai_result_text(json_object_get(block, "content"), where, &text, msg, size) != 0) {
        free(text.p);
        return -1;
    }
    int rc = sep(out, start) ||
                     ADD(out, "{\"type\":\"function_call_output\",\"call_id\":") ||
                     pc_buf_str(out, json_string_value(id), json_string_length(id)) ||
                     ADD(out, ",\"output\":") || pc_buf_str(out, text.p ? text.p : "", text.len) ||
                     ADD(out, "}")
                 ? PC_OOM(msg, size)
                 : 0;
    free(text.p);
    return rc;
}

/* The items a server compaction returned (a text block's continuation data
 * "compaction": the output array's JSON text, responses_compact_reply), each
 * appended as it came, in their order.  A block without such data adds
 * nothing; data that is not an array of objects is refused. */
static int add_compaction(pc_buf *out, size_t start, const json_t *b, const char *at, char *msg,
                          size_t size) {
    const json_t *items =
        json_object_get(json_object_get(json_object_get(b, "continuation"), "data"), "compaction");
    if (!json_is_string(items))
        return 0;
    json_t *list = json_loadb(json_string_value(items), json_string_length(items), 0, NULL);
    size_t i;
    json_t *it;
    int rc = json_is_array(list) ? 0
                                 : pc_bad(msg, size,
                                          "%s: the continuation's compaction is not a JSON array "
                                          "of items",
                                          at);
    json_array_foreach(list, i, it) {
        if (rc != 0)
            break;
        char *text = json_is_object(it) ? json_dumps(it, JSON_COMPACT) : NULL;
        if (!text)
            rc = json_is_object(it) ? PC_OOM(msg, size)
                                    : pc_bad(msg, size, "%s: compaction item %zu is not an object",
                                             at, i);
        else if (sep(out, start) || pc_buf_add(out, text, strlen(text)))
            rc = PC_OOM(msg, size);
        free(text);
    }
    json_decref(list);
    return rc;
}

/* user (and tool) messages: function_call_output items first, then the
 * items of a server compaction, then the user's own text and images as one
 * message item. */
static int add_user(pc_buf *out, size_t start, const json_t *content, bool tool_role,
                    const char *where, char *msg, size_t size) {
    pc_buf parts = {0};
    size_t i, nparts = 0, ntext = 0, one_len = 0;
    const char *one = NULL;
    json_t *b;
    char at[96];
    int rc = 0;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        if (type && strcmp(type, "tool_result") == 0) {
            if ((rc = add_output(out, start, b, at, msg, size)) != 0)
                break;
            continue;
        }
        if (tool_role) {
            rc = pc_bad(msg, size, "%s: tool messages hold only tool_result blocks", at);
            break;
        }
        size_t len = 0;
        const char *text = type && strcmp(type, "text") == 0 ? block_textn(b, &len) : NULL;
        if (text && (rc = add_compaction(out, start, b, at, msg, size)) != 0)
            break;
        if (text && !text[0])
            continue;
        bool image = !text && type && strcmp(type, "image") == 0;
        if ((text || image) && nparts > 0 && ADD(&parts, ",")) {
            rc = PC_OOM(msg, size);
            break;
        }
        if (text) {
            if (ADD(&parts, "{\"type\":\"input_text\",\"text\":") ||
                pc_buf_str(&parts, text, len) || ADD(&parts, "}")) {
                rc = PC_OOM(msg, size);
                break;
            }
            one = text;
            one_len = len;
            ntext++;
        } else if (image) {
            const char *media, *data;
            if ((rc = pc_image_fields(b, at, &media, &data, msg, size)) != 0)
                break;
            pc_buf url = {0};
            if (ADD(&url, "data:") || pc_buf_add(&url, media, strlen(media)) ||
                ADD(&url, ";base64,") || pc_buf_add(&url, data, strlen(data)) ||
                ADD(&parts, "{\"type\":\"input_image\",\"image_url\":") ||
                pc_buf_str(&parts, url.p, url.len) || ADD(&parts, "}"))
                rc = PC_OOM(msg, size);
            free(url.p);
            if (rc != 0)
                break;
        } else {
            rc = pc_bad(msg, size, "%s: unsupported block type \"%s\" in a user message", at,
                        type ? type : "(none)");
            break;
        }
        nparts++;
    }
    if (rc == 0 && nparts > 0) {
        bool as_string = nparts == 1 && ntext == 1;
        if (sep(out, start) || ADD(out, "{\"type\":\"message\",\"role\":\"user\",\"content\":") ||
            (as_string ? pc_buf_str(out, one, one_len)
                       : ADD(out, "[") || pc_buf_add(out, parts.p, parts.len) || ADD(out, "]")) ||
            ADD(out, "}"))
            rc = PC_OOM(msg, size);
    }
    free(parts.p);
    return rc;
}

/* The reasoning item a reasoning block's continuation holds (its data's
 * "item": the item's compact JSON text), appended verbatim after checking
 * that it is a JSON object of type "reasoning".  *sent: whether it went. */
static int add_reasoning(pc_buf *out, size_t start, const json_t *b, size_t *skipped,
                         char *msg, size_t size) {
    const json_t *cont = json_object_get(b, "continuation");
    if (!cont)
        return 0;
    const json_t *item = json_object_get(json_object_get(cont, "data"), "item");
    json_t *parsed = json_is_string(item) ? json_loadb(json_string_value(item),
                                                       json_string_length(item), 0, NULL)
                                          : NULL;
    const char *type = json_string_value(json_object_get(parsed, "type"));
    bool ok = json_is_object(parsed) && type && strcmp(type, "reasoning") == 0;
    json_decref(parsed);
    if (!ok) {
        (*skipped)++; /* another provider's, or a broken one: not sent */
        return 0;
    }
    return sep(out, start) ||
                   pc_buf_add(out, json_string_value(item), json_string_length(item))
               ? PC_OOM(msg, size)
               : 0;
}

static int flush_text(pc_buf *out, size_t start, pc_buf *text, bool *pending) {
    if (!*pending)
        return 0;
    *pending = false;
    int rc = message_item(out, start, "assistant", text);
    text->len = 0;
    if (text->p)
        text->p[0] = '\0';
    return rc;
}

static int add_assistant(pc_buf *out, size_t start, const json_t *content, const char *where,
                         size_t *skipped, char *msg, size_t size) {
    pc_buf text = {0};
    bool pending = false;
    size_t i;
    json_t *b;
    int rc = 0;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        size_t len;
        const char *t = type && strcmp(type, "text") == 0 ? block_textn(b, &len) : NULL;
        if (t) {
            if (pc_buf_piece(&text, t) != 0) {
                rc = PC_OOM(msg, size);
                break;
            }
            pending = pending || len > 0;
            continue;
        }
        if (flush_text(out, start, &text, &pending) != 0) {
            rc = PC_OOM(msg, size);
            break;
        }
        if (type && strcmp(type, "reasoning") == 0) {
            if ((rc = add_reasoning(out, start, b, skipped, msg, size)) != 0)
                break;
        } else if (type && strcmp(type, "tool_call") == 0) {
            const json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            const json_t *args = json_object_get(b, "arguments");
            if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args)) {
                rc = pc_bad(msg, size,
                            "%s.content[%zu]: tool_call needs string \"id\", \"name\" and "
                            "\"arguments\"",
                            where, i);
                break;
            }
            bool empty = json_string_length(args) == 0;
            if (sep(out, start) || ADD(out, "{\"type\":\"function_call\",\"call_id\":") ||
                pc_buf_str(out, json_string_value(id), json_string_length(id)) ||
                ADD(out, ",\"name\":") ||
                pc_buf_str(out, json_string_value(name), json_string_length(name)) ||
                ADD(out, ",\"arguments\":") ||
                pc_buf_str(out, empty ? "{}" : json_string_value(args),
                           empty ? 2 : json_string_length(args)) ||
                ADD(out, "}")) {
                rc = PC_OOM(msg, size);
                break;
            }
        } else {
            rc = pc_bad(msg, size,
                        "%s.content[%zu]: unsupported block type \"%s\" in an assistant message",
                        where, i, type ? type : "(none)");
            break;
        }
    }
    if (rc == 0 && flush_text(out, start, &text, &pending) != 0)
        rc = PC_OOM(msg, size);
    free(text.p);
    return rc;
}

static int translate_one(pc_buf *out, size_t start, const json_t *m, size_t i, size_t *skipped,
                         char *msg, size_t size) {
    char where[48];
    const json_t *content;
    const char *role = pc_message_role(m, i, where, sizeof where, &content, msg, size);
    if (!role)
        return -1;
    if (strcmp(role, "system") == 0)
        return add_system(out, start, content, where, msg, size);
    if (strcmp(role, "assistant") == 0)
        return add_assistant(out, start, content, where, skipped, msg, size);
    return add_user(out, start, content, strcmp(role, "tool") == 0, where, msg, size);
}

/* Append the input items of canonical message `m`: from the cache, else
 * translated and cached (a row speaks one API: its cache holds one kind). */
static int add_message(pc_buf *out, json_t *m, size_t i, pc_cache *cache, size_t *skipped,
                       char *msg, size_t size) {
    size_t mark = out->len;
    if (out->p[out->len - 1] != '[' && pc_buf_add(out, ",", 1) != 0)
        return PC_OOM(msg, size);
    size_t start = out->len;
    int hit = pc_cache_get(cache, m, PC_CACHE_MESSAGE, out);
    if (hit < 0)
        return PC_OOM(msg, size);
    if (hit == 0) {
        if (translate_one(out, start, m, i, skipped, msg, size) != 0)
            return -1;
        (void)pc_cache_put(cache, m, PC_CACHE_MESSAGE, out->p + start, out->len - start);
    }
    if (out->len == start) { /* nothing to send: drop the separator */
        out->len = mark;
        out->p[mark] = '\0';
    }
    return 0;
}

/* ,"tools":[{name,description?,parameters,type:"function",strict:false}] */
static int add_tools(pc_buf *out, json_t *tools, pc_cache *cache, char *msg, size_t size) {
    if (ADD(out, ",\"tools\":") != 0)
        return PC_OOM(msg, size);
    size_t start = out->len;
    int hit = pc_cache_get(cache, tools, PC_CACHE_TOOLS, out);
    if (hit < 0)
        return PC_OOM(msg, size);
    if (hit == 0) {
        json_t *t = pc_translate_tools(tools, "parameters", false, msg, size);
        size_t i;
        json_t *fn;
        json_array_foreach(t, i, fn) {
            if (json_object_set_new(fn, "type", json_string("function")) != 0 ||
                json_object_set_new(fn, "strict", json_false()) != 0) {
                json_decref(t);
                return PC_OOM(msg, size);
            }
        }
        int rc = t ? pc_buf_json(out, t, msg, size) : -1;
        json_decref(t);
        if (rc != 0)
            return -1;
        (void)pc_cache_put(cache, tools, PC_CACHE_TOOLS, out->p + start, out->len - start);
    }
    return 0;
}

bool openai_responses_reasons(const char *model, const json_t *options) {
    const pc_model_entry *rules = pc_model_table_find(model);
    return (rules && rules->tokens == PC_TOKENS_MAX_COMPLETION_TOKENS) ||
           json_is_object(json_object_get(options, "reasoning"));
}

/* Whether `rules` (may be NULL) let the call config's temperature go out
 * with the options `opts` (reasoning.effort "none" on gpt-5.1). */
static bool temperature_taken(const pc_model_entry *rules, const json_t *opts) {
    if (!rules || rules->temperature == PC_TEMPERATURE_ANY)
        return true;
    if (rules->temperature == PC_TEMPERATURE_NEVER)
        return false;
    const char *effort =
        json_string_value(json_object_get(json_object_get(opts, "reasoning"), "effort"));
    return !effort || strcmp(effort, "none") == 0;
}

int openai_responses_build(const json_t *request, pc_extra *extra, pc_cache *cache,
                           pc_memo *memo, char *msg, size_t size) {
    if (!memo)
        return PC_OOM(msg, size);
    size_t skipped = 0;
    openai_begun b;
    if (openai_request_begin(request, extra, openai_responses_owned_keys, temperature_taken,
                             "reasoning.effort", &b, msg, size) != 0)
        goto fail;
    const char *model = b.model, *cs = b.choice;
    const json_t *opts = b.opts, *opt_temp = json_object_get(b.opts, "temperature");
    const pc_model_entry *rules = b.rules;
    json_t *messages = b.messages, *tools = b.tools;
    pc_buf *out = &memo->text;
    size_t i = pc_memo_keep_prefix(memo, messages), n_msgs = json_array_size(messages);
    if (out->len == 0 && ADD(out, "{\"input\":[") != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    for (; i < n_msgs; i++) {
        json_t *m = json_array_get(messages, i);
        if (add_message(out, m, i, cache, &skipped, msg, size) != 0)
            goto fail;
        if (pc_memo_push(memo, m) != 0) {
            PC_OOM(msg, size);
            goto fail;
        }
    }
    if (ADD(out, "]") != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    if (json_array_size(tools) > 0 && add_tools(out, tools, cache, msg, size) != 0)
        goto fail;
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    char n[32];
    int rc = ADD(out, ",\"model\":") || pc_buf_str(out, model, strlen(model)) ? -1 : 0;
    if (rc == 0 && json_is_integer(max_tokens))
        rc = ADD(out, ",\"max_output_tokens\":") ||
             pc_buf_add(out, n,
                        (size_t)snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT,
                                         json_integer_value(max_tokens)));
    if (rc == 0 && json_is_number(temperature) && !opt_temp) {
        if (temperature_taken(rules, opts))
            rc = ADD(out, ",\"temperature\":") || pc_buf_json(out, temperature, msg, size);
        else if (extra)
            extra->dropped_temperature = true;
    }
    if (rc == 0 && cs)
        rc = ADD(out, ",\"tool_choice\":") || pc_buf_str(out, cs, strlen(cs));
    /* stateless by default; what an option names (a value, or null) wins */
    const json_t *store = json_object_get(opts, "store");
    if (rc == 0 && !store)
        rc = ADD(out, ",\"store\":false");
    if (rc == 0 && !json_object_get(opts, "include") && openai_responses_reasons(model, opts))
        rc = ADD(out, ",\"include\":[\"reasoning.encrypted_content\"]");
    if (rc == 0 && opts && pc_options_append(out, opts, msg, size) != 0)
        goto fail;
    if (rc != 0 || ADD(out, ",\"stream\":true}")) {
        PC_OOM(msg, size);
        goto fail;
    }
    if (extra)
        extra->skipped_continuations = skipped;
    return 0;
fail:
    return pc_memo_fail(memo, msg, size);
}

char *openai_responses_text(const json_t *request, const json_t *options, char *msg,
                            size_t size) {
    pc_memo *one = calloc(1, sizeof *one);
    pc_extra extra = {.options = options};
    char *text = NULL;
    if (openai_responses_build(request, &extra, NULL, one, msg, size) == 0) {
        text = one->text.p;
        one->text.p = NULL;
    }
    pc_memo_free(one);
    return text;
}

bool openai_responses_default(const char *base_url) {
    return !base_url || strcmp(base_url, "https://api.openai.com/v1") == 0 ||
           strcmp(base_url, "https://api.openai.com/v1/") == 0;
}

char *openai_responses_compact_body(const char *full, size_t len, char *msg, size_t size) {
    json_t *root = full ? json_loadb(full, len, 0, NULL) : NULL;
    json_t *body = json_object();
    char *text = NULL;
    /* the prompt cache's key too: the input is the session's prefix */
    json_t *key = json_object_get(root, "prompt_cache_key");
    if (root && body && json_object_set(body, "model", json_object_get(root, "model")) == 0 &&
        json_object_set(body, "input", json_object_get(root, "input")) == 0 &&
        (!json_is_string(key) || json_object_set(body, "prompt_cache_key", key) == 0))
        text = json_dumps(body, JSON_COMPACT);
    if (!text)
        pc_bad(msg, size, root ? "out of memory" : "the request body is not JSON");
    json_decref(root);
    json_decref(body);
    return text;
}
