/*
 * plugins/provider-common/provider_host.c - config, headers, model_info
 * (with the window probe), prepare_call and the streamed HTTP call shared by
 * the HTTP provider plugins (see provider_host.h).
 *
 * One attempt per `stream` call, no hidden retries.  The API key and header
 * values never appear in chunks, failures or log lines: the values the
 * config schema marks "secret" are collected at init and scrubbed from the
 * finish chunk (failures quote what the server sent, and servers echo keys).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, strcasecmp, clock_gettime */
#endif
#include "provider_host.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "model_table.h"
#include "provider_options.h"

/* A headers object: the credential headers are secret. */
#define SCHEMA_HEADERS \
    "{\"type\":\"object\",\"properties\":{" \
    "\"Authorization\":{\"type\":\"string\",\"secret\":true}," \
    "\"Proxy-Authorization\":{\"type\":\"string\",\"secret\":true}," \
    "\"x-api-key\":{\"type\":\"string\",\"secret\":true}," \
    "\"api-key\":{\"type\":\"string\",\"secret\":true}}," \
    "\"additionalProperties\":{\"type\":\"string\"}}"

/* provider-anthropic's prompt caching: `cache` on the row and on each
 * models.<id> (false, or {"ttl":"5m"|"1h"}; anthropic.c checks it again). */
#define SCHEMA_CACHE \
    "{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"object\",\"additionalProperties\":false," \
    "\"properties\":{\"ttl\":{\"enum\":[\"5m\",\"1h\"]}}}]}"

/* The members every schema has, `model_extra` more members of each
 * models.<id> (empty, or starting with a comma).  options: merged last into
 * the request body (provider_options.h); models.<id>.options over them,
 * models.<id>.headers over the row's headers for that model's requests. */
#define SCHEMA_COMMON(model_extra) \
    "\"base_url\":{\"type\":\"string\",\"minLength\":1}," \
    "\"api_key\":{\"type\":\"string\",\"secret\":true}," \
    "\"headers\":" SCHEMA_HEADERS "," \
    "\"options\":{\"type\":\"object\"}," \
    "\"models\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"object\"," \
    "\"additionalProperties\":false,\"properties\":{" \
    "\"context_window\":{\"type\":\"integer\",\"minimum\":1}," \
    "\"max_output\":{\"type\":\"integer\",\"minimum\":1}," \
    "\"price\":{\"type\":\"object\"}," \
    "\"options\":{\"type\":\"object\"}," \
    "\"headers\":" SCHEMA_HEADERS model_extra "}}}," \
    "\"connect_timeout_ms\":{\"type\":\"integer\",\"minimum\":1}," \
    "\"stream_idle_timeout_ms\":{\"type\":\"integer\",\"minimum\":1}," \
    "\"stream_total_timeout_ms\":{\"type\":\"integer\",\"minimum\":0}"

const char pc_config_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{" SCHEMA_COMMON("") "}}";

const char pc_config_schema_probe[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{" SCHEMA_COMMON("") ","
    "\"probe_windows\":{\"type\":\"boolean\"},"
    "\"probe_timeout_ms\":{\"type\":\"integer\",\"minimum\":1},"
    /* provider-openai's own: the prompt_cache_key it sends and the API it
     * speaks (openai.c) */
    "\"prompt_cache_key\":{\"type\":[\"string\",\"boolean\"],\"minLength\":1},"
    "\"api\":{\"enum\":[\"responses\",\"chat\"]}},"
    /* api's default, as openai_responses_default decides it: shown by `weir
     * config` (weir_config_defaults) */
    "\"if\":{\"properties\":{\"base_url\":{\"enum\":[\"https://api.openai.com/v1\","
    "\"https://api.openai.com/v1/\"]}}},"
    "\"then\":{\"properties\":{\"api\":{\"default\":\"responses\"}}},"
    "\"else\":{\"properties\":{\"api\":{\"default\":\"chat\"}}}}";

const char pc_config_schema_cache[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    SCHEMA_COMMON(",\"cache\":" SCHEMA_CACHE) ",\"cache\":" SCHEMA_CACHE "}}";

/* The members of models.<id>.price, USD per million tokens (docs/providers.md,
 * "Model table"): input and output are required, the rest default as the
 * model table's do (cached input: as input; a cache write: as input). */
static const char *const price_members[] = {"input", "cached_input", "cache_write_5m",
                                            "cache_write_1h", "output"};

/* Check config.models.<model>.price (`price`, borrowed, not NULL): an object
 * of the members above, each a number >= 0, input and output present.  The
 * error names the field. */
static int check_price(const pc_provider *p, const char *model, json_t *price,
                       weir_error *err) {
    if (!json_is_object(price))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.models.%s.price: expected an object {input, output, "
                          "cached_input?, cache_write_5m?, cache_write_1h?} (USD per million "
                          "tokens)",
                          model);
    const char *key;
    json_t *v;
    json_object_foreach(price, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof price_members / sizeof price_members[0]; i++)
            known = known || !strcmp(key, price_members[i]);
        if (!known)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.models.%s.price.%s: unknown member (input, cached_input, "
                              "cache_write_5m, cache_write_1h, output)",
                              model, key);
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e6)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.models.%s.price.%s: expected a number >= 0 (USD per "
                              "million tokens)",
                              model, key);
    }
    if (!json_object_get(price, "input") || !json_object_get(price, "output"))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.models.%s.price.%s: missing (input and output are required)",
                          model, json_object_get(price, "input") ? "output" : "input");
    return WEIR_OK;
}

int pc_set_err(weir_error *err, int code, const char *plugin, const char *fmt, ...) {
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    err->code = (weir_status)code;
    snprintf(err->plugin, sizeof err->plugin, "%s", plugin);
    err->hook[0] = '\0';
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return code;
}

