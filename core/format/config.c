/*
 * core/format/config.c - deployment config composition (docs/plugins.md, docs/cli.md).
 *
 * Each file goes through the same steps: parse, check the top-level keys,
 * expand ${VAR} / ${VAR:-default} / $$ in every string, validate the shape,
 * normalise (`~/` in session.dir, empty plugin_path entries, relative
 * plugin_path directories made relative to the file's own directory), then
 * merge into the composed object.  Every error names the file and the JSON
 * path.
 * docs/config.md states the rules for users.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "idmap.h"
#include "otlp.h"
#include "weir/host.h"

#define DEFAULT_LABEL "(built-in default)"
#define DEFAULT_SESSION_DIR "${WEIR_SESSION_DIR:-~/.local/state/weir/sessions}"
#define MAX_DEPTH 1024 /* nesting walked by the expander */
#define MAX_ROWS 4096  /* plugin rows per file and per deployment */

static const char *const top_keys[] = {"agent",   "session", "telemetry", "plugin_path",
                                       "plugins", "$schema", "comment"};
static const char *const row_keys[] = {"id",     "plugin",       "config",   "disabled",
                                       "before", "after",        "on_error", "max_failures",
                                       "budget_ms", "share_roles"};
/* the fault policy keys (docs/config.md, docs/hooks.md): an overlay row sets them */
static const char *const policy_keys[] = {"on_error", "max_failures", "budget_ms"};
/* the keys of agent and session (docs/config.md): anything else is a typo */
static const char *const agent_keys[] = {"provider",
                                         "model",
                                         "max_tokens",
                                         "temperature",
                                         "max_parallel_tool_calls",
                                         "max_background_jobs",
                                         "max_input_chars"};
static const char *const session_keys[] = {"dir", "fsync", "store", "checkpoint_bytes",
                                           "provenance"};
/* the keys of telemetry (docs/telemetry.md) */
static const char *const telemetry_keys[] = {"enabled",   "endpoint",   "headers",
                                             "capture_content", "max_queue", "batch_ms",
                                             "timeout_ms", "service_name"};
#define KNOWN_TOP "agent, session, telemetry, plugin_path, plugins, $schema, comment"
#define KNOWN_ROW                                                                          \
    "id, plugin, config, disabled, before, after, on_error, max_failures, budget_ms, "    \
    "share_roles"
#define POLICY_MAX 86400000 /* max_failures and budget_ms */

/* ---- JSON paths and errors ---------------------------------------------- */

/* A JSON path being walked ("$.plugins[0].config"), truncated when huge. */
typedef struct jpath {
    char buf[384];
    size_t len;
} jpath;

static void path_init(jpath *p) {
    p->buf[0] = '$';
    p->buf[1] = '\0';
    p->len = 1;
}

static void path_restore(jpath *p, size_t len) {
    p->len = len;
    p->buf[len] = '\0';
}

/* Account for `n` characters written by snprintf into the remaining room. */
static void path_advance(jpath *p, int n) {
    size_t room = sizeof p->buf - p->len;
    if (n > 0)
        p->len += (size_t)n < room ? (size_t)n : room - 1;
}

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Append `.key` (or `["key"]` for unusual keys); returns the old length. */
static size_t path_key(jpath *p, const char *key) {
    size_t old = p->len, room = sizeof p->buf - p->len;
    bool plain = *key != '\0';
    for (const char *c = key; *c && plain; c++)
        plain = is_word_char(*c) || *c == '-' || *c == '$';
    path_advance(p, plain ? snprintf(p->buf + old, room, ".%s", key)
                          : snprintf(p->buf + old, room, "[\"%s\"]", key));
    return old;
}

/* Append `[index]`; returns the old length. */
static size_t path_index(jpath *p, size_t index) {
    size_t old = p->len;
    path_advance(p, snprintf(p->buf + old, sizeof p->buf - old, "[%zu]", index));
    return old;
}

/* "config FILE: PATH: message" with `code`. */
WEIR_PRINTF(5, 6)
static int cfg_err(weir_error *err, int code, const char *file, const jpath *p,
                   const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return weir__err(err, code, NULL, NULL, "config %s: %s: %s", file, p->buf, msg);
}

static int nomem(weir_error *err, const char *file) {
    return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "config %s: out of memory", file);
}

static const char *type_name(const json_t *v) {
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

static int type_err(weir_error *err, const char *file, const jpath *p, const char *want,
                    const json_t *got) {
    return cfg_err(err, WEIR_E_CONFIG, file, p, "expected %s, got %s", want, type_name(got));
}

/* ---- ${VAR} expansion ---------------------------------------------------- */

/* A growable string. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static int sb_add(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *np = weir__realloc(b->p, cap);
        if (!np)
            return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* Whether NUL-terminated `s` is well-formed UTF-8 (no overlongs, no surrogates). */
static bool utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned long c = *p;
        size_t n;
        unsigned long min;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1, c &= 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2, c &= 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3, c &= 0x07, min = 0x10000;
        } else {
            return false;
        }
        for (size_t k = 1; k <= n; k++) {
            if ((p[k] & 0xC0) != 0x80)
                return false;
            c = (c << 6) | (p[k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return false;
        p += n + 1;
    }
    return true;
}

/*
 * Expand one `${...}` reference starting at s[*i] == '$', s[*i+1] == '{',
 * appending its value to `b` and advancing *i past the closing brace.
 */
static int expand_ref(sbuf *b, const char *s, size_t n, size_t *i, const char *file,
                      const jpath *p, weir_error *err) {
    size_t start = *i + 2, j = start;
    while (j < n && is_word_char(s[j]))
        j++;
    size_t frag = n - *i < 40 ? n - *i : 40; /* shown in messages */
    if (j == start || (s[start] >= '0' && s[start] <= '9') || j >= n ||
        (s[j] != '}' && (s[j] != ':' || j + 1 >= n || s[j + 1] != '-')))
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "malformed variable reference \"%.*s\" (expected ${NAME} or "
                       "${NAME:-default}; write $$ for a literal $)",
                       (int)frag, s + *i);
    const char *dflt = NULL;
    size_t dlen = 0, end = j; /* end: index of the closing brace */
    if (s[j] == ':') {
        dflt = s + j + 2;
        const char *close = memchr(dflt, '}', n - (j + 2));
        if (!close)
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           "malformed variable reference \"%.*s\" (no closing '}')",
                           (int)frag, s + *i);
        dlen = (size_t)(close - dflt);
        for (size_t k = 0; k + 1 < dlen; k++)
            if (dflt[k] == '$' && dflt[k + 1] == '{')
                return cfg_err(err, WEIR_E_CONFIG, file, p,
                               "malformed variable reference \"%.*s\" (a default cannot "
                               "contain another ${...})",
                               (int)frag, s + *i);
        end = (size_t)(close - s);
    }
    char *name = weir__strndup(s + start, j - start);
    if (!name)
        return nomem(err, file);
    const char *val = getenv(name);
    int rc = WEIR_OK;
    if (dflt && (!val || !*val)) {
        if (sb_add(b, dflt, dlen) != 0)
            rc = nomem(err, file);
    } else if (!val) {
        rc = cfg_err(err, WEIR_E_CONFIG, file, p, "variable %s is not set", name);
    } else if (!utf8_valid(val)) {
        rc = cfg_err(err, WEIR_E_CONFIG, file, p, "variable %s is not valid UTF-8", name);
    } else if (sb_add(b, val, strlen(val)) != 0) {
        rc = nomem(err, file);
    }
    weir__free(name);
    *i = end + 1;
    return rc;
}

