/*
 * plugins/tools-mcp/mcp_map.c - tool names, secret names, result mapping,
 * ${VAR} expansion, log levels (see mcp_map.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strndup */
#endif
#include "mcp_map.h"

#include "mcp_frame.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mcp_name_ok(const char *s, size_t max) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || (max && n > max))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

bool mcp_tool_name(const char *server, const char *tool, char *out, size_t size, char *why,
                   size_t why_size) {
    int n = snprintf(out, size, "mcp__%s__%s", server ? server : "", tool ? tool : "");
    if (why && why_size)
        why[0] = '\0';
    if (!mcp_name_ok(out, 0)) {
        if (why)
            snprintf(why, why_size, "has characters outside [A-Za-z0-9_-]");
        return false;
    }
    if (n < 0 || (size_t)n >= size || n > MCP_TOOL_NAME_MAX) {
        if (why)
            snprintf(why, why_size, "is longer than %d characters", MCP_TOOL_NAME_MAX);
        return false;
    }
    return true;
}

static bool has_nul(const json_t *v, int depth) {
    if (depth > 64)
        return true;
    if (json_is_string(v))
        return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v)) {
        json_array_foreach((json_t *)(uintptr_t)v, i, e) {
            if (has_nul(e, depth + 1))
                return true;
        }
    } else if (json_is_object(v)) {
        json_object_foreach((json_t *)(uintptr_t)v, k, e) {
            if (has_nul(e, depth + 1))
                return true;
        }
    }
    return false;
}

bool mcp_json_has_nul(const json_t *v) { return has_nul(v, 0); }

/* ------------------------------------------------------------------------ */
/* Secrets                                                                   */
/* ------------------------------------------------------------------------ */

/* True when one of `words` (upper case) is in `name`, in any case. */
static bool name_has(const char *name, const char *const *words) {
    for (size_t w = 0; words[w]; w++) {
        size_t n = strlen(words[w]);
        for (const char *p = name; *p; p++) {
            size_t i = 0;
            while (i < n && p[i] && toupper((unsigned char)p[i]) == words[w][i])
                i++;
            if (i == n)
                return true;
        }
    }
    return false;
}

static const char *const secret_words[] = {"TOKEN",  "KEY",        "SECRET", "PASSWORD",
                                           "PASSWD", "CREDENTIAL", NULL};

bool mcp_env_name_secret(const char *name) { return name && name_has(name, secret_words); }