/* The window probe of one row: asked once, then read under `mu`. */
struct pc_probe {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* broadcast when the asking ends */
    enum { PROBE_NEW, PROBE_ASKING, PROBE_DONE } state;
    json_t *windows;     /* {model id: max_model_len} from GET /models, or NULL */
    long server_window;  /* n_ctx from GET /props (any model), or 0 */
};

static pc_probe *probe_new(void) {
    pc_probe *pr = calloc(1, sizeof *pr);
    if (!pr)
        return NULL;
    if (pthread_mutex_init(&pr->mu, NULL) != 0) {
        free(pr);
        return NULL;
    }
    if (pthread_cond_init(&pr->cv, NULL) != 0) {
        pthread_mutex_destroy(&pr->mu);
        free(pr);
        return NULL;
    }
    return pr;
}

static void probe_free(pc_probe *pr) {
    if (!pr)
        return;
    json_decref(pr->windows);
    pthread_cond_destroy(&pr->cv);
    pthread_mutex_destroy(&pr->mu);
    free(pr);
}

static void free_list(char **list) {
    for (char **h = list; h && *h; h++)
        free(*h);
    free(list);
}

static void provider_free(pc_provider *p) {
    if (!p)
        return;
    free_list(p->headers);
    free_list(p->probe_headers);
    probe_free(p->probe);
    pc_secrets_clear(&p->secrets);
    free(p->base);
    free(p->url);
    free(p->id);
    json_decref(p->models);
    json_decref(p->options);
    json_decref(p->config);
    for (size_t i = 0; i < p->nmodel_headers; i++) {
        free(p->model_headers[i].model);
        free_list(p->model_headers[i].headers);
    }
    free(p->model_headers);
    if (p->warned) {
        json_decref(p->warned->seen);
        pthread_mutex_destroy(&p->warned->mu);
        free(p->warned);
    }
    pc_cache_free(p->cache);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */

/* A header name is an HTTP token; a value has no line breaks or NULs. */
static bool header_name_ok(const char *s) {
    if (!s[0])
        return false;
    for (; *s; s++)
        if (*s <= ' ' || *s >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *s))
            return false;
    return true;
}

static bool header_value_ok(const char *s) {
    return !strpbrk(s, "\r\n");
}

/* Append "name: <prefix>value" to the NULL-terminated list (capacity checked
 * by the caller). */
static int header_add(char **list, size_t *n, const char *name, const char *prefix,
                      const char *value) {
    size_t len = strlen(name) + strlen(prefix) + strlen(value) + 3;
    char *h = malloc(len);
    if (!h)
        return -1;
    snprintf(h, len, "%s: %s%s", name, prefix, value);
    list[(*n)++] = h;
    list[*n] = NULL;
    return 0;
}

/* True when the config's headers name `header` (case-insensitive). */
static bool has_header(json_t *extra, const char *header) {
    const char *name;
    json_t *v;
    json_object_foreach(extra, name, v) {
        if (strcasecmp(name, header) == 0)
            return true;
    }
    return false;
}

/* The probe's one default header (a GET of JSON). */
static const char *const probe_default_headers[][2] = {{"Accept", "application/json"}};

/* *out: the `defaults` (n of them) unless `extra` (the config's headers,
 * checked) names them, then extra, then the key unless `extra` names its
 * header.  -1 when out of memory. */
static int header_list(const pc_provider *p, const char *api_key, json_t *extra,
                       const char *const (*defaults)[2], size_t ndefaults, char ***out) {
    const pc_spec *spec = p->spec;
    size_t cap = ndefaults + 2 + json_object_size(extra), n = 0;
    char **list = *out = calloc(cap, sizeof *list);
    if (!list)
        return -1;
    for (size_t i = 0; i < ndefaults; i++)
        if (!has_header(extra, defaults[i][0]) &&
            header_add(list, &n, defaults[i][0], "", defaults[i][1]) != 0)
            return -1;
    const char *name;
    json_t *v;
    json_object_foreach(extra, name, v) {
        if (header_add(list, &n, name, "", json_string_value(v)) != 0)
            return -1;
    }
    if (api_key[0] && !has_header(extra, spec->key_header) &&
        header_add(list, &n, spec->key_header, spec->key_prefix, api_key) != 0)
        return -1;
    return 0;
}

/* The request headers (the spec's defaults, the config's, the key) and,
 * for a row that probes, the probe's. */
static int build_headers(pc_provider *p, const char *api_key, json_t *extra, bool probe,
                         weir_error *err) {
    const char *name;
    json_t *v;
    json_object_foreach(extra, name, v) {
        if (!header_name_ok(name))
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.headers: \"%s\" is not a valid header name", name);
        if (!json_is_string(v) || !header_value_ok(json_string_value(v)))
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.headers.%s: the value must be a string without line "
                              "breaks",
                              name);
    }
    if (api_key[0] && !has_header(extra, p->spec->key_header) && !header_value_ok(api_key))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.api_key: contains a line break");
    if (header_list(p, api_key, extra, p->spec->headers, p->spec->nheaders, &p->headers) != 0 ||
        (probe && header_list(p, api_key, extra, probe_default_headers,
                              sizeof probe_default_headers / sizeof probe_default_headers[0],
                              &p->probe_headers) != 0))
        return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    return WEIR_OK;
}

/* The row's headers with `over` (a model's) on top, names compared
 * case-blind: a new object, or NULL when out of memory. */