/* Expand the references in string value `str` in place. */
static int expand_string(json_t *str, const char *file, const jpath *p, weir_error *err) {
    const char *s = json_string_value(str);
    size_t n = json_string_length(str);
    if (!memchr(s, '$', n))
        return WEIR_OK;
    sbuf b = {0};
    int rc = WEIR_OK;
    size_t i = 0;
    while (rc == WEIR_OK && i < n) {
        const char *d = memchr(s + i, '$', n - i);
        size_t lit = d ? (size_t)(d - (s + i)) : n - i;
        if (sb_add(&b, s + i, lit) != 0) {
            rc = nomem(err, file);
            break;
        }
        i += lit;
        if (!d)
            break;
        if (i + 1 < n && s[i + 1] == '{') {
            rc = expand_ref(&b, s, n, &i, file, p, err);
        } else { /* "$$" is one '$'; a lone '$' stays as it is */
            if (sb_add(&b, "$", 1) != 0)
                rc = nomem(err, file);
            i += (i + 1 < n && s[i + 1] == '$') ? 2 : 1;
        }
    }
    if (rc == WEIR_OK && json_string_setn(str, b.p ? b.p : "", b.len) != 0)
        rc = nomem(err, file);
    weir__free(b.p);
    return rc;
}

static int expand_walk(json_t *v, const char *file, jpath *p, int depth, weir_error *err) {
    if (depth > MAX_DEPTH)
        return cfg_err(err, WEIR_E_CONFIG, file, p, "nested deeper than %d levels",
                       MAX_DEPTH);
    if (json_is_string(v))
        return expand_string(v, file, p, err);
    if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            size_t old = path_key(p, key);
            int rc = expand_walk(val, file, p, depth + 1, err);
            path_restore(p, old);
            if (rc != WEIR_OK)
                return rc;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            size_t old = path_index(p, i);
            int rc = expand_walk(json_array_get(v, i), file, p, depth + 1, err);
            path_restore(p, old);
            if (rc != WEIR_OK)
                return rc;
        }
    }
    return WEIR_OK;
}

int weir__config_expand(json_t *v, const char *file, weir_error *err) {
    if (!v)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "config: NULL value to expand");
    if (!file)
        file = "(config)";
    jpath p;
    path_init(&p);
    if (!json_is_object(v))
        return expand_walk(v, file, &p, 0, err);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "$schema") == 0 || strcmp(key, "comment") == 0)
            continue;
        size_t old = path_key(&p, key);
        int rc = expand_walk(val, file, &p, 1, err);
        path_restore(&p, old);
        if (rc != WEIR_OK)
            return rc;
    }
    return WEIR_OK;
}

/* ---- validation ---------------------------------------------------------- */

/* jansson's iteration takes a non-const object; iterating does not modify it. */
static json_t *unconst(const json_t *v) {
    union {
        const json_t *c;
        json_t *m;
    } u = {v};
    return u.m;
}

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

static bool valid_id(const char *id) {
    if (!*id)
        return false;
    for (const char *c = id; *c; c++)
        if (!is_word_char(*c) && *c != '.' && *c != '-')
            return false;
    return true;
}

bool weir__role_name_valid(const char *role) {
    if (!role || !((*role >= 'a' && *role <= 'z') || (*role >= '0' && *role <= '9')))
        return false;
    size_t n = 0;
    for (const char *c = role; *c; c++, n++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '_' || *c == '-'))
            return false;
    return n <= 31;
}

/* "share_roles" of a row, when given: an array of role names, each once. */
static int check_share_roles(const json_t *row, const char *file, jpath *p, weir_error *err) {
    const json_t *v = json_object_get(row, "share_roles");
    if (!v)
        return WEIR_OK;
    size_t old = path_key(p, "share_roles");
    if (!json_is_array(v))
        return type_err(err, file, p, "an array of role names", v);
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *r = json_array_get(v, i);
        size_t at = path_index(p, i);
        if (!json_is_string(r))
            return type_err(err, file, p, "a string", r);
        if (!weir__role_name_valid(json_string_value(r)))
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           "\"%.64s\" is not a role name ([a-z0-9][a-z0-9._-]*, at most 31 "
                           "characters)",
                           json_string_value(r));
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(v, j), unconst(r)))
                return cfg_err(err, WEIR_E_CONFIG, file, p, "role \"%s\" is listed twice",
                               json_string_value(r));
        path_restore(p, at);
    }
    path_restore(p, old);
    return WEIR_OK;
}

/* The edit distance of `a` and `b` (insert, delete, replace, swap of two
 * neighbours), or a number > `limit` once it exceeds it; keys are short. */
static size_t edit_distance(const char *a, const char *b, size_t limit) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return limit + 1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

const char *weir__config_suggest(const char *word, const char *const *list, size_t n) {
    if (!word)
        return NULL;
    /* close: at most 2 edits, and fewer than a third of the word for short ones */
    size_t len = strlen(word), limit = len < 6 ? 1 : 2, best = limit + 1;
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t dist = list[i] ? edit_distance(word, list[i], limit) : limit + 1;
        if (dist < best) {
            best = dist;
            found = list[i];
        }
    }
    return found;
}

/* Every key of the object `obj` at `p` is one of `list` (`known`: the list
 * as text); an unknown one is an error naming it, with the closest key. */
