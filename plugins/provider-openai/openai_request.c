/*
 * plugins/provider-openai/openai_request.c - canonical request (docs/providers.md)
 * -> Chat Completions request body.
 *
 *   system messages      -> {"role":"system","content":"<texts joined by a blank line>"}
 *   user text/image      -> {"role":"user","content":"text"} (one text block) or
 *                           parts [{type:text},{type:image_url,image_url:{url:data:...}}]
 *   assistant            -> {"role":"assistant","content":"<texts>"|null,
 *                            "reasoning_content"?:"<reasoning>",
 *                            "tool_calls":[{id,type:"function",function:{name,arguments},
 *                                           extra_content?:{google:{thought_signature}}}]}
 *                           reasoning blocks go back only with a continuation
 *                           {"field":"reasoning_content"|"reasoning"}: their texts
 *                           concatenated under that member, even "" (DeepSeek
 *                           thinking mode refuses a tool loop's next request
 *                           without it: api-docs.deepseek.com/guides/thinking_mode,
 *                           "Tool Calls"); a tool_call's continuation
 *                           {"thought_signature"} goes back as Gemini's
 *                           extra_content (ai.google.dev/gemini-api/docs/
 *                           thought-signatures, "OpenAI compatibility"); for
 *                           Gemini 3 and later (gemini_signs_calls), a first
 *                           call without one gets the documented sentinel
 *                           "skip_thought_signature_validator"
 *   system, not first    -> a "system" message in place (the core appends a
 *                           changed system prompt at the end: Chat Completions
 *                           takes system messages anywhere)
 *   tool_result blocks   -> one {"role":"tool","tool_call_id","content"} each
 *                           (images in tool results become "[image: <type>]")
 *   tools                -> [{type:"function",function:{name,description,parameters}}]
 *   tool_choice          -> "auto" | "none" | "required", sent only with tools
 *   max_tokens           -> "max_tokens", or "max_completion_tokens" for the
 *                           models whose table entry says so (OpenAI's
 *                           reasoning models; model_table.h, pc_token_param)
 *   temperature          -> "temperature", unless the model's rule keeps it
 *                           out (pc_temperature_rule: o-series, gpt-5)
 *   options              -> merged last, member by member (provider_options.h);
 *                           the keys of openai_owned_keys are refused
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
 * conversation and its tools (model, messages, tools, tool_choice, and the
 * legacy functions / function_call), streaming (stream, stream_options: the
 * decoder reads SSE with usage), n (the decoder reads one choice), and the
 * token limit (max_tokens, max_completion_tokens: the call config's
 * max_tokens, sent under the member the model takes).  temperature is not
 * owned: an option overrides the call config's (and a null drops it).
 */
const char *const openai_owned_keys[] = {
    "model", "messages", "tools", "tool_choice", "functions", "function_call", "stream",
    "stream_options", "n", "max_tokens", "max_completion_tokens", NULL,
};

/* The text of a text block; NULL when the block is malformed. */
static const char *block_text(const json_t *block) {
    return json_string_value(json_object_get(block, "text"));
}

/* The text of a text block, with its length (0 and NULL when malformed). */
static const char *block_textn(const json_t *block, size_t *len) {
    const json_t *t = json_object_get(block, "text");
    *len = json_string_length(t);
    return json_string_value(t);
}

/* Messages are written as wire text straight away (no jansson tree per
 * message): the keys in the order the API documents, the strings escaped as
 * jansson escapes them (pc_buf_str).  `start` is where the canonical
 * message's text began: its Chat Completions messages are joined by ",". */
static int sep(pc_buf *out, size_t start) {
    return out->len > start ? pc_buf_add(out, ",", 1) : 0;
}

/* Append `lit` (a string literal) to `out`. */
#define ADD(out, lit) pc_buf_add((out), (lit), sizeof(lit) - 1)

/* A tool result's content as one string: texts joined, images as a marker
 * (openai.h: the Responses builder shares it). */