static json_t *headers_over(json_t *row, json_t *over) {
    json_t *out = json_object();
    const char *name;
    json_t *v;
    json_object_foreach(row, name, v) {
        if (out && !has_header(over, name) && json_object_set(out, name, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    json_object_foreach(over, name, v) {
        if (out && json_object_set(out, name, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

/* The request headers of each models.<id> entry that has `headers`: the
 * spec's defaults, the row's headers under the model's, the key. */
static int build_model_headers(pc_provider *p, const char *api_key, json_t *row,
                               weir_error *err) {
    size_t n = 0;
    const char *id;
    json_t *m;
    json_object_foreach(p->models, id, m) {
        if (json_object_get(m, "headers"))
            n++;
    }
    if (n == 0)
        return WEIR_OK;
    p->model_headers = calloc(n, sizeof *p->model_headers);
    if (!p->model_headers)
        return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    json_object_foreach(p->models, id, m) {
        json_t *extra = json_object_get(m, "headers");
        if (!extra)
            continue;
        const char *name;
        json_t *v;
        json_object_foreach(extra, name, v) {
            if (!header_name_ok(name))
                return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                                  "config.models.%s.headers: \"%s\" is not a valid header name",
                                  id, name);
            if (!json_is_string(v) || !header_value_ok(json_string_value(v)))
                return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                                  "config.models.%s.headers.%s: the value must be a string "
                                  "without line breaks",
                                  id, name);
        }
        pc_model_headers *mh = &p->model_headers[p->nmodel_headers];
        json_t *merged = headers_over(row, extra);
        mh->model = strdup(id);
        int rc = merged && mh->model
                     ? header_list(p, api_key, merged, p->spec->headers, p->spec->nheaders,
                                   &mh->headers)
                     : -1;
        p->nmodel_headers++; /* freed with the row, whole or not */
        json_decref(merged);
        if (rc != 0)
            return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    }
    return WEIR_OK;
}

/* The request headers of `model` (borrowed, may be NULL): its own list when
 * its models entry has headers, else the row's. */
static const char *const *headers_for(const pc_provider *p, const char *model) {
    for (size_t i = 0; model && i < p->nmodel_headers; i++)
        if (strcmp(p->model_headers[i].model, model) == 0)
            return (const char *const *)p->model_headers[i].headers;
    return (const char *const *)p->headers;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* Check the row's options and each model's at load: no provider-owned key,
 * no thinking mode a known model refuses (provider_options.h). */
static int check_options(pc_provider *p, const json_t *row, weir_error *err) {
    char msg[512], where[400];
    const char *const *owned = p->spec->owned_keys;
    if (pc_options_check(row, owned, NULL, "config.options", msg, sizeof msg) != 0)
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id, "%s", msg);
    const char *id;
    json_t *m;
    json_object_foreach(p->models, id, m) {
        json_t *mo = json_object_get(m, "options");
        snprintf(where, sizeof where, "config.models.%s.options", id);
        if (pc_options_check(mo, owned, id, where, msg, sizeof msg) != 0)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id, "%s", msg);
        /* the row's options as this model gets them */
        json_t *merged = pc_options_merge(row, mo);
        if (!merged)
            return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
        int bad = pc_options_check(merged, owned, id, "config.options", msg, sizeof msg);
        json_decref(merged);
        if (bad)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id, "%s", msg);
    }
    return WEIR_OK;
}

int pc_call_options(const pc_provider *p, const json_t *request, json_t **out, char *msg,
                    size_t size) {
    *out = NULL;
    const char *model = json_string_value(json_object_get(request, "model"));
    const json_t *mo = json_object_get(json_object_get(p->models, model ? model : ""), "options");
    const json_t *ro = json_object_get(request, "options");
    if (ro && !json_is_null(ro) && !json_is_object(ro))
        return pc_bad(msg, size, "options: expected an object (merged into the request body)");
    json_t *base = pc_options_merge(p->options, mo);
    *out = base ? pc_options_merge(base, json_is_object(ro) ? ro : NULL) : NULL;
    json_decref(base);
    return *out ? 0 : PC_OOM(msg, size);
}

void pc_warn_dropped_temperature(const pc_provider *p, const char *model) {
    pc_warned *w = p->warned;
    if (!w || !model)
        return;
    pthread_mutex_lock(&w->mu);
    bool first = !json_object_get(w->seen, model);
    if (first && json_object_set_new(w->seen, model, json_true()) != 0)
        first = false; /* out of memory: no warning rather than one per call */
    pthread_mutex_unlock(&w->mu);
    if (first)
        weir_log(p->plugin, WEIR_LOG_WARN,
                 "model \"%s\" refuses temperature (the model table's rule): the call "
                 "config's temperature is not sent to it (said once per row and model)",
                 model);
}

/* ------------------------------------------------------------------------ */
/* Secrets                                                                  */
/* ------------------------------------------------------------------------ */

/* jansson's object iterator is not const. */
static json_t *unconst(const json_t *v) { return (json_t *)(uintptr_t)v; }

/* The schema of member `key` of an object `schema` describes: its
 * "properties" entry, matched in any case (header names are case-blind),
 * else an object "additionalProperties"; NULL when neither. */
static const json_t *member_schema(const json_t *schema, const char *key) {
    const json_t *props = json_object_get(schema, "properties");
    const json_t *sub = json_object_get(props, key);
    if (!sub) {
        const char *name;
        json_t *v;
        json_object_foreach(unconst(props), name, v) {
            if (strcasecmp(name, key) == 0) {
                sub = v;
                break;
            }
        }
    }
    if (!sub && json_is_object(json_object_get(schema, "additionalProperties")))
        sub = json_object_get(schema, "additionalProperties");
    return sub;
}

/* Add a secret string: the value itself and, for "<scheme> <credentials>"
 * ("Bearer sk-..."), the credentials alone, which is what servers echo. */
static int add_secret(pc_secrets *s, const json_t *v) {
    const char *text = json_string_value(v);
    if (!text || pc_secrets_add(s, text) != 0)
        return text ? -1 : 0;
    const char *sp = strchr(text, ' ');
    for (const char *c = text; sp && c < sp; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            sp = NULL; /* not an auth scheme word */
    if (!sp || sp == text)
        return 0;
    while (*sp == ' ')
        sp++;
    return pc_secrets_add(s, sp);
}

/* Collect every string of `value` that `schema` marks "secret": true, down
 * object members (member_schema) and array items. */
static int collect_secrets(pc_secrets *s, const json_t *schema, const json_t *value,
                           int depth) {
    if (!json_is_object(schema) || depth > 16)
        return 0;
    if (json_is_true(json_object_get(schema, "secret")))
        return add_secret(s, value);
    int rc = 0;
    if (json_is_object(value)) {
        const char *key;
        json_t *member;
        json_object_foreach(unconst(value), key, member) {
            if (collect_secrets(s, member_schema(schema, key), member, depth + 1) != 0)
                rc = -1;
        }
    } else if (json_is_array(value)) {
        size_t i;
        json_t *elem;
        json_array_foreach(value, i, elem) {
            if (collect_secrets(s, json_object_get(schema, "items"), elem, depth + 1) != 0)
                rc = -1;
        }
    }
    return rc;
}

/* A positive integer member (0 too when `zero_off`: off), or `dflt` when absent. */
static int config_ms(const json_t *config, const char *key, long dflt, bool zero_off,
                     long *out, const char *id, weir_error *err) {
    json_t *v = json_object_get(config, key);
    *out = dflt;
    if (!v)
        return WEIR_OK;
    if (!json_is_integer(v) || json_integer_value(v) < (zero_off ? 0 : 1) ||
        json_integer_value(v) > 86400000)
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, id,
                          "config.%s: expected %sa positive integer (milliseconds)", key,
                          zero_off ? "0 (off) or " : "");
    *out = (long)json_integer_value(v);
    return WEIR_OK;
}

static int parse_config(pc_provider *p, const json_t *config, weir_error *err) {
    if (config && !json_is_null(config) && !json_is_object(config))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id, "config: expected an object");
    json_t *jbase = json_object_get(config, "base_url");
    json_t *jkey = json_object_get(config, "api_key");
    json_t *headers = json_object_get(config, "headers");
    json_t *models = json_object_get(config, "models");
    if (jbase && (!json_is_string(jbase) || !json_string_value(jbase)[0]))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.base_url: expected a non-empty string");
    if (jkey && !json_is_string(jkey))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.api_key: expected a string");
    if (headers && !json_is_object(headers))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.headers: expected an object");
    if (models && !json_is_object(models))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id, "config.models: expected an object");
    const char *name;
    json_t *m;
    json_object_foreach(models, name, m) {
        json_t *cw = json_object_get(m, "context_window"), *mo = json_object_get(m, "max_output");
        if (!json_is_object(m) || (cw && (!json_is_integer(cw) || json_integer_value(cw) < 1)) ||
            (mo && (!json_is_integer(mo) || json_integer_value(mo) < 1)))
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.models.%s: expected {context_window, max_output} "
                              "positive integers",
                              name);
        json_t *mh = json_object_get(m, "headers");
        if (mh && !json_is_object(mh))
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                              "config.models.%s.headers: expected an object", name);
        json_t *mp = json_object_get(m, "price");
        int prc = mp ? check_price(p, name, mp, err) : WEIR_OK;
        if (prc != WEIR_OK)
            return prc;
    }
    json_t *options = json_object_get(config, "options");
    int rc = config_ms(config, "connect_timeout_ms", 10000, false, &p->connect_timeout_ms, p->id,
                       err);
    if (rc == WEIR_OK)
        rc = config_ms(config, "stream_idle_timeout_ms", 300000, false, &p->idle_timeout_ms,
                       p->id, err);
    if (rc == WEIR_OK)
        rc = config_ms(config, "stream_total_timeout_ms", 1800000, true, &p->total_timeout_ms,
                       p->id, err);
    if (rc == WEIR_OK && p->spec->probe)
        rc = config_ms(config, "probe_timeout_ms", PC_PROBE_TIMEOUT_MS, false,
                       &p->probe_timeout_ms, p->id, err);
    if (rc != WEIR_OK)
        return rc;
    json_t *jprobe = p->spec->probe ? json_object_get(config, "probe_windows") : NULL;
    if (jprobe && !json_is_boolean(jprobe))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, p->id,
                          "config.probe_windows: expected true or false");

    const char *base = jbase ? json_string_value(jbase) : p->spec->default_base_url;
    size_t blen = strlen(base);
    while (blen > 1 && base[blen - 1] == '/')
        blen--;
    size_t len = blen + strlen(p->spec->path) + 1;
    p->url = malloc(len);
    p->base = strndup(base, blen);
    p->models = models ? json_deep_copy(models) : json_object();
    p->options = options ? json_deep_copy(options) : NULL;
    p->config = json_is_object(config) ? json_deep_copy(config) : json_object();
    if (!p->url || !p->base || !p->models || (options && !p->options) || !p->config)
        return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    if ((rc = check_options(p, p->options, err)) != WEIR_OK)
        return rc;
    p->warned = calloc(1, sizeof *p->warned);
    if (!p->warned || !(p->warned->seen = json_object()) ||
        pthread_mutex_init(&p->warned->mu, NULL) != 0) {
        if (p->warned)
            json_decref(p->warned->seen);
        free(p->warned);
        p->warned = NULL;
        return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    }
    snprintf(p->url, len, "%.*s%s", (int)blen, base, p->spec->path);
    /* api.openai.com reports no windows: no probe there unless asked for */
    bool probe = p->spec->probe && (jprobe ? json_is_true(jprobe)
                                           : strcmp(p->base, p->spec->default_base_url) != 0);
    if (probe && !(p->probe = probe_new()))
        return pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    json_t *schema = json_loads(pc_config_schema, 0, NULL);
    rc = schema && collect_secrets(&p->secrets, schema, config, 0) == 0 ? WEIR_OK : WEIR_E_NOMEM;
    json_decref(schema);
    if (rc != WEIR_OK)
        return pc_set_err(err, rc, p->id, "out of memory");
    rc = build_headers(p, jkey ? json_string_value(jkey) : "", headers, probe, err);
    if (rc == WEIR_OK)
        rc = build_model_headers(p, jkey ? json_string_value(jkey) : "", headers, err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The window probe                                                         */
/* ------------------------------------------------------------------------ */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* GET `url` with the probe's headers within `ms`: the 200 body (malloc'd,
 * NUL-terminated; *len its length), or NULL.  `what` names the endpoint in
 * the debug log, which never shows a header, the URL or the server's text
 * (they may hold a secret). */