static int check_keys(const json_t *obj, const char *const *list, size_t n, const char *known,
                      const char *file, const jpath *p, weir_error *err) {
    const char *key;
    const json_t *val;
    json_object_foreach(unconst(obj), key, val) {
        if (in_list(key, list, n))
            continue;
        const char *near = weir__config_suggest(key, list, n);
        if (near)
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           "unknown key \"%.64s\"; did you mean \"%s\"? (known: %s)", key, near,
                           known);
        return cfg_err(err, WEIR_E_CONFIG, file, p, "unknown key \"%.64s\" (known: %s)", key,
                       known);
    }
    return WEIR_OK;
}

/* The root is an object whose keys are all known. */
static int check_top(const json_t *doc, const char *file, weir_error *err) {
    jpath p;
    path_init(&p);
    if (!json_is_object(doc))
        return cfg_err(err, WEIR_E_CONFIG, file, &p, "the root must be an object, not %s",
                       type_name(doc));
    const char *key;
    const json_t *val;
    json_object_foreach(unconst(doc), key, val) {
        if (in_list(key, top_keys, sizeof top_keys / sizeof top_keys[0]))
            continue;
        const char *near = weir__config_suggest(key, top_keys, sizeof top_keys / sizeof top_keys[0]);
        if (near)
            return cfg_err(err, WEIR_E_CONFIG, file, &p,
                           "unknown top-level key \"%.64s\"; did you mean \"%s\"? (known: " KNOWN_TOP
                           ")",
                           key, near);
        return cfg_err(err, WEIR_E_CONFIG, file, &p,
                       "unknown top-level key \"%.64s\" (known: " KNOWN_TOP ")", key);
    }
    return WEIR_OK;
}

/* Member `key` of `obj`, if present, is a string; its path is reported on error. */
static int want_string(const json_t *obj, const char *key, const char *file, jpath *p,
                       weir_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_string(v))
        return WEIR_OK;
    path_key(p, key);
    return type_err(err, file, p, "a string", v);
}

/* Member `key` of `obj`, if present, is an integer >= 1. */
static int want_count(const json_t *obj, const char *key, const char *file, jpath *p,
                      weir_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || (json_is_integer(v) && json_integer_value(v) >= 1))
        return WEIR_OK;
    path_key(p, key);
    if (json_is_integer(v))
        return cfg_err(err, WEIR_E_CONFIG, file, p, "must be an integer >= 1, got %" JSON_INTEGER_FORMAT,
                       json_integer_value(v));
    return type_err(err, file, p, "an integer >= 1", v);
}

static int check_agent(const json_t *agent, const char *file, jpath *p, weir_error *err) {
    if (!json_is_object(agent))
        return type_err(err, file, p, "an object", agent);
    int rc = check_keys(agent, agent_keys, sizeof agent_keys / sizeof agent_keys[0],
                        "provider, model, max_tokens, temperature, max_parallel_tool_calls, "
                        "max_background_jobs, max_input_chars",
                        file, p, err);
    if (rc != WEIR_OK)
        return rc;
    if ((rc = want_string(agent, "provider", file, p, err)) != WEIR_OK ||
        (rc = want_string(agent, "model", file, p, err)) != WEIR_OK ||
        (rc = want_count(agent, "max_tokens", file, p, err)) != WEIR_OK ||
        (rc = want_count(agent, "max_parallel_tool_calls", file, p, err)) != WEIR_OK ||
        (rc = want_count(agent, "max_background_jobs", file, p, err)) != WEIR_OK)
        return rc;
    return WEIR_OK;
}

static int check_session(const json_t *session, const char *file, jpath *p,
                         weir_error *err) {
    if (!json_is_object(session))
        return type_err(err, file, p, "an object", session);
    int rc = check_keys(session, session_keys, sizeof session_keys / sizeof session_keys[0],
                        "dir, fsync, store, checkpoint_bytes, provenance", file, p, err);
    if (rc != WEIR_OK)
        return rc;
    rc = want_string(session, "dir", file, p, err);
    if (rc != WEIR_OK)
        return rc;
    if ((rc = want_string(session, "fsync", file, p, err)) != WEIR_OK)
        return rc;
    const char *fsync = weir__json_str(session, "fsync", NULL);
    if (fsync && strcmp(fsync, "always") != 0 && strcmp(fsync, "step") != 0 &&
        strcmp(fsync, "none") != 0) {
        path_key(p, "fsync");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "must be \"always\", \"step\" or \"none\", got \"%.64s\"", fsync);
    }
    if ((rc = want_string(session, "store", file, p, err)) != WEIR_OK)
        return rc;
    const char *store = weir__json_str(session, "store", NULL);
    if (store && !*store) {
        path_key(p, "store");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "must name a store: \"file\", \"memory\" or a plugin row id");
    }
    if ((rc = want_count(session, "checkpoint_bytes", file, p, err)) != WEIR_OK)
        return rc;
    if ((rc = want_string(session, "provenance", file, p, err)) != WEIR_OK)
        return rc;
    const char *prov = weir__json_str(session, "provenance", NULL);
    if (prov && strcmp(prov, "decisions") != 0 && strcmp(prov, "all") != 0 &&
        strcmp(prov, "off") != 0) {
        path_key(p, "provenance");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "must be \"decisions\", \"all\" or \"off\", got \"%.64s\"", prov);
    }
    return WEIR_OK;
}

/* Member `key` of `obj`, if present, is true or false. */
static int want_bool(const json_t *obj, const char *key, const char *file, jpath *p,
                     weir_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_boolean(v))
        return WEIR_OK;
    path_key(p, key);
    return type_err(err, file, p, "true or false", v);
}