int openai_result_text(const json_t *content, const char *where, pc_buf *out, char *msg,
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

/* {"role":"tool","tool_call_id","content"} for a tool_result block. */
static int add_tool_message(pc_buf *out, size_t start, const json_t *block, const char *where,
                            char *msg, size_t size) {
    const json_t *id = json_object_get(block, "call_id");
    if (!json_is_string(id))
        return pc_bad(msg, size, "%s: tool_result needs a string \"call_id\"", where);
    pc_buf text = {0};
    if (openai_result_text(json_object_get(block, "content"), where, &text, msg, size) != 0) {
        free(text.p);
        return -1;
    }
    int rc = sep(out, start) || ADD(out, "{\"role\":\"tool\",\"tool_call_id\":") ||
                     pc_buf_str(out, json_string_value(id), json_string_length(id)) ||
                     ADD(out, ",\"content\":") || pc_buf_str(out, text.p ? text.p : "", text.len) ||
                     ADD(out, "}")
                 ? PC_OOM(msg, size)
                 : 0;
    free(text.p);
    return rc;
}

/* {"type":"image_url","image_url":{"url":"data:<media>;base64,<data>"}} */
static int image_part(pc_buf *parts, const json_t *block, const char *where, char *msg,
                      size_t size) {
    const char *media, *data;
    if (pc_image_fields(block, where, &media, &data, msg, size) != 0)
        return -1;
    pc_buf url = {0};
    int rc = pc_buf_add(&url, "data:", 5) || pc_buf_add(&url, media, strlen(media)) ||
                     pc_buf_add(&url, ";base64,", 8) || pc_buf_add(&url, data, strlen(data)) ||
                     ADD(parts, "{\"type\":\"image_url\",\"image_url\":{\"url\":") ||
                     pc_buf_str(parts, url.p, url.len) || ADD(parts, "}}")
                 ? PC_OOM(msg, size)
                 : 0;
    free(url.p);
    return rc;
}

static int add_system(pc_buf *out, size_t start, const json_t *content, const char *where,
                      char *msg, size_t size) {
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
    int rc = sep(out, start) || ADD(out, "{\"role\":\"system\",\"content\":") ||
                     pc_buf_str(out, text.p ? text.p : "", text.len) || ADD(out, "}")
                 ? PC_OOM(msg, size)
                 : 0;
    free(text.p);
    return rc;
}

/* user (and tool) messages: tool results first, as tool messages, then the
 * user's own text and images: the content a string when it is one text,
 * else an array of parts. */
static int add_user(pc_buf *out, size_t start, const json_t *content, bool tool_role,
                    const char *where, char *msg, size_t size) {
    pc_buf parts = {0};
    size_t i, nparts = 0, ntext = 0, one_len = 0;
    const char *one = NULL; /* the text of the only text part */
    json_t *b;
    char at[96];
    int rc = 0;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        snprintf(at, sizeof at, "%s.content[%zu]", where, i);
        if (type && strcmp(type, "tool_result") == 0) {
            if ((rc = add_tool_message(out, start, b, at, msg, size)) != 0)
                break;
            continue;
        }
        if (tool_role) {
            rc = pc_bad(msg, size, "%s: tool messages hold only tool_result blocks", at);
            break;
        }
        size_t len = 0;
        const char *text = type && strcmp(type, "text") == 0 ? block_textn(b, &len) : NULL;
        if (text && !text[0])
            continue;
        bool image = !text && type && strcmp(type, "image") == 0;
        if ((text || image) && nparts > 0 && ADD(&parts, ",")) {
            rc = PC_OOM(msg, size);
            break;
        }
        if (text) {
            if (ADD(&parts, "{\"type\":\"text\",\"text\":") || pc_buf_str(&parts, text, len) ||
                ADD(&parts, "}")) {
                rc = PC_OOM(msg, size);
                break;
            }
            one = text;
            one_len = len;
            ntext++;
        } else if (image) {
            if ((rc = image_part(&parts, b, at, msg, size)) != 0)
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
        if (sep(out, start) || ADD(out, "{\"role\":\"user\",\"content\":") ||
            (as_string ? pc_buf_str(out, one, one_len)
                       : ADD(out, "[") || pc_buf_add(out, parts.p, parts.len) || ADD(out, "]")) ||
            ADD(out, "}"))
            rc = PC_OOM(msg, size);
    }
    free(parts.p);
    return rc;
}

/* The member `key` of a block's continuation data (borrowed), or NULL. */
static const json_t *continuation_data(const json_t *block, const char *key) {
    return json_object_get(json_object_get(json_object_get(block, "continuation"), "data"), key);
}

/* The reasoning members of one assistant message: "reasoning_content"
 * (DeepSeek) and "reasoning" (OpenRouter, Ollama, vLLM), each the
 * concatenated text of the blocks whose continuation names it. */
typedef struct reasoning_out {
    pc_buf text[2];
    bool present[2];
} reasoning_out;

static const char *const reasoning_members[2] = {"reasoning_content", "reasoning"};

/* A reasoning block: into `r` when its continuation names a member; a block
 * without a continuation is not sent back, one whose data lacks the member
 * is skipped and counted in *skipped.  0, or -1 when out of memory. */
static int add_reasoning(reasoning_out *r, const json_t *b, size_t *skipped) {
    if (!json_object_get(b, "continuation"))
        return 0;
    const char *field = json_string_value(continuation_data(b, "field"));
    int k = !field ? -1
            : strcmp(field, reasoning_members[0]) == 0 ? 0
            : strcmp(field, reasoning_members[1]) == 0 ? 1
                                                         : -1;
    if (k < 0) {
        (*skipped)++;
        return 0;
    }
    size_t len = 0;
    const char *t = block_textn(b, &len);
    r->present[k] = true;
    return t && len ? pc_buf_add(&r->text[k], t, len) : 0;
}

/*
 * Gemini's validator sentinel.  Gemini 3 answers 400 ("Function call is
 * missing a thought_signature in functionCall parts.") for a function call
 * of the current turn whose first call has no signature; Google documents
 * "skip_thought_signature_validator" as the dummy signature for calls whose
 * signature is not available (history from another model, calls not made
 * by the API; ai.google.dev/gemini-api/docs/thought-signatures, FAQ).  A
 * signature is lost here when the core drops it (compaction before it, a
 * route change; core/format/continuation.h).  Only the first call of a message
 * needs one (Gemini signs only the first of parallel calls).  It goes on
 * every such message, not only those of the current turn that Gemini
 * checks: a message then translates to the same bytes wherever it stands,
 * so the per-message cache and the memo stay right and the prefix sent
 * never changes as the conversation grows.
 */
static const char gemini_sentinel[] = "skip_thought_signature_validator";

/* Whether `model` is Gemini 3 or later (its last path segment, without
 * case, is "gemini-<major>..." with major >= 3): the models that check
 * thought signatures. */
static bool gemini_signs_calls(const char *model) {
    const char *seg = strrchr(model, '/');
    seg = seg ? seg + 1 : model;
    static const char prefix[] = "gemini-";
    for (size_t k = 0; k < sizeof prefix - 1; k++) {
        char c = seg[k]; /* a NUL differs from every byte of `prefix` */
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != prefix[k])
            return false;
    }
    const char *p = seg + sizeof prefix - 1;
    if (*p < '0' || *p > '9')
        return false;
    long major = 0;
    for (; *p >= '0' && *p <= '9' && major < 1000; p++)
        major = major * 10 + (*p - '0');
    return major >= 3;
}