static char *probe_get(const pc_provider *p, const char *url, long ms, const char *what,
                       size_t *len) {
    weir_http_request req = {
        .struct_size = sizeof req,
        .url = url,
        .headers = (const char *const *)p->probe_headers,
        .connect_timeout_ms = ms,
        .idle_timeout_ms = ms,
        .total_timeout_ms = ms,
    };
    weir_http_response resp;
    memset(&resp, 0, sizeof resp);
    json_t *failure = NULL;
    int rc = weir_http_get(&req, &resp, &failure);
    char *body = NULL;
    const char *not_json = rc == WEIR_OK && resp.status == 200
                               ? pc_not_json(resp.body, resp.body_len)
                               : NULL;
    if (not_json) { /* a captive portal, a base_url that names a web site... */
        weir_log(p->plugin, WEIR_LOG_DEBUG,
                 "window probe: GET %s: HTTP 200 with %s, not JSON%s", what, not_json,
                 strcmp(not_json, "an HTML page") == 0
                     ? " (a captive portal, or a base_url that names a web site?)"
                     : "");
    } else if (rc == WEIR_OK && resp.status == 200 && resp.body) {
        body = resp.body; /* taken over: the response is cleared without it */
        *len = resp.body_len;
        resp.body = NULL;
        resp.body_len = 0;
    } else if (rc == WEIR_OK) {
        weir_log(p->plugin, WEIR_LOG_DEBUG, "window probe: GET %s: HTTP %ld", what,
                 resp.status);
    } else {
        const char *code = json_string_value(json_object_get(failure, "code"));
        weir_log(p->plugin, WEIR_LOG_DEBUG, "window probe: GET %s: %s", what,
                 code ? code : "no response");
    }
    json_decref(failure);
    weir_http_response_clear(&resp);
    return body;
}