static int check_telemetry(const json_t *tel, const char *file, jpath *p, weir_error *err) {
    if (!json_is_object(tel))
        return type_err(err, file, p, "an object", tel);
    int rc = check_keys(tel, telemetry_keys, sizeof telemetry_keys / sizeof telemetry_keys[0],
                        "enabled, endpoint, headers, capture_content, max_queue, batch_ms, "
                        "timeout_ms, service_name",
                        file, p, err);
    if (rc != WEIR_OK || (rc = want_bool(tel, "enabled", file, p, err)) != WEIR_OK ||
        (rc = want_bool(tel, "capture_content", file, p, err)) != WEIR_OK ||
        (rc = want_string(tel, "endpoint", file, p, err)) != WEIR_OK ||
        (rc = want_string(tel, "service_name", file, p, err)) != WEIR_OK ||
        (rc = want_count(tel, "max_queue", file, p, err)) != WEIR_OK ||
        (rc = want_count(tel, "batch_ms", file, p, err)) != WEIR_OK ||
        (rc = want_count(tel, "timeout_ms", file, p, err)) != WEIR_OK)
        return rc;
    const char *endpoint = weir__json_str(tel, "endpoint", NULL);
    if (endpoint && !weir__otlp_url_valid(endpoint)) {
        path_key(p, "endpoint");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "expected an http:// or https:// URL (the OTLP/HTTP endpoint; spans go "
                       "to {endpoint}/v1/traces), got \"%.200s\"",
                       endpoint);
    }
    const char *service = weir__json_str(tel, "service_name", NULL);
    if (service && !*service) {
        path_key(p, "service_name");
        return cfg_err(err, WEIR_E_CONFIG, file, p, "must not be empty");
    }
    const json_t *headers = json_object_get(tel, "headers");
    if (!headers)
        return WEIR_OK;
    path_key(p, "headers");
    if (!json_is_object(headers))
        return type_err(err, file, p, "an object of header names to strings", headers);
    const char *name;
    const json_t *v;
    json_object_foreach(unconst(headers), name, v) {
        bool bad_name = !*name || strpbrk(name, ":\r\n ") != NULL;
        if (bad_name || !json_is_string(v) || strpbrk(json_string_value(v), "\r\n")) {
            path_key(p, name);
            /* the value may be a secret: never shown */
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           bad_name ? "not a valid header name"
                                    : "expected a string of one line (the value is not shown)");
        }
    }
    return WEIR_OK;
}

static int check_plugin_path(const json_t *pp, const char *file, jpath *p, weir_error *err) {
    if (!json_is_array(pp))
        return type_err(err, file, p, "an array of strings", pp);
    for (size_t i = 0; i < json_array_size(pp); i++) {
        const json_t *v = json_array_get(pp, i);
        if (!json_is_string(v)) {
            path_index(p, i);
            return type_err(err, file, p, "a string", v);
        }
    }
    return WEIR_OK;
}

/* Check row i of `rows`; `seen` maps the ids of the rows before it to their
 * index (the first of each). */
static int check_row(const json_t *rows, size_t i, const weir__idmap *seen, const char *file,
                     jpath *p, weir_error *err) {
    const json_t *row = json_array_get(rows, i);
    if (!json_is_object(row))
        return type_err(err, file, p, "an object", row);
    const char *key;
    const json_t *val;
    json_object_foreach(unconst(row), key, val) {
        if (!in_list(key, row_keys, sizeof row_keys / sizeof row_keys[0]))
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           "unknown key \"%.64s\" (known: " KNOWN_ROW ")", key);
    }
    const json_t *id = json_object_get(row, "id");
    if (!id)
        return cfg_err(err, WEIR_E_CONFIG, file, p, "missing \"id\"");
    int rc;
    if ((rc = want_string(row, "id", file, p, err)) != WEIR_OK)
        return rc;
    if (!valid_id(json_string_value(id))) {
        path_key(p, "id");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "\"%.64s\" is not a valid plugin id (use letters, digits, '_', '.', "
                       "'-')",
                       json_string_value(id));
    }
    const weir__idmap_slot *other = weir__idmap_get(seen, json_string_value(id));
    if (other) {
        path_key(p, "id");
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "duplicate plugin id \"%s\" (also at $.plugins[%zu])", other->key,
                       other->num);
    }
    if ((rc = want_string(row, "plugin", file, p, err)) != WEIR_OK ||
        (rc = want_string(row, "before", file, p, err)) != WEIR_OK ||
        (rc = want_string(row, "after", file, p, err)) != WEIR_OK)
        return rc;
    const json_t *cfg = json_object_get(row, "config");
    if (cfg && !json_is_object(cfg)) {
        path_key(p, "config");
        return type_err(err, file, p, "an object", cfg);
    }
    const json_t *disabled = json_object_get(row, "disabled");
    if (disabled && !json_is_boolean(disabled)) {
        path_key(p, "disabled");
        return type_err(err, file, p, "a boolean", disabled);
    }
    if (json_object_get(row, "before") && json_object_get(row, "after"))
        return cfg_err(err, WEIR_E_CONFIG, file, p,
                       "\"before\" and \"after\" cannot both be given");
    if ((rc = want_string(row, "on_error", file, p, err)) != WEIR_OK ||
        (rc = want_count(row, "max_failures", file, p, err)) != WEIR_OK ||
        (rc = want_count(row, "budget_ms", file, p, err)) != WEIR_OK)
        return rc;
    if ((rc = check_share_roles(row, file, p, err)) != WEIR_OK)
        return rc;
    const char *on_error = weir__json_str(row, "on_error", NULL);
    if (on_error && strcmp(on_error, "fail") != 0 && strcmp(on_error, "skip") != 0) {
        path_key(p, "on_error");
        return cfg_err(err, WEIR_E_CONFIG, file, p, "must be \"fail\" or \"skip\", got \"%.64s\"",
                       on_error);
    }
    for (size_t k = 1; k < sizeof policy_keys / sizeof policy_keys[0]; k++) {
        const json_t *v = json_object_get(row, policy_keys[k]);
        if (v && json_integer_value(v) > POLICY_MAX) {
            path_key(p, policy_keys[k]);
            return cfg_err(err, WEIR_E_CONFIG, file, p,
                           "must be at most %d, got %" JSON_INTEGER_FORMAT, POLICY_MAX,
                           json_integer_value(v));
        }
    }
    return WEIR_OK;
}

/* Set the policy keys `row` gives on `target`; -1 when out of memory. */
static int copy_policy(json_t *target, const json_t *row) {
    for (size_t k = 0; k < sizeof policy_keys / sizeof policy_keys[0]; k++) {
        json_t *v = json_object_get(row, policy_keys[k]);
        if (v && json_object_set(target, policy_keys[k], v) != 0)
            return -1;
    }
    /* the roles the row shares (docs/plugins.md, "Roles") go with the policy */
    json_t *share = json_object_get(row, "share_roles");
    if (share && json_object_set(target, "share_roles", share) != 0)
        return -1;
    return 0;
}

static int check_plugins(const json_t *rows, const char *file, jpath *p, weir_error *err) {
    if (!json_is_array(rows))
        return type_err(err, file, p, "an array", rows);
    if (json_array_size(rows) > MAX_ROWS)
        return cfg_err(err, WEIR_E_CONFIG, file, p, "more than %d plugin rows", MAX_ROWS);
    weir__idmap seen = WEIR__IDMAP_INIT; /* id -> index: no search per row */
    int rc = WEIR_OK;
    for (size_t i = 0; i < json_array_size(rows) && rc == WEIR_OK; i++) {
        size_t old = path_index(p, i);
        rc = check_row(rows, i, &seen, file, p, err);
        path_restore(p, old);
        /* the key is borrowed from the row, which outlives the map */
        if (rc == WEIR_OK &&
            weir__idmap_put(&seen, json_string_value(json_object_get(json_array_get(rows, i),
                                                                     "id")),
                            NULL, i) != WEIR_OK)
            rc = nomem(err, file);
    }
    weir__idmap_free(&seen);
    return rc;
}