bool mcp_header_name_secret(const char *name) {
    static const char *const header_words[] = {"AUTH", "COOKIE", NULL};
    return name && (name_has(name, secret_words) || name_has(name, header_words));
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static int add_text(json_t *content, const char *text) {
    json_t *b = json_pack("{s:s, s:s}", "type", "text", "text", text ? text : "");
    return b ? json_array_append_new(content, b) : -1;
}

static int add_textf(json_t *content, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_textf(json_t *content, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    int rc = add_text(content, s);
    free(s);
    return rc;
}

/* " (k: v)" pieces of a resource description, into buf. */
static void describe_resource(const json_t *r, char *buf, size_t size) {
    size_t at = 0;
    static const char *const keys[] = {"name", "title", "description", "mimeType"};
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = str(r, keys[i]);
        if (!v || !*v || at >= size)
            continue;
        int n = snprintf(buf + at, size - at, "%s%s: %s", at ? "; " : " (", keys[i], v);
        if (n > 0)
            at = (size_t)n >= size - at ? size - 1 : at + (size_t)n;
    }
    if (at && at + 1 < size)
        snprintf(buf + at, size - at, ")");
}

static int map_block(json_t *content, const json_t *b, bool *had_text) {
    const char *type = str(b, "type");
    if (!type)
        type = "";
    if (!strcmp(type, "text") && json_is_string(json_object_get(b, "text"))) {
        *had_text = true;
        return add_text(content, str(b, "text"));
    }
    if (!strcmp(type, "image") && str(b, "data")) {
        json_t *img = json_pack("{s:s, s:s, s:s}", "type", "image", "media_type",
                                str(b, "mimeType") ? str(b, "mimeType") : "image/png", "data",
                                str(b, "data"));
        return img ? json_array_append_new(content, img) : -1;
    }
    if (!strcmp(type, "audio")) {
        const char *data = str(b, "data");
        return add_textf(content, "[audio content (%s, %zu bytes of base64) not shown]",
                         str(b, "mimeType") ? str(b, "mimeType") : "unknown type",
                         data ? strlen(data) : 0);
    }
    if (!strcmp(type, "resource_link")) {
        char d[1024];
        describe_resource(b, d, sizeof d);
        *had_text = true;
        return add_textf(content, "Resource link: %s%s", str(b, "uri") ? str(b, "uri") : "?", d);
    }
    if (!strcmp(type, "resource") && json_is_object(json_object_get(b, "resource"))) {
        const json_t *r = json_object_get(b, "resource");
        const char *uri = str(r, "uri") ? str(r, "uri") : "?";
        const char *mime = str(r, "mimeType");
        *had_text = true;
        if (str(r, "text"))
            return add_textf(content, "Resource %s%s%s%s:\n%s", uri, mime ? " (" : "",
                             mime ? mime : "", mime ? ")" : "", str(r, "text"));
        const char *blob = str(r, "blob");
        return add_textf(content, "Resource %s%s%s%s: binary content (%zu bytes of base64) "
                         "not shown", uri, mime ? " (" : "", mime ? mime : "", mime ? ")" : "",
                         blob ? strlen(blob) : 0);
    }
    char *dump = mcp_frame_text(b, false);
    if (!dump)
        return -1;
    *had_text = true;
    int rc = add_text(content, dump);
    free(dump);
    return rc;
}

/* The byte length of the longest prefix of s (<= n bytes) not cutting a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t n) {
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* Keep at most max bytes of text over all text blocks. */
static int cap_text(json_t *content, size_t max) {
    size_t total = 0, i;
    json_t *b;
    json_array_foreach(content, i, b) {
        if (!strcmp(str(b, "type"), "text"))
            total += json_string_length(json_object_get(b, "text"));
    }
    if (total <= max)
        return 0;
    size_t left = max;
    for (i = 0; i < json_array_size(content);) {
        b = json_array_get(content, i);
        if (strcmp(str(b, "type"), "text") != 0) {
            i++;
            continue;
        }
        json_t *t = json_object_get(b, "text");
        size_t n = json_string_length(t);
        if (n <= left) {
            left -= n;
            i++;
            continue;
        }
        if (left == 0) {
            json_array_remove(content, i);
            continue;
        }
        size_t keep = utf8_cut(json_string_value(t), left);
        if (json_string_setn(t, json_string_value(t), keep) != 0)
            return -1;
        left = 0;
        i++;
    }
    return add_textf(content,
                     "[the result was cut: %zu bytes of text, of which the first %zu are shown]",
                     total, max);
}

json_t *mcp_map_result(const json_t *res, size_t max_text, char *why, size_t why_size) {
    const json_t *blocks = json_object_get(res, "content");
    const json_t *sc = json_object_get(res, "structuredContent");
    if (!json_is_object(res) || (blocks && !json_is_array(blocks)) || (!blocks && !sc)) {
        if (why)
            snprintf(why, why_size, "the result has no content array");
        return NULL;
    }
    json_t *content = json_array();
    if (!content)
        return NULL;
    bool had_text = false;
    size_t i;
    const json_t *b;
    json_array_foreach(blocks, i, b) {
        if (!json_is_object(b))
            continue;
        if (map_block(content, b, &had_text) != 0)
            goto oom;
    }
    if (sc && !json_is_null(sc) && !had_text) {
        char *dump = mcp_frame_text(sc, false);
        if (!dump || add_text(content, dump) != 0) {
            free(dump);
            goto oom;
        }
        free(dump);
    }
    if (json_array_size(content) == 0 && add_text(content, "(no content)") != 0)
        goto oom;
    if (max_text && cap_text(content, max_text) != 0)
        goto oom;
    json_t *out = json_pack("{s:o}", "content", content);
    if (out && json_is_true(json_object_get(res, "isError")))
        json_object_set_new(out, "is_error", json_true());
    return out;
oom:
    json_decref(content);
    if (why)
        snprintf(why, why_size, "out of memory");
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* ${VAR} expansion                                                          */
/* ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static bool var_char(char c, bool first) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

char *mcp_expand(const char *s, char *unset, size_t unset_size) {
    sbuf b = {0};
    sb_add(&b, "", 0);
    while (s && *s) {
        const char *d = strstr(s, "${");
        if (!d) {
            sb_add(&b, s, strlen(s));
            break;
        }
        sb_add(&b, s, (size_t)(d - s));
        const char *name = d + 2, *p = name;
        while (*p && var_char(*p, p == name))
            p++;
        const char *close = strchr(p, '}');
        bool has_default = p[0] == ':' && p[1] == '-';
        if (p == name || !close || (*p != '}' && !has_default)) {
            sb_add(&b, "${", 2); /* not a variable: as written */
            s = d + 2;
            continue;
        }
        char *var = strndup(name, (size_t)(p - name));
        const char *val = var ? getenv(var) : NULL;
        if (!var)
            b.oom = true;
        if (val && (*val || !has_default))
            sb_add(&b, val, strlen(val));
        else if (has_default)
            sb_add(&b, p + 2, (size_t)(close - (p + 2)));
        else {
            sb_add(&b, d, (size_t)(close + 1 - d));
            if (unset && var) {
                size_t at = strlen(unset);
                snprintf(unset + at, unset_size > at ? unset_size - at : 0, "%s%s",
                         at ? ", " : "", var);
            }
        }
        free(var);
        s = close + 1;
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int mcp_log_level(const char *level) {
    if (!level)
        return 2;
    if (!strcmp(level, "debug"))
        return 3;
    if (!strcmp(level, "info") || !strcmp(level, "notice"))
        return 2;
    if (!strcmp(level, "warning"))
        return 1;
    if (!strcmp(level, "error") || !strcmp(level, "critical") || !strcmp(level, "alert") ||
        !strcmp(level, "emergency"))
        return 0;
    return 2; /* unknown: info */
}