/* Ask the server once: GET {base}/models for vLLM's max_model_len of each
 * model, and when that gives none GET {root}/props for llama.cpp's n_ctx
 * ({root}: base_url without a trailing /v1).  Any failure leaves nothing. */
static void probe_ask(const pc_provider *p, json_t **windows, long *server_window) {
    *windows = NULL;
    *server_window = 0;
    const weir_api *api = weir__plugin_api;
    if (!WEIR_API_HAS(api, http_get) || !api->http_get) {
        weir_log(p->plugin, WEIR_LOG_DEBUG, "window probe: the host has no http_get (ABI < 1.4)");
        return;
    }
    long long deadline = now_ms() + p->probe_timeout_ms;
    size_t blen = strlen(p->base);
    char *url = malloc(blen + sizeof "/models");
    size_t len = 0;
    char *body = NULL;
    if (url) {
        snprintf(url, blen + sizeof "/models", "%s/models", p->base);
        body = probe_get(p, url, p->probe_timeout_ms, "/models", &len);
    }
    *windows = body ? pc_windows_from_models_body(body, len) : NULL;
    free(body);
    if (*windows && json_object_size(*windows) == 0) {
        json_decref(*windows);
        *windows = NULL;
    }
    long long left = deadline - now_ms();
    if (url && !*windows && left > 0) {
        size_t root = blen;
        if (root >= 3 && strcmp(p->base + root - 3, "/v1") == 0)
            root -= 3;
        snprintf(url, blen + sizeof "/models", "%.*s/props", (int)root, p->base);
        body = probe_get(p, url, (long)left, "/props", &len);
        *server_window = body ? pc_window_from_props_body(body, len) : 0;
        free(body);
    }
    free(url);
    weir_log(p->plugin, WEIR_LOG_DEBUG,
             "window probe: the server reported %zu model windows%s", json_object_size(*windows),
             *server_window ? " and a slot context (n_ctx)" : "");
}

/* The window the server reported for `model`, or 0; the first call asks
 * (without holding the mutex), later and concurrent ones wait and read. */