int weir__config_validate(const json_t *config, const char *file, weir_error *err) {
    if (!file)
        file = "(config)";
    int rc = check_top(config, file, err);
    if (rc != WEIR_OK)
        return rc;
    static const struct {
        const char *key;
        int (*check)(const json_t *, const char *, jpath *, weir_error *);
    } sections[] = {{"agent", check_agent},
                    {"session", check_session},
                    {"telemetry", check_telemetry},
                    {"plugin_path", check_plugin_path},
                    {"plugins", check_plugins}};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        const json_t *v = json_object_get(config, sections[i].key);
        if (!v)
            continue;
        jpath p;
        path_init(&p);
        path_key(&p, sections[i].key);
        if ((rc = sections[i].check(v, file, &p, err)) != WEIR_OK)
            return rc;
    }
    const json_t *schema = json_object_get(config, "$schema");
    if (schema && !json_is_string(schema)) {
        jpath p;
        path_init(&p);
        path_key(&p, "$schema");
        return type_err(err, file, &p, "a string", schema);
    }
    return WEIR_OK;
}

/* ---- merging ------------------------------------------------------------- */

/* The object member `key` of `base`, created empty when absent; NULL on OOM. */
static json_t *section(json_t *base, const char *key, json_t *(*make)(void)) {
    json_t *v = json_object_get(base, key);
    if (v)
        return v;
    v = make();
    if (!v || json_object_set_new(base, key, v) != 0)
        return NULL;
    return v;
}

/*
 * The composed rows while one file merges into them: a doubly linked list
 * (over node indices; node 0 is the head sentinel) indexed by id, so that
 * finding, replacing, removing and placing a row are O(1) and a merge is
 * linear in the rows (issue #8, item 10d).  Each node holds a reference to
 * its row; the id keys are borrowed from the rows.
 */
typedef struct mnode {
    json_t *row; /* NULL for the sentinel and removed nodes */
    size_t prev, next;
} mnode;

typedef struct merger {
    mnode *v;
    size_t n, cap, count; /* count: rows in the list */
    weir__idmap ids;      /* id -> node index (num) */
} merger;

static void m_unlink(merger *m, size_t k) {
    m->v[m->v[k].prev].next = m->v[k].next;
    m->v[m->v[k].next].prev = m->v[k].prev;
    m->count--;
}

/* Link node k after node `at` (0: at the head). */
static void m_link_after(merger *m, size_t k, size_t at) {
    m->v[k].prev = at;
    m->v[k].next = m->v[at].next;
    m->v[m->v[at].next].prev = k;
    m->v[at].next = k;
    m->count++;
}

/* A new unlinked node for `row` (reference stolen on success); 0 on OOM
 * (also the index of the sentinel, the first node made). */
static size_t m_node(merger *m, json_t *row) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        mnode *v = weir__realloc(m->v, cap * sizeof *v);
        if (!v)
            return 0;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n] = (mnode){row, 0, 0};
    return m->n++;
}

/* Node of row `id`, or 0. */
static size_t m_find(const merger *m, const char *id) {
    const weir__idmap_slot *s = weir__idmap_get(&m->ids, id);
    return s ? s->num : 0;
}

static void m_free(merger *m) {
    for (size_t k = 1; k < m->n; k++)
        json_decref(m->v[k].row);
    weir__free(m->v);
    weir__idmap_free(&m->ids);
}

/* The list of `rows` (the first row of each id is the one found). */
static int m_init(merger *m, const json_t *rows) {
    *m = (merger){0};
    m_node(m, NULL); /* the sentinel: node 0, linked to itself */
    if (m->n != 1)
        return WEIR_E_NOMEM;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        size_t k = m_node(m, json_incref(row));
        if (k == 0) {
            json_decref(row);
            return WEIR_E_NOMEM;
        }
        m_link_after(m, k, m->v[0].prev);
        const char *id = json_string_value(json_object_get(row, "id"));
        if (id && !weir__idmap_get(&m->ids, id) &&
            weir__idmap_put(&m->ids, id, NULL, k) != WEIR_OK)
            return WEIR_E_NOMEM;
    }
    return WEIR_OK;
}