/* Whether message `m` would get the sentinel: an assistant message whose
 * first tool_call block has no string thought_signature. */
static bool wants_sentinel(const json_t *m) {
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || strcmp(role, "assistant") != 0)
        return false;
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(m, "content"), i, b) {
        const char *type = pc_block_type(b);
        if (type && strcmp(type, "tool_call") == 0)
            return !json_is_string(continuation_data(b, "thought_signature"));
    }
    return false;
}

/* `sentinel`: a first tool call without a signature gets gemini_sentinel. */
static int add_assistant(pc_buf *out, size_t start, const json_t *content, const char *where,
                         bool sentinel, size_t *skipped, char *msg, size_t size) {
    pc_buf text = {0}, calls = {0};
    reasoning_out r = {0};
    size_t i, ncalls = 0;
    json_t *b;
    int rc = 0;
    json_array_foreach(content, i, b) {
        const char *type = pc_block_type(b);
        if (type && strcmp(type, "text") == 0 && block_text(b)) {
            if (pc_buf_piece(&text, block_text(b)) != 0) {
                rc = PC_OOM(msg, size);
                break;
            }
        } else if (type && strcmp(type, "reasoning") == 0) {
            if (add_reasoning(&r, b, skipped) != 0) {
                rc = PC_OOM(msg, size);
                break;
            }
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
            const json_t *sig = continuation_data(b, "thought_signature");
            if (json_object_get(b, "continuation") && !json_is_string(sig))
                (*skipped)++; /* the call goes back without it */
            const char *sig_text = json_is_string(sig) ? json_string_value(sig)
                                   : sentinel && ncalls == 0 ? gemini_sentinel
                                                             : NULL;
            size_t sig_len = json_is_string(sig) ? json_string_length(sig)
                             : sig_text                ? sizeof gemini_sentinel - 1
                                                       : 0;
            if ((ncalls++ > 0 && ADD(&calls, ",")) || ADD(&calls, "{\"id\":") ||
                pc_buf_str(&calls, json_string_value(id), json_string_length(id)) ||
                ADD(&calls, ",\"type\":\"function\",\"function\":{\"name\":") ||
                pc_buf_str(&calls, json_string_value(name), json_string_length(name)) ||
                ADD(&calls, ",\"arguments\":") ||
                pc_buf_str(&calls, empty ? "{}" : json_string_value(args),
                           empty ? 2 : json_string_length(args)) ||
                ADD(&calls, "}") ||
                (sig_text &&
                 (ADD(&calls, ",\"extra_content\":{\"google\":{\"thought_signature\":") ||
                  pc_buf_str(&calls, sig_text, sig_len) ||
                  ADD(&calls, "}}"))) ||
                ADD(&calls, "}")) {
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
    if (rc == 0 &&
        (sep(out, start) || ADD(out, "{\"role\":\"assistant\",\"content\":") ||
         (ncalls > 0 && !text.p ? ADD(out, "null")
                                : pc_buf_str(out, text.p ? text.p : "", text.len))))
        rc = PC_OOM(msg, size);
    for (int k = 0; rc == 0 && k < 2; k++)
        if (r.present[k] &&
            (ADD(out, ",\"") ||
             pc_buf_add(out, reasoning_members[k], strlen(reasoning_members[k])) ||
             ADD(out, "\":") ||
             pc_buf_str(out, r.text[k].p ? r.text[k].p : "", r.text[k].len)))
            rc = PC_OOM(msg, size);
    if (rc == 0 &&
        ((ncalls > 0 && (ADD(out, ",\"tool_calls\":[") || pc_buf_add(out, calls.p, calls.len) ||
                         ADD(out, "]"))) ||
         ADD(out, "}")))
        rc = PC_OOM(msg, size);
    free(text.p);
    free(calls.p);
    free(r.text[0].p);
    free(r.text[1].p);
    return rc;
}

/* Append the Chat Completions message(s) of canonical message `m`
 * (messages[i]) to `out` from `start` on: a tool message per tool_result
 * block, then the message itself (none for a user message with nothing to
 * send). */
static int translate_one(pc_buf *out, size_t start, const json_t *m, size_t i, bool sentinel,
                         size_t *skipped, char *msg, size_t size) {
    char where[48];
    const json_t *content;
    const char *role = pc_message_role(m, i, where, sizeof where, &content, msg, size);
    if (!role)
        return -1;
    if (strcmp(role, "system") == 0)
        return add_system(out, start, content, where, msg, size);
    if (strcmp(role, "assistant") == 0)
        return add_assistant(out, start, content, where, sentinel, skipped, msg, size);
    return add_user(out, start, content, strcmp(role, "tool") == 0, where, msg, size);
}

/* Append the wire text of canonical message `m` to `out` (which ends in '['
 * or in an earlier message): from the cache, else translated and cached.
 * `gemini`: for a model that checks thought signatures; a message that gets
 * the sentinel then is neither read from nor put in the cache (its text
 * depends on the model, the cache's key is the message alone). */
static int add_message(pc_buf *out, json_t *m, size_t i, bool gemini, pc_cache *cache,
                       size_t *skipped, char *msg, size_t size) {
    size_t mark = out->len;
    if (out->p[out->len - 1] != '[' && pc_buf_add(out, ",", 1) != 0)
        return PC_OOM(msg, size);
    size_t start = out->len;
    bool sentinel = gemini && wants_sentinel(m);
    int hit = sentinel ? 0 : pc_cache_get(cache, m, PC_CACHE_MESSAGE, out);
    if (hit < 0)
        return PC_OOM(msg, size);
    if (hit == 0) {
        if (translate_one(out, start, m, i, sentinel, skipped, msg, size) != 0)
            return -1;
        /* a failed put only costs the next request a translation */
        if (!sentinel)
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

/* Whether `rules` (may be NULL) let the call config's temperature go out
 * with the options `opts`. */
static bool temperature_taken(const pc_model_entry *rules, const json_t *opts) {
    if (!rules || rules->temperature == PC_TEMPERATURE_ANY)
        return true;
    if (rules->temperature == PC_TEMPERATURE_NEVER)
        return false;
    const char *effort = json_string_value(json_object_get(opts, "reasoning_effort"));
    return !effort || strcmp(effort, "none") == 0;
}

int openai_request_begin(const json_t *request, pc_extra *extra, const char *const *owned,
                         bool (*taken)(const pc_model_entry *, const json_t *),
                         const char *effort, openai_begun *b, char *msg, size_t size) {
    memset(b, 0, sizeof *b);
    if (extra) {
        extra->dropped_temperature = false;
        extra->skipped_continuations = 0;
    }
    if (!(b->model = pc_request_check(request, msg, size)))
        return -1;
    const json_t *opts =
        extra && extra->options ? extra->options : json_object_get(request, "options");
    b->opts = json_is_null(opts) ? NULL : opts;
    b->rules = pc_model_table_find(b->model);
    if (pc_options_check(b->opts, owned, b->model, "options", msg, size) != 0)
        return -1;
    const json_t *opt_temp = json_object_get(b->opts, "temperature");
    if (opt_temp && !json_is_null(opt_temp) && !taken(b->rules, b->opts))
        return pc_bad(msg, size,
                      "options.temperature: model \"%s\" refuses temperature (OpenAI reasoning "
                      "models take only the default; gpt-5.1 only with %s \"none\")",
                      b->model, effort);

    b->messages = json_object_get(request, "messages");
    b->tools = json_object_get(request, "tools");
    if (!json_is_array(b->messages))
        return pc_bad(msg, size, "messages: expected an array");
    if (b->tools && !json_is_null(b->tools) && !json_is_array(b->tools))
        return pc_bad(msg, size, "tools: expected an array");
    if (pc_tool_choice(request, &b->choice, msg, size) != 0)
        return -1;
    if (json_array_size(b->tools) == 0)
        b->choice = NULL; /* the API refuses a tool_choice without tools */
    return 0;
}

int openai_request_build(const json_t *request, pc_cache *cache, pc_memo *memo, char *msg,
                         size_t size) {
    return openai_request_build_ex(request, NULL, cache, memo, msg, size);
}

int openai_request_build_ex(const json_t *request, pc_extra *extra, pc_cache *cache,
                            pc_memo *memo, char *msg, size_t size) {
    if (!memo)
        return PC_OOM(msg, size);
    size_t skipped = 0; /* blocks whose continuation lacked what we need */
    openai_begun b;
    if (openai_request_begin(request, extra, openai_owned_keys, temperature_taken,
                             "reasoning_effort", &b, msg, size) != 0)
        goto fail;
    const char *model = b.model, *cs = b.choice;
    const json_t *opts = b.opts, *opt_temp = json_object_get(b.opts, "temperature");
    const pc_model_entry *rules = b.rules;
    json_t *messages = b.messages, *tools = b.tools;
    /* the history the last body shares stays in place; the rest is added.
     * A body for a Gemini model may hold sentinels (gemini_signs_calls): the
     * memo's side records which kind it is ("g"), and a memo of the other
     * kind is started over (a route change). */
    bool gemini = gemini_signs_calls(model);
    if ((memo->side.len > 0) != gemini)
        pc_memo_keep(memo, 0, 0, 0);
    pc_buf *out = &memo->text;
    size_t i = pc_memo_keep_prefix(memo, messages), n_msgs = json_array_size(messages);
    if (gemini && pc_buf_add(&memo->side, "g", 1) != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    if (out->len == 0 && pc_buf_add(out, "{\"messages\":[", 13) != 0) {
        PC_OOM(msg, size);
        goto fail;
    }
    for (; i < n_msgs; i++) {
        json_t *m = json_array_get(messages, i);
        if (add_message(out, m, i, gemini, cache, &skipped, msg, size) != 0)
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
    /* the small members, in the order jansson would have dumped them */
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    char n[32];
    bool completion = rules && rules->tokens == PC_TOKENS_MAX_COMPLETION_TOKENS;
    int rc = ADD(out, ",\"model\":") || pc_buf_str(out, model, strlen(model)) ? -1 : 0;
    if (rc == 0 && json_is_integer(max_tokens))
        rc = (completion ? ADD(out, ",\"max_completion_tokens\":")
                         : ADD(out, ",\"max_tokens\":")) ||
             pc_buf_add(out, n,
                        (size_t)snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT,
                                         json_integer_value(max_tokens)));
    /* an option named temperature (a value or null) replaces the call config's */
    if (rc == 0 && json_is_number(temperature) && !opt_temp) {
        if (temperature_taken(rules, opts))
            rc = ADD(out, ",\"temperature\":") || pc_buf_json(out, temperature, msg, size);
        else if (extra)
            extra->dropped_temperature = true;
    }
    if (rc == 0 && cs)
        rc = ADD(out, ",\"tool_choice\":") || pc_buf_str(out, cs, strlen(cs));
    if (rc == 0 && opts && pc_options_append(out, opts, msg, size) != 0)
        goto fail;
    if (rc != 0 || ADD(out, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}")) {
        PC_OOM(msg, size);
        goto fail;
    }
    if (extra)
        extra->skipped_continuations = skipped;
    return 0;
fail:
    return pc_memo_fail(memo, msg, size);
}

bool openai_cache_key_default(const char *base_url) {
    static const char host[] = "api.openai.com";
    const size_t n = sizeof host - 1;
    const char *h = base_url ? strstr(base_url, "://") : NULL;
    h = h ? h + 3 : base_url;
    if (!h)
        return false;
    for (size_t i = 0; i < n; i++) { /* host names compare without case */
        char c = h[i]; /* a NUL differs from every byte of `host`: the loop stops */
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != host[i])
            return false;
    }
    return h[n] == '\0' || h[n] == '/' || h[n] == ':';
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