static long probe_window(const pc_provider *p, const char *model) {
    pc_probe *pr = p->probe;
    pthread_mutex_lock(&pr->mu);
    while (pr->state == PROBE_ASKING)
        pthread_cond_wait(&pr->cv, &pr->mu);
    if (pr->state == PROBE_NEW) {
        pr->state = PROBE_ASKING;
        pthread_mutex_unlock(&pr->mu);
        json_t *windows;
        long server_window;
        probe_ask(p, &windows, &server_window);
        pthread_mutex_lock(&pr->mu);
        pr->windows = windows;
        pr->server_window = server_window;
        pr->state = PROBE_DONE;
        pthread_cond_broadcast(&pr->cv);
    }
    json_t *w = json_object_get(pr->windows, model);
    long n = json_is_integer(w) ? (long)json_integer_value(w) : pr->server_window;
    pthread_mutex_unlock(&pr->mu);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Plugin and provider callbacks                                            */
/* ------------------------------------------------------------------------ */

/* agent/created: the agent's puts are tagged with its cancellation signal
 * (pc_prepare_call names it on the driver's thread); the call carries both. */
static json_t *on_created(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    weir_signal *signal = call ? weir_call_signal(call) : NULL;
    if (signal)
        (void)pc_cache_bind_agent(((pc_provider *)user_data)->cache, weir_call_agent(call),
                                  signal); /* out of memory: its entries go with the sweeps */
    return json_null(); /* a serial hook: a value, never a failure */
}

/* agent/disposed: the agent's entries go now, and its history with the
 * agent; what no tag covered goes with the next sweep (provider_cache.h). */
static json_t *on_disposed(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    pc_cache_release_agent(((pc_provider *)user_data)->cache, call ? weir_call_agent(call) : NULL);
    return NULL;
}

int pc_provider_init(weir_plugin *self, const pc_spec *spec, const weir_provider *vtable,
                     const json_t *config, weir_error *err) {
    pc_provider *p = calloc(1, sizeof *p);
    if (!p || !(p->id = strdup(weir_plugin_id(self)))) {
        free(p);
        return pc_set_err(err, WEIR_E_NOMEM, spec->plugin, "out of memory");
    }
    p->spec = spec;
    p->plugin = self;
    p->cache = pc_cache_new(PC_CACHE_MAX_ENTRIES, PC_CACHE_MAX_BYTES);
    int rc = p->cache ? parse_config(p, config, err)
                      : pc_set_err(err, WEIR_E_NOMEM, p->id, "out of memory");
    if (rc == WEIR_OK) {
        rc = weir_provider_register(self, vtable, p);
        if (rc != WEIR_OK)
            pc_set_err(err, rc, p->id, "cannot register provider \"%s\"", p->id);
    }
    if (rc == WEIR_OK) {
        weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
        opts.user_data = p;
        rc = weir_hook_register(self, "agent/created", on_created, &opts);
        if (rc != WEIR_OK)
            pc_set_err(err, rc, p->id, "cannot listen to agent/created");
    }
    if (rc == WEIR_OK) {
        weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
        opts.user_data = p;
        rc = weir_hook_register(self, "agent/disposed", on_disposed, &opts);
        if (rc != WEIR_OK)
            pc_set_err(err, rc, p->id, "cannot listen to agent/disposed");
    }
    if (rc != WEIR_OK) {
        provider_free(p);
        return rc;
    }
    weir_plugin_set_data(self, p);
    weir_log(self, WEIR_LOG_DEBUG, "provider registered (%zu models configured, window probe %s)",
             json_object_size(p->models), p->probe ? "on" : "off");
    return WEIR_OK;
}

void pc_provider_fini(weir_plugin *self) {
    provider_free(weir_plugin_data(self));
}

void pc_model_limits(const pc_provider *p, const char *model, long *context_window,
                     long *max_output) {
    *context_window = *max_output = 0;
    if (!p || !model || !model[0])
        return;
    json_t *entry = json_object_get(p->models, model);
    json_t *cw = json_object_get(entry, "context_window"), *mo = json_object_get(entry, "max_output");
    if (json_is_integer(cw))
        *context_window = (long)json_integer_value(cw);
    if (json_is_integer(mo))
        *max_output = (long)json_integer_value(mo);
    if (!*context_window && p->probe)
        *context_window = probe_window(p, model);
    const pc_model_entry *row = pc_model_table_find(model);
    if (!*context_window && row)
        *context_window = row->context_window;
    if (!*max_output && row)
        *max_output = *context_window && row->max_output > *context_window ? *context_window
                                                                            : row->max_output;
}

/*
 * The price of `model` as model_info reports it: the row's
 * models.<model>.price (checked at load) over the table's, every member
 * resolved (a missing or 0 cache price is the input price: never less than
 * what is billed), plus where it comes from.  New reference, or NULL when
 * neither knows one (or out of memory: no cost is shown, never a wrong one).
 */
static json_t *model_price(const pc_provider *p, const char *model) {
    const json_t *cfg = json_object_get(json_object_get(p->models, model), "price");
    const pc_model_entry *row = pc_model_table_find(model);
    double v[5];
    const char *source;
    if (cfg) {
        for (size_t i = 0; i < 5; i++)
            v[i] = json_number_value(json_object_get(cfg, price_members[i]));
        if (!json_object_get(cfg, "cached_input"))
            v[1] = v[0];
        source = "config";
    } else if (row && row->price.known) {
        v[0] = row->price.input;
        v[1] = row->price.cached_input;
        v[2] = row->price.cache_write_5m;
        v[3] = row->price.cache_write_1h;
        v[4] = row->price.output;
        source = pc_model_table_source;
    } else {
        return NULL;
    }
    for (size_t i = 2; i < 4; i++)
        if (v[i] <= 0)
            v[i] = v[0];
    json_t *price = json_pack("{s:f, s:f, s:f, s:f, s:f, s:s}", "input", v[0], "cached_input",
                              v[1], "cache_write_5m", v[2], "cache_write_1h", v[3], "output",
                              v[4], "source", source);
    return price;
}

json_t *pc_model_info(void *self, const char *model) {
    long cw, mo;
    pc_model_limits(self, model, &cw, &mo);
    json_t *price = self && model && model[0] ? model_price(self, model) : NULL;
    if (!cw && !mo && !price)
        return NULL;
    json_t *info = json_object();
    if (info && cw && json_object_set_new(info, "context_window", json_integer(cw)) != 0) {
        json_decref(info);
        info = NULL;
    }
    if (info && mo && json_object_set_new(info, "max_output", json_integer(mo)) != 0) {
        json_decref(info);
        info = NULL;
    }
    if (info && price && json_object_set(info, "price", price) != 0) {
        json_decref(info);
        info = NULL;
    }
    json_decref(price);
    return info;
}

int pc_prepare_call(const pc_spec *spec, void *self, const json_t *config, weir_signal *signal,
                    void **call, weir_error *err) {
    const pc_provider *p = self;
    if (call)
        *call = NULL;
    if (!p || !call)
        return pc_set_err(err, WEIR_E_INVAL, p ? p->id : spec->plugin,
                          "prepare_call: NULL argument");
    /* the request this thread builds next is the signal's agent's (its
     * cache entries are released when that agent is disposed) */
    pc_cache_set_owner(signal);
    if (signal && weir_signal_cancelled(signal))
        return pc_set_err(err, WEIR_E_CANCELLED, p->id, "prepare_call: cancelled");
    if (!json_is_object(config))
        return pc_set_err(err, WEIR_E_INVAL, p->id, "call config: expected an object");
    const char *model = json_string_value(json_object_get(config, "model"));
    json_t *max_tokens = json_object_get(config, "max_tokens");
    json_t *temperature = json_object_get(config, "temperature");
    if (!model || !model[0])
        return pc_set_err(err, WEIR_E_INVAL, p->id,
                          "call config: \"model\" must be a non-empty string");
    if (max_tokens && !json_is_null(max_tokens) &&
        (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1))
        return pc_set_err(err, WEIR_E_INVAL, p->id,
                          "call config: \"max_tokens\" must be a positive integer");
    if (temperature && !json_is_null(temperature) &&
        (!json_is_number(temperature) || json_number_value(temperature) < 0 ||
         json_number_value(temperature) > (double)spec->max_temperature))
        return pc_set_err(err, WEIR_E_INVAL, p->id,
                          "call config: \"temperature\" must be a number from 0 to %d",
                          spec->max_temperature);
    return WEIR_OK;
}

int pc_emit_chunk(void *user_data, json_t *chunk) {
    const pc_sink *sink = user_data;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (type && strcmp(type, "finish") == 0 && pc_scrub_json(&sink->p->secrets, chunk) != 0) {
        json_decref(chunk);
        return -1;
    }
    return weir_stream_emit(sink->st, chunk) == WEIR_OK ? 0 : -1;
}

/* The failure for a 2xx body that came instead of a stream.  The core
 * parses event streams and fails the call on other 2xx bodies but JSON, so
 * this is JSON (a host built before that collects any 2xx body that is not
 * text/event-stream: the text is checked): an error object sent with a 200
 * is classified as an in-band error; anything else is a server that
 * answered without streaming.  NULL when out of memory (the decoder then
 * says that the stream ended before its finish). */
static json_t *json_body_failure(const pc_provider *p, const weir_http_response *resp) {
    json_t *root = json_loadb(resp->body, resp->body_len, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *error = json_object_get(root, "error");
    bool is_json = root != NULL, has_error = error && !json_is_null(error);
    json_decref(root);
    if (has_error)
        return weir_failure_from_http(p->id, resp);
    char *shown = pc_show_bytes(resp->body, resp->body_len);
    json_t *f = shown ? weir_failure_new(p->id, "UNKNOWN",
                                         "HTTP %ld with a %s body (not an event stream: does "
                                         "the server stream?): %s",
                                         resp->status, is_json ? "JSON" : "non-JSON", shown)
                      : NULL;
    free(shown);
    if (f && json_object_set_new(f, "status", json_integer(resp->status)) != 0) {
        json_decref(f);
        f = NULL;
    }
    return f;
}

/* The failure for a transfer that ended without a finish chunk. */
static json_t *transfer_failure(const pc_provider *p, int rc, const weir_http_response *resp,
                                json_t *failure, bool aborted) {
    if (resp->status != 0 && (resp->status < 200 || resp->status > 299)) {
        json_decref(failure);
        json_t *f = weir_failure_from_http(p->id, resp);
        return f ? f : weir_failure_new(p->id, "UNKNOWN", "HTTP status %ld", resp->status);
    }
    if (rc == WEIR_OK) {
        json_decref(failure);
        if (resp->status && resp->body_len)
            return json_body_failure(p, resp);
        return NULL; /* the stream ended: the decoder says what was missing */
    }
    const char *msg = json_string_value(json_object_get(failure, "message"));
    if (msg && strncmp(msg, "cannot reach ", 13) == 0) { /* say where the URL comes from */
        /* the variable the default deployment reads, named only when it
         * holds this URL: another deployment (local.json reads
         * LOCAL_BASE_URL) may set base_url from anywhere */
        const char *env = p->spec->base_url_env;
        const char *val = env ? getenv(env) : NULL;
        size_t vlen = val ? strlen(val) : 0;
        while (vlen > 0 && val[vlen - 1] == '/')
            vlen--;
        if (!val || vlen != strlen(p->base) || strncmp(val, p->base, vlen) != 0)
            env = NULL;
        json_t *f = weir_failure_new(p->id, "TRANSPORT",
                                     "%s; is a server listening there? (the base_url of row "
                                     "'%s'%s%s)",
                                     msg, p->id,
                                     env ? "; set from " : "",
                                     env ? env : "");
        if (f) {
            json_decref(failure);
            return f;
        }
    }
    if (failure)
        return failure;
    return aborted ? weir_failure_new(p->id, "ABORTED", "the call was cancelled")
                   : weir_failure_new(p->id, "TRANSPORT", "the HTTP transfer failed (%d)", rc);
}

/* A non-streamed POST wants no events: an event stream is not its answer. */
static int ignore_event(void *ud, const char *event, const char *data, size_t len) {
    (void)ud;
    (void)event;
    (void)data;
    (void)len;
    return 0;
}

int pc_post_json(const pc_provider *p, weir_stream *st, const char *model, const char *path,
                 const char *text, size_t len, char **body, size_t *body_len,
                 json_t **failure) {
    *body = NULL;
    *body_len = 0;
    *failure = NULL;
    size_t ulen = strlen(p->base) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (!url)
        return WEIR_E_NOMEM;
    snprintf(url, ulen, "%s%s", p->base, path);
    weir_http_request req = {
        .struct_size = sizeof req,
        .url = url,
        .headers = headers_for(p, model),
        .body = text,
        .body_len = len,
        .connect_timeout_ms = p->connect_timeout_ms,
        .idle_timeout_ms = p->idle_timeout_ms,
        .total_timeout_ms = p->total_timeout_ms,
    };
    weir_http_response resp;
    memset(&resp, 0, sizeof resp);
    resp.retry_after_ms = -1;
    json_t *f = NULL;
    int rc = weir_http_sse(st, &req, ignore_event, NULL, &resp, &f);
    if (rc == WEIR_OK && resp.status >= 200 && resp.status < 300 && !f && !resp.body) {
        *failure = weir_failure_new(p->id, "TRANSPORT",
                                    "POST %s: the server answered %ld without a JSON body", url,
                                    resp.status);
        free(url);
        weir_http_response_clear(&resp);
        return *failure ? WEIR_OK : WEIR_E_NOMEM;
    }
    free(url);
    if (rc == WEIR_OK && resp.status >= 200 && resp.status < 300 && !f) {
        *body = strndup(resp.body, resp.body_len); /* the collected JSON (first 64 KiB) */
        *body_len = *body ? resp.body_len : 0;
    } else {
        bool aborted = weir_signal_cancelled(weir_stream_signal(st));
        *failure = transfer_failure(p, rc, &resp, f, aborted);
        if (!*failure)
            rc = WEIR_E_NOMEM;
    }
    weir_http_response_clear(&resp);
    return *body || *failure ? WEIR_OK : WEIR_E_NOMEM;
}

/* New NULL-terminated list (owned: the list and the lines it made; free
 * with free_headers): `base` with the header `extra` ("Name: value") joined
 * to a same-named one as ", value" (a list-valued header such as
 * anthropic-beta), else appended.  NULL when out of memory. */
static char **headers_with(const char *const *base, const char *extra, bool **made) {
    size_t n = 0, nlen = strcspn(extra, ":");
    while (base && base[n])
        n++;
    char **out = calloc(n + 2, sizeof *out);
    *made = calloc(n + 2, sizeof **made);
    if (!out || !*made) {
        free(out);
        free(*made);
        *made = NULL;
        return NULL;
    }
    bool joined = false;
    for (size_t i = 0; i < n; i++) {
        out[i] = (char *)(uintptr_t)base[i];
        if (!joined && strncasecmp(base[i], extra, nlen) == 0 && base[i][nlen] == ':') {
            size_t l = strlen(base[i]) + strlen(extra + nlen + 1) + 2;
            char *line = malloc(l);
            if (!line)
                goto oom;
            snprintf(line, l, "%s,%s", base[i], extra + nlen + 1);
            out[i] = line;
            (*made)[i] = true;
            joined = true;
        }
    }
    if (!joined) {
        if (!(out[n] = strdup(extra)))
            goto oom;
        (*made)[n] = true;
    }
    return out;
oom:
    for (size_t i = 0; i <= n; i++)
        if ((*made)[i])
            free(out[i]);
    free(out);
    free(*made);
    *made = NULL;
    return NULL;
}

static void free_headers(char **h, bool *made) {
    for (size_t i = 0; h && h[i]; i++)
        if (made[i])
            free(h[i]);
    free(h);
    free(made);
}

int pc_stream_run(const pc_provider *p, weir_stream *st, const char *model, const char *text,
                  size_t len, char *msg, size_t msg_size, void *decoder, const pc_codec *codec) {
    return pc_stream_run_ex(p, st, model, NULL, text, len, msg, msg_size, decoder, codec);
}

int pc_stream_run_ex(const pc_provider *p, weir_stream *st, const char *model, const char *extra,
                     const char *text, size_t len, char *msg, size_t msg_size, void *decoder,
                     const pc_codec *codec) {
    int end;
    bool *made = NULL;
    char **own = extra && text ? headers_with(headers_for(p, model), extra, &made) : NULL;
    if (extra && text && !own) {
        text = NULL;
        snprintf(msg, msg_size, "out of memory");
    }
    if (!text) {
        const char *code = strcmp(msg, "out of memory") == 0 ? "UNKNOWN" : "INVALID_REQUEST";
        end = codec->end(
            decoder, weir_failure_new(p->id, code, "cannot translate the request: %s", msg),
            false);
    } else {
        weir_http_request req = {
            .struct_size = sizeof req,
            .url = p->url,
            .headers = own ? (const char *const *)own : headers_for(p, model),
            .body = text,
            .body_len = len,
            .connect_timeout_ms = p->connect_timeout_ms,
            .idle_timeout_ms = p->idle_timeout_ms,
            .total_timeout_ms = p->total_timeout_ms,
        };
        weir_http_response resp;
        memset(&resp, 0, sizeof resp);
        resp.retry_after_ms = -1;
        json_t *failure = NULL;
        int rc = weir_http_sse(st, &req, codec->on_event, decoder, &resp, &failure);
        if (codec->done(decoder)) {
            json_decref(failure);
            end = codec->end(decoder, NULL, false);
        } else {
            bool aborted = weir_signal_cancelled(weir_stream_signal(st));
            end = codec->end(decoder, transfer_failure(p, rc, &resp, failure, aborted),
                             aborted);
        }
        weir_http_response_clear(&resp);
    }
    free_headers(own, made);
    return end == 0 ? WEIR_OK : WEIR_E_NOMEM;
}