/* The list as a new array (NULL on OOM). */
static json_t *m_rows(const merger *m) {
    json_t *a = json_array();
    for (size_t k = m->v[0].next; a && k != 0; k = m->v[k].next)
        if (json_array_append(a, m->v[k].row) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* Merge overlay row number `i` (validated) into the list. */
static int merge_row(merger *m, json_t *row, size_t i, const char *file, weir_error *err) {
    jpath p;
    path_init(&p);
    path_key(&p, "plugins");
    path_index(&p, i);
    const char *id = json_string_value(json_object_get(row, "id"));
    size_t at = m_find(m, id);
    if (json_is_true(json_object_get(row, "disabled"))) {
        if (at) {
            m_unlink(m, at);
            weir__idmap_del(&m->ids, id);
            json_decref(m->v[at].row);
            m->v[at].row = NULL;
        }
        return WEIR_OK;
    }
    const char *place = json_object_get(row, "before") ? "before" : "after";
    const char *anchor = weir__json_str(row, place, NULL);
    if (anchor && strcmp(anchor, id) == 0) {
        path_key(&p, place);
        return cfg_err(err, WEIR_E_CONFIG, file, &p, "row \"%s\" cannot be placed %s itself",
                       id, place);
    }
    if (anchor && !m_find(m, anchor)) {
        path_key(&p, place);
        return cfg_err(err, WEIR_E_CONFIG, file, &p, "unknown plugin id \"%s\"", anchor);
    }
    json_t *plugin = json_object_get(row, "plugin");
    json_t *cfg = json_object_get(row, "config");
    if (at) { /* existing row: replace plugin/config, maybe move it */
        json_t *target = m->v[at].row;
        if ((plugin && json_object_set(target, "plugin", plugin) != 0) ||
            (cfg && json_object_set(target, "config", cfg) != 0) || copy_policy(target, row))
            return nomem(err, file);
        if (!anchor)
            return WEIR_OK;
        m_unlink(m, at);
    } else {
        if (!plugin)
            return cfg_err(err, WEIR_E_CONFIG, file, &p,
                           "new plugin id \"%s\" needs a \"plugin\"", id);
        if (m->count >= MAX_ROWS)
            return cfg_err(err, WEIR_E_CONFIG, file, &p, "more than %d plugin rows",
                           MAX_ROWS);
        json_t *target = json_object();
        if (!target || json_object_set_new(target, "id", json_string(id)) != 0 ||
            json_object_set(target, "plugin", plugin) != 0 ||
            json_object_set_new(target, "config", cfg ? json_incref(cfg) : json_object()) !=
                0 ||
            copy_policy(target, row) || !(at = m_node(m, target))) {
            json_decref(target);
            return nomem(err, file);
        }
        /* the key is the new row's own id string */
        if (weir__idmap_put(&m->ids, json_string_value(json_object_get(target, "id")), NULL,
                            at) != WEIR_OK) {
            json_decref(target);
            m->v[at].row = NULL;
            return nomem(err, file);
        }
    }
    size_t after = m->v[0].prev; /* the tail: appended */
    if (anchor) {
        size_t a = m_find(m, anchor);
        after = strcmp(place, "after") == 0 ? a : m->v[a].prev;
    }
    m_link_after(m, at, after);
    return WEIR_OK;
}

/* weir__config_merge without the validation of `over`. */
static int merge_valid(json_t *base, json_t *over, const char *file, weir_error *err) {
    static const char *const objects[] = {"agent", "session", "telemetry"};
    for (size_t i = 0; i < 3; i++) {
        json_t *src = json_object_get(over, objects[i]);
        if (!src)
            continue;
        json_t *dst = section(base, objects[i], json_object);
        if (!dst || json_object_update(dst, src) != 0)
            return nomem(err, file);
    }
    json_t *pp = json_object_get(over, "plugin_path");
    if (pp && json_object_set(base, "plugin_path", pp) != 0)
        return nomem(err, file);
    json_t *rows = json_object_get(over, "plugins");
    if (!rows)
        return WEIR_OK;
    json_t *dst = section(base, "plugins", json_array);
    if (!dst)
        return nomem(err, file);
    merger m;
    if (m_init(&m, dst) != WEIR_OK) {
        m_free(&m);
        return nomem(err, file);
    }
    int rc = WEIR_OK;
    for (size_t i = 0; i < json_array_size(rows) && rc == WEIR_OK; i++)
        rc = merge_row(&m, json_array_get(rows, i), i, file, err);
    /* the merged rows replace the old array, also after an error (base stays
     * valid, partly merged); replacing a member does not allocate */
    json_t *merged = m_rows(&m);
    if (!merged || json_object_set_new(base, "plugins", merged) != 0)
        rc = rc == WEIR_OK ? nomem(err, file) : rc;
    m_free(&m);
    return rc;
}

int weir__config_merge(json_t *base, json_t *over, const char *file, weir_error *err) {
    if (!json_is_object(base) || !json_is_object(over))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "config: merge needs two objects");
    if (!file)
        file = "(config)";
    int rc = weir__config_validate(over, file, err);
    return rc == WEIR_OK ? merge_valid(base, over, file, err) : rc;
}

/* ---- composing ------------------------------------------------------------ */

/* How many leading characters of the `len` first of `s` are "./" components
 * ("./a" -> 2, ".//./a" -> 5, "." -> 1). */
static size_t dot_slash_len(const char *s, size_t len) {
    size_t i = 0;
    while (i < len && s[i] == '.' && (i + 1 == len || s[i + 1] == '/')) {
        i++;
        while (i < len && s[i] == '/')
            i++;
    }
    return i;
}

/* The cwd into *out (new, weir__free): 0, ENOMEM, or getcwd's errno. */
static int current_dir(char **out) {
    *out = NULL;
    for (size_t size = 256; size <= ((size_t)1 << 20); size *= 2) {
        char *buf = weir__malloc(size);
        if (!buf)
            return ENOMEM;
        if (getcwd(buf, size)) {
            *out = buf;
            return 0;
        }
        int e = errno;
        weir__free(buf);
        if (e != ERANGE)
            return e;
    }
    return ENAMETOOLONG;
}

/*
 * The absolute directory of config file `file`, as named (symbolic links are
 * not followed): its dirname, after the cwd when `file` is relative.  New
 * (weir__free) in *out.
 */
static int file_dir(const char *file, const jpath *p, char **out, weir_error *err) {
    const char *slash = strrchr(file, '/');
    if (file[0] == '/') { /* "/x.json" -> "/", "/etc/weir/x.json" -> "/etc/weir" */
        *out = weir__strndup(file, slash == file ? 1 : (size_t)(slash - file));
        return *out ? WEIR_OK : nomem(err, file);
    }
    char *cwd;
    int e = current_dir(&cwd);
    if (e != 0) {
        char eb[256];
        if (e == ENOMEM)
            return nomem(err, file);
        return cfg_err(err, WEIR_E_IO, file, p,
                       "cannot make a relative directory absolute: the current directory: %s",
                       strerror_r(e, eb, sizeof eb));
    }
    /* "conf/x.json" -> "<cwd>/conf"; "x.json" and "./x.json" -> "<cwd>" */
    const char *rel = file + dot_slash_len(file, strlen(file));
    slash = strrchr(rel, '/');
    size_t cl = strlen(cwd);
    const char *sep = cl > 0 && cwd[cl - 1] == '/' ? "" : "/";
    *out = slash ? weir__asprintf("%s%s%.*s", cwd, sep, (int)(slash - rel), rel)
                 : weir__strdup(cwd);
    weir__free(cwd);
    return *out ? WEIR_OK : nomem(err, file);
}

/*
 * Each relative directory in plugin_path entry `v` (a ':'-separated list)
 * becomes "<dir>/<it>"; *dir is the file's directory, found on first need
 * (new, the caller frees it).  Empty pieces stay (the loader skips them).
 */
static int resolve_entry(json_t *v, const char *file, const jpath *p, char **dir,
                         weir_error *err) {
    const char *s = json_string_value(v);
    bool relative = false;
    for (const char *c = s; c && *c;) {
        const char *end = strchr(c, ':');
        if (*c != '/' && *c != ':')
            relative = true;
        c = end ? end + 1 : NULL;
    }
    if (!relative)
        return WEIR_OK;
    int rc = *dir ? WEIR_OK : file_dir(file, p, dir, err);
    if (rc != WEIR_OK)
        return rc;
    sbuf b = {0};
    for (const char *c = s; c && rc == WEIR_OK;) {
        const char *end = strchr(c, ':');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (c != s && sb_add(&b, ":", 1) != 0) {
            rc = nomem(err, file);
            break;
        }
        if (len > 0 && *c != '/') { /* "./plugins" -> "<dir>/plugins", "." -> "<dir>" */
            size_t skip = dot_slash_len(c, len);
            const char *rest = c + skip;
            size_t rl = len - skip;
            size_t dl = strlen(*dir);
            bool root = dl > 0 && (*dir)[dl - 1] == '/';
            if (sb_add(&b, *dir, dl) != 0 || (rl > 0 && !root && sb_add(&b, "/", 1) != 0) ||
                sb_add(&b, rest, rl) != 0)
                rc = nomem(err, file);
        } else if (sb_add(&b, c, len) != 0) {
            rc = nomem(err, file);
        }
        c = end ? end + 1 : NULL;
    }
    if (rc == WEIR_OK && json_string_setn(v, b.p ? b.p : "", b.len) != 0)
        rc = nomem(err, file);
    weir__free(b.p);
    return rc;
}

/*
 * `~/` in session.dir becomes $HOME/; empty plugin_path entries are dropped;
 * when the document comes from a file (`from_file`), each relative
 * plugin_path directory, and each row's `plugin` given as a relative path
 * (it has a '/'), is made relative to the file's directory, not to the cwd
 * weir happens to run in (the built-in default keeps them as they are).
 */
static int normalise(json_t *doc, const char *file, bool from_file, weir_error *err) {
    json_t *dir = json_object_get(json_object_get(doc, "session"), "dir");
    const char *s = json_string_value(dir);
    if (s && strncmp(s, "~/", 2) == 0) {
        const char *home = getenv("HOME");
        if (!home || !*home || !utf8_valid(home)) {
            jpath p;
            path_init(&p);
            path_key(&p, "session");
            path_key(&p, "dir");
            return cfg_err(err, WEIR_E_CONFIG, file, &p, "cannot expand \"~/\": HOME is %s",
                           home && *home ? "not valid UTF-8" : "not set");
        }
        size_t hl = strlen(home);
        if (hl > 1 && home[hl - 1] == '/')
            hl--;
        char *full = weir__asprintf("%.*s/%s", (int)hl, home, s + 2);
        int rc = full ? json_string_set(dir, full) : -1;
        weir__free(full);
        if (rc != 0)
            return nomem(err, file);
    }
    json_t *pp = json_object_get(doc, "plugin_path");
    for (size_t i = json_array_size(pp); i-- > 0;)
        if (json_string_length(json_array_get(pp, i)) == 0)
            json_array_remove(pp, i);
    if (!from_file)
        return WEIR_OK;
    char *fdir = NULL;
    int rc = WEIR_OK;
    for (size_t i = 0; i < json_array_size(pp) && rc == WEIR_OK; i++) {
        jpath p;
        path_init(&p);
        path_key(&p, "plugin_path");
        path_index(&p, i);
        rc = resolve_entry(json_array_get(pp, i), file, &p, &fdir, err);
    }
    /* a row's plugin given as a path ("./x/weir-y.so") is the file's too */
    json_t *rows = json_object_get(doc, "plugins");
    for (size_t i = 0; i < json_array_size(rows) && rc == WEIR_OK; i++) {
        json_t *v = json_object_get(json_array_get(rows, i), "plugin");
        const char *name = json_string_value(v);
        if (!name || !strchr(name, '/') || name[0] == '/')
            continue;
        jpath p;
        path_init(&p);
        path_key(&p, "plugins");
        path_index(&p, i);
        path_key(&p, "plugin");
        rc = resolve_entry(v, file, &p, &fdir, err);
    }
    weir__free(fdir);
    return rc;
}

/* Open and parse one file (new reference in *out). */
static int load_file(const char *path, json_t **out, weir_error *err) {
    char eb[256];
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return weir__err(err, WEIR_E_IO, NULL, NULL, "config %s: cannot open: %s", path,
                         strerror_r(e, eb, sizeof eb));
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return weir__err(err, WEIR_E_IO, NULL, NULL, "config %s: cannot read: %s", path,
                         strerror_r(EISDIR, eb, sizeof eb));
    }
    json_error_t je;
    errno = 0;
    unsigned long mark = weir__json_parse_begin();
    *out = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    bool whole = weir__json_parse_end(mark);
    int e = errno;
    bool read_failed = ferror(f) != 0;
    fclose(f);
    if (!whole) { /* what it parsed may have lost bytes */
        json_decref(*out);
        *out = NULL;
        return nomem(err, path);
    }
    if (*out)
        return WEIR_OK;
    if (read_failed)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "config %s: cannot read: %s", path,
                         strerror_r(e ? e : EIO, eb, sizeof eb));
    /* jansson reports some allocation failures as syntax errors, or leaves the
     * error empty: when memory cannot be had right now, report that instead */
    void *probe = weir__malloc(64);
    weir__free(probe);
    if (!probe || json_error_code(&je) == json_error_out_of_memory || je.text[0] == '\0')
        return nomem(err, path);
    return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "config %s:%d:%d: %s", path, je.line,
                     je.column, je.text);
}

