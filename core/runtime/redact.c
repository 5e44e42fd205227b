/*
 * core/runtime/redact.c - hiding the secrets of a composed deployment config
 * (weir_config_redact, used by `weir config`).
 *
 * In each plugin row's config, two sets of values become "***":
 *   - the ones every row gets (BUILTIN_SECRETS): api_key, and the headers
 *     Authorization, Proxy-Authorization, x-api-key and api-key (any case);
 *   - the ones the row's plugin marks `"secret": true` in its config schema.
 *     The plugin is resolved as the loader does and opened only to read its
 *     descriptor (its `init` never runs, as with `weir plugins`); a plugin
 *     that cannot be found or opened is passed over in silence: the built-in
 *     set still applies, and composing never depended on plugins.
 * The marks follow docs/schema.md ("secret").
 *
 * Every value of telemetry.headers becomes "***" too (docs/telemetry.md):
 * an OTLP collector's headers carry its credentials.
 *
 * Everywhere in the config (every row, every value, array items, the keys
 * outside `plugins` too), a URL's userinfo is a credential: in any string,
 * in "http://user:password@host/v1" the "user:password" becomes MASK (the
 * scheme, host, port, path and query are kept; a bare "user@" is hidden
 * too: a token can be the user name).
 */
#include <string.h>

#include "common.h"
#include "host_int.h"
#include "schema.h"

#define MASK "***"

/* The marks every row gets, as a schema of the row's config. */
static const char builtin_secrets[] =
    "{\"properties\":{"
    "\"api_key\":{\"secret\":true},"
    "\"headers\":{\"properties\":{"
    "\"Authorization\":{\"secret\":true},"
    "\"Proxy-Authorization\":{\"secret\":true},"
    "\"x-api-key\":{\"secret\":true},"
    "\"api-key\":{\"secret\":true}}}}}";

/* The config schema of `plugin` (host_int.h). */
json_t *weir__plugin_config_schema(const char *plugin, const json_t *plugin_path) {
    char *path = NULL;
    if (!plugin || weir__plugin_resolve(plugin, plugin_path, &path, NULL) != WEIR_OK)
        return NULL;
    weir__dl *dl = NULL;
    const weir_plugin_desc *desc = NULL;
    json_t *schema = NULL;
    if (weir__dl_open(path, &dl, &desc, NULL) == WEIR_OK && desc->config_schema)
        schema = weir__json_loads(desc->config_schema, JSON_DECODE_ANY, NULL);
    weir__dl_close(dl); /* the schema text lives in the file: parsed before */
    weir__free(path);
    return schema;
}

/* Whether `c` may appear in a URL scheme after its first letter (RFC 3986). */
static bool scheme_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '-' || c == '.';
}

static bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/*
 * The length of the userinfo of a URL whose authority starts at `p` (just
 * after "://"), `end` its string's end: the bytes before an '@' that comes
 * before the authority ends ('/', '?', '#', a space or a control
 * character); 0 when there is none, or it is already MASK.
 */
static size_t userinfo_len(const char *p, const char *end) {
    const char *at = NULL;
    for (const char *q = p; q < end; q++) {
        unsigned char c = (unsigned char)*q;
        if (c == '/' || c == '?' || c == '#' || c <= ' ' || c == 0x7f)
            break;
        if (c == '@')
            at = q; /* the last '@' of the authority ends the userinfo (as libcurl) */
    }
    if (!at || ((size_t)(at - p) == strlen(MASK) && !memcmp(p, MASK, strlen(MASK))))
        return 0;
    return (size_t)(at - p);
}

/*
 * The next userinfo of a URL in [from, end) of the string that starts at
 * `s`: its length, its start in *at; 0 when there is none.
 */
static size_t next_userinfo(const char *s, const char *from, const char *end, const char **at) {
    for (const char *p = from; p + 3 <= end; p++) {
        if (p[0] != ':' || p[1] != '/' || p[2] != '/')
            continue;
        const char *scheme = p;
        while (scheme > s && scheme_char(scheme[-1]))
            scheme--;
        while (scheme < p && !alpha(*scheme)) /* a scheme starts with a letter */
            scheme++;
        size_t n = scheme < p ? userinfo_len(p + 3, end) : 0;
        if (n) {
            *at = p + 3;
            return n;
        }
    }
    return 0;
}

/*
 * `s` (`len` bytes) with the userinfo of every URL in it replaced by MASK:
 * a new string (weir__malloc, `*out_len` bytes plus a NUL) in *out, or NULL
 * in *out when there was nothing to hide.  -1 when memory ran out, else 0.
 */
static int userinfo_redact(const char *s, size_t len, char **out, size_t *out_len) {
    *out = NULL;
    const char *end = s + len, *at;
    size_t total = len, n, found = 0;
    for (const char *p = s; (n = next_userinfo(s, p, end, &at)) != 0; p = at + n) {
        total = total - n + strlen(MASK);
        found++;
    }
    if (!found)
        return 0;
    char *buf = weir__malloc(total + 1), *o = buf;
    if (!buf)
        return -1;
    const char *p = s;
    while ((n = next_userinfo(s, p, end, &at)) != 0) {
        memcpy(o, p, (size_t)(at - p));
        o += at - p;
        memcpy(o, MASK, strlen(MASK));
        o += strlen(MASK);
        p = at + n;
    }
    memcpy(o, p, (size_t)(end - p));
    o += end - p;
    *o = '\0';
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}

/* Hide the userinfo of the URLs in every string of `v`, members and items
 * to any depth (the config parser's own depth limit bounds it).  -1 when
 * memory ran out, else 0. */
static int redact_urls(json_t *v) {
    if (json_is_string(v)) {
        char *red = NULL;
        size_t n = 0;
        if (userinfo_redact(json_string_value(v), json_string_length(v), &red, &n) < 0)
            return -1;
        int rc = red ? json_string_setn(v, red, n) : 0;
        weir__free(red);
        return rc < 0 ? -1 : 0;
    }
    if (json_is_object(v)) {
        const char *key;
        json_t *member;
        json_object_foreach(v, key, member) {
            if (redact_urls(member) < 0)
                return -1;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            if (redact_urls(item) < 0)
                return -1;
        }
    }
    return 0;
}

int weir_config_redact(json_t *config, weir_error *err) {
    if (!json_is_object(config))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_config_redact: the config is not an object");
    json_t *builtin = weir__json_loads(builtin_secrets, 0, NULL);
    if (!builtin)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    const json_t *plugin_path = json_object_get(config, "plugin_path");
    int rc = WEIR_OK;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        json_t *cfg = json_object_get(row, "config");
        if (!cfg || rc != WEIR_OK)
            continue;
        json_t *schema = weir__plugin_config_schema(json_string_value(json_object_get(row, "plugin")),
                                       plugin_path);
        if (weir__schema_redact(builtin, cfg, MASK) < 0 ||
            (schema && weir__schema_redact(schema, cfg, MASK) < 0))
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        json_decref(schema);
    }
    json_decref(builtin);
    /* telemetry.headers: every value may be a secret (docs/telemetry.md) */
    const char *name;
    json_t *value;
    json_t *headers = json_object_get(json_object_get(config, "telemetry"), "headers");
    json_object_foreach(json_is_object(headers) ? headers : NULL, name, value) {
        if (rc == WEIR_OK && json_object_set_new(headers, name, json_string(MASK)) != 0)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    if (rc == WEIR_OK && redact_urls(config) < 0)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    return rc;
}