/* Run one parsed document (read from `file` when `from_file`) through
 * expand, validate, normalise and merge. */
static int compose_one(json_t *acc, json_t *doc, const char *file, bool from_file,
                       weir_error *err) {
    int rc;
    if ((rc = check_top(doc, file, err)) != WEIR_OK ||
        (rc = weir__config_expand(doc, file, err)) != WEIR_OK ||
        (rc = weir__config_validate(doc, file, err)) != WEIR_OK ||
        (rc = normalise(doc, file, from_file, err)) != WEIR_OK)
        return rc;
    return merge_valid(acc, doc, file, err);
}

/* Fill the agent and session keys no file gave from the documented
 * defaults (expanded and normalised as the built-in default is, so `~/`
 * needs HOME only when the default session.dir is used). */
static int fill_defaults(json_t *acc, weir_error *err) {
    json_t *agent = json_object_get(acc, "agent"), *session = json_object_get(acc, "session");
    json_t *seed = json_pack("{s:{},s:{}}", "agent", "session");
    json_t *fresh = json_pack("{s:{},s:{},s:[],s:[]}", "agent", "session", "plugin_path",
                              "plugins");
    int rc = seed && fresh ? WEIR_OK : nomem(err, DEFAULT_LABEL);
    json_t *sa = json_object_get(seed, "agent"), *ss = json_object_get(seed, "session");
    if (rc == WEIR_OK &&
        ((!json_object_get(agent, "max_tokens") &&
          json_object_set_new(sa, "max_tokens", json_integer(4096)) != 0) ||
         (!json_object_get(agent, "max_parallel_tool_calls") &&
          json_object_set_new(sa, "max_parallel_tool_calls", json_integer(10)) != 0) ||
         (!json_object_get(session, "dir") &&
          json_object_set_new(ss, "dir", json_string(DEFAULT_SESSION_DIR)) != 0) ||
         (!json_object_get(session, "fsync") &&
          json_object_set_new(ss, "fsync", json_string("step")) != 0)))
        rc = nomem(err, DEFAULT_LABEL);
    if (rc == WEIR_OK)
        rc = compose_one(fresh, seed, DEFAULT_LABEL, false, err);
    if (rc == WEIR_OK &&
        (json_object_update_missing(agent, json_object_get(fresh, "agent")) != 0 ||
         json_object_update_missing(session, json_object_get(fresh, "session")) != 0))
        rc = nomem(err, DEFAULT_LABEL);
    json_decref(seed);
    json_decref(fresh);
    return rc;
}

/* session.store of the composed config names "file", "memory" or a row of
 * it (a row that provides a store: checked when an agent opens). */
static int check_store_row(const json_t *acc, const char *file, weir_error *err) {
    const char *store = weir__json_str(json_object_get(acc, "session"), "store", NULL);
    if (!store || strcmp(store, "file") == 0 || strcmp(store, "memory") == 0)
        return WEIR_OK;
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(acc, "plugins"), i, row) {
        if (strcmp(weir__json_str(row, "id", ""), store) == 0)
            return WEIR_OK;
    }
    jpath p;
    path_init(&p);
    path_key(&p, "session");
    path_key(&p, "store");
    return cfg_err(err, WEIR_E_CONFIG, file ? file : DEFAULT_LABEL, &p,
                   "no plugin row '%.64s' (a store is \"file\", \"memory\" or the id of a row "
                   "that provides one)",
                   store);
}

int weir_config_compose(const char *const *files, size_t nfiles, json_t **out,
                        weir_error *err) {
    if (!out || (nfiles > 0 && !files))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "config: NULL argument");
    *out = NULL;
    for (size_t i = 0; i < nfiles; i++)
        if (!files[i])
            return weir__err(err, WEIR_E_INVAL, NULL, NULL, "config: file %zu is NULL", i);
    json_t *acc = json_pack("{s:{},s:{},s:[],s:[]}", "agent", "session", "plugin_path",
                            "plugins");
    if (!acc)
        return nomem(err, nfiles ? files[0] : DEFAULT_LABEL);
    const char *store_file = NULL; /* the last file that set session.store */
    for (size_t i = 0; i < (nfiles ? nfiles : 1); i++) {
        /* no file, or the name "default": the built-in default deployment */
        bool builtin = !nfiles || strcmp(files[i], WEIR_CONFIG_DEFAULT_NAME) == 0;
        const char *file = builtin ? DEFAULT_LABEL : files[i];
        json_t *doc = NULL;
        int rc;
        if (!builtin)
            rc = load_file(file, &doc, err);
        else
            rc = (doc = weir_config_default()) ? WEIR_OK : nomem(err, file);
        if (rc == WEIR_OK && json_object_get(json_object_get(doc, "session"), "store"))
            store_file = file;
        if (rc == WEIR_OK)
            rc = compose_one(acc, doc, file, !builtin, err);
        json_decref(doc);
        if (rc != WEIR_OK) {
            json_decref(acc);
            return rc;
        }
    }
    /* agent and session start from the documented defaults, whatever the
     * files give (provider and model come with the provider row) */
    int rc = fill_defaults(acc, err);
    if (rc == WEIR_OK)
        rc = check_store_row(acc, store_file, err);
    if (rc != WEIR_OK) {
        json_decref(acc);
        return rc;
    }
    *out = acc;
    return WEIR_OK;
}

/* ---- the built-in default -------------------------------------------------- */

json_t *weir_config_default(void) {
    const char *openai = getenv("OPENAI_API_KEY");
    const char *anthropic = getenv("ANTHROPIC_API_KEY");
    json_t *row;
    const char *provider, *model;
    /* no `models` for the hosted providers: their model table knows gpt-4o-mini,
     * claude-sonnet-4-5 and whatever WEIR_MODEL names (docs/providers.md,
     * "Model table") */
    if (openai && *openai) {
        provider = "openai";
        model = "${WEIR_MODEL:-gpt-4o-mini}";
        row = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", "openai", "plugin", "provider-openai",
                        "config", "base_url", "${OPENAI_BASE_URL:-https://api.openai.com/v1}",
                        "api_key", "${OPENAI_API_KEY}");
    } else if (anthropic && *anthropic) {
        provider = "anthropic";
        model = "${WEIR_MODEL:-claude-sonnet-4-5}";
        row = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", "anthropic", "plugin",
                        "provider-anthropic", "config", "base_url",
                        "${ANTHROPIC_BASE_URL:-https://api.anthropic.com}", "api_key",
                        "${ANTHROPIC_API_KEY}");
    } else {
        provider = "scripted";
        model = "demo";
        /* a window, so that the demo runs the same policy chain as a real model */
        row = json_pack("{s:s,s:s,s:{s:s,s:{s:{s:i,s:i}}}}", "id", "scripted", "plugin",
                        "provider-scripted", "config", "script", "builtin:demo", "models", "demo",
                        "context_window", 32768, "max_output", 4096);
    }
    if (!row)
        return NULL;
    /* the policy chain every route gets: compaction and retry with their
     * defaults, right after the provider row */
    json_t *doc = json_pack(
        "{s:{s:s,s:s,s:i,s:i},s:{s:s,s:s},s:[s],s:[O,{s:s,s:s,s:{}},{s:s,s:s,s:{}},{s:s,s:s,s:{s:s}},"
        "{s:s,s:s,s:{s:[{s:s,s:s,s:s,s:s,s:b}]}}]}",
        "agent", "provider", provider, "model", model, "max_tokens", 4096,
        "max_parallel_tool_calls", 10, "session", "dir", DEFAULT_SESSION_DIR, "fsync", "step",
        "plugin_path",
        "${WEIR_PLUGIN_PATH:-}", "plugins", row, "id", "compaction", "plugin",
        "compaction-basic", "config", "id", "retry", "plugin", "retry", "config", "id", "prompt",
        "plugin",
        "system-prompt",
        "config", "text", "You are a careful assistant.", "id", "math", "plugin", "tools-ffi",
        "config", "tools", "library", "libm.so.6", "symbol", "pow", "prototype",
        "double pow(double x, double y)", "description", "x raised to the power y", "inline", 1);
    json_decref(row);
    return doc;
}
