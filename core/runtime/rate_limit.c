/*
 * core/runtime/rate_limit.c - what a provider's response says of its rate
 * limits (docs/retry.md, "Rate-limit headers").  The `x-ratelimit-*`
 * headers (OpenAI and the servers that copy it) and Anthropic's
 * `anthropic-ratelimit-*` ones are collected as a response's head arrives
 * (core/runtime/http.c), normalized to {requests, tokens, input_tokens,
 * output_tokens: {limit, remaining, reset_ms}, raw}, and kept, with the
 * request's host, as the calling thread's last response: the failure made
 * from that response (weir__http_failure) and the attempt's log record
 * (core/engine/driver.c) carry it, so a retry policy sees what the provider
 * said.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "failure.h"
#include "http.h"

#define RAW_MAX 32   /* rate-limit headers kept of one response */
#define NAME_MAX_ 96 /* the longest such header name kept */

static bool prefixed(const char *name, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n > k && strncasecmp(name, prefix, k) == 0;
}

bool weir__rate_limit_header(json_t **raw, const char *name, size_t n, const char *value,
                             size_t vlen) {
    if (!raw || !name || !value || n >= NAME_MAX_ ||
        (!prefixed(name, n, "x-ratelimit-") && !prefixed(name, n, "anthropic-ratelimit-")))
        return true;
    if (*raw && json_object_size(*raw) >= RAW_MAX)
        return true;
    char lower[NAME_MAX_];
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    lower[n] = '\0';
    json_t *v = json_stringn(value, vlen);
    if (!v)
        return true; /* not UTF-8: left out */
    if (!*raw && !(*raw = json_object())) {
        json_decref(v);
        return false;
    }
    return json_object_set_new(*raw, lower, v) == 0;
}

/* A Go-style duration ("1s", "6m0s", "20ms", "1h2m3.5s"), OpenAI's reset
 * form, in ms (rounded up), or -1. */
static long long duration_ms(const char *s) {
    double total = 0;
    bool any = false;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 0)
            return -1;
        s = end;
        double unit = !strncmp(s, "ms", 2) ? 1 : *s == 'h' ? 3600e3 : *s == 'm' ? 60e3 : *s == 's' ? 1e3 : -1;
        if (unit < 0)
            return -1;
        s += unit == 1 ? 2 : 1;
        total += v * unit;
        any = true;
    }
    if (!any || total > 9e15)
        return -1;
    long long ms = (long long)total;
    return (double)ms < total ? ms + 1 : ms;
}

/* An RFC 3339 time ("2026-12-07T09:00:12Z", Anthropic's reset form) as
 * ms after `now_ms` (0 when past), or -1. */
static long long rfc3339_ms(const char *s, int64_t now_ms) {
    struct tm tm = {0};
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = s + used;
    double frac = 0;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        p = end;
    }
    long offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int hh, mm, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &k) != 2 || k != 5)
            return -1;
        offset_s = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    long long at = ((long long)t - offset_s) * 1000 + (long long)(frac * 1000);
    return at > now_ms ? at - now_ms : 0;
}

/* A reset header's value in ms from now: a duration, an RFC 3339 time, or
 * a plain number of seconds (an epoch time when it is one); -1 when none. */
static long long reset_ms(const char *v, int64_t now_ms) {
    long long ms = strchr(v, 'T') ? rfc3339_ms(v, now_ms) : duration_ms(v);
    if (ms >= 0)
        return ms;
    char *end;
    double secs = strtod(v, &end);
    if (end == v || *end || secs < 0 || secs > 9e12)
        return -1;
    if (secs > 1e9) /* an epoch time */
        return (long long)(secs * 1000) > now_ms ? (long long)(secs * 1000) - now_ms : 0;
    return (long long)(secs * 1000);
}

/* The integer value of `name` in raw, or -1. */
static long long count(const json_t *raw, const char *name) {
    const char *v = json_string_value(json_object_get(raw, name));
    if (!v)
        return -1;
    char *end;
    long long n = strtoll(v, &end, 10);
    return end != v && !*end && n >= 0 ? n : -1;
}

/* Set `kind` {limit, remaining, reset_ms} in `out` from the three names;
 * false when out of memory. */
static bool group(json_t *out, const json_t *raw, const char *kind, const char *limit,
                  const char *remaining, const char *reset, int64_t now_ms) {
    long long l = count(raw, limit), r = count(raw, remaining);
    const char *rv = json_string_value(json_object_get(raw, reset));
    long long ms = rv ? reset_ms(rv, now_ms) : -1;
    if (l < 0 && r < 0 && ms < 0)
        return true;
    json_t *g = json_object();
    if (!g || (l >= 0 && json_object_set_new(g, "limit", json_integer(l))) ||
        (r >= 0 && json_object_set_new(g, "remaining", json_integer(r))) ||
        (ms >= 0 && json_object_set_new(g, "reset_ms", json_integer(ms)))) {
        json_decref(g);
        return false;
    }
    return json_object_set_new(out, kind, g) == 0;
}

json_t *weir__rate_limit_normalize(const json_t *raw, int64_t now_ms) {
    if (!json_is_object(raw) || json_object_size(raw) == 0)
        return NULL;
    json_t *out = json_object();
    static const char *const kinds[][2] = {{"requests", "requests"},
                                           {"tokens", "tokens"},
                                           {"input_tokens", "input-tokens"},
                                           {"output_tokens", "output-tokens"}};
    bool ok = out != NULL;
    char l[96], r[96], s[96];
    for (size_t i = 0; ok && i < 4; i++) {
        /* OpenAI: x-ratelimit-limit-requests ...; Anthropic:
         * anthropic-ratelimit-requests-limit ... (the first one present) */
        snprintf(l, sizeof l, "x-ratelimit-limit-%s", kinds[i][1]);
        snprintf(r, sizeof r, "x-ratelimit-remaining-%s", kinds[i][1]);
        snprintf(s, sizeof s, "x-ratelimit-reset-%s", kinds[i][1]);
        ok = group(out, raw, kinds[i][0], l, r, s, now_ms);
        if (ok && !json_object_get(out, kinds[i][0])) {
            snprintf(l, sizeof l, "anthropic-ratelimit-%s-limit", kinds[i][1]);
            snprintf(r, sizeof r, "anthropic-ratelimit-%s-remaining", kinds[i][1]);
            snprintf(s, sizeof s, "anthropic-ratelimit-%s-reset", kinds[i][1]);
            ok = group(out, raw, kinds[i][0], l, r, s, now_ms);
        }
    }
    if (!ok || json_object_set(out, "raw", (json_t *)(uintptr_t)raw) != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- the calling thread's last response ---------------------------------- */

typedef struct last {
    const weir_http_response *resp; /* compared, never read */
    json_t *record;                 /* {host?, rate_limit?} */
} last;

static pthread_key_t last_key;
static pthread_once_t last_once = PTHREAD_ONCE_INIT;
static bool last_ok;

static void last_free(void *p) {
    last *l = p;
    json_decref(l->record);
    weir__free(l);
}

static void last_init(void) { last_ok = pthread_key_create(&last_key, last_free) == 0; }

static last *mine(bool create) {
    pthread_once(&last_once, last_init);
    if (!last_ok)
        return NULL;
    last *l = pthread_getspecific(last_key);
    if (!l && create && (l = weir__calloc(1, sizeof *l)) && pthread_setspecific(last_key, l)) {
        weir__free(l);
        l = NULL;
    }
    return l;
}

void weir__http_last_clear(void) {
    last *l = mine(false);
    if (l) {
        json_decref(l->record);
        l->record = NULL;
        l->resp = NULL;
    }
}

void weir__http_last_set(const weir_http_response *resp, const char *url, const json_t *raw) {
    weir__http_last_clear();
    last *l = mine(true);
    if (!l)
        return; /* what a policy could read is lost, never the request */
    json_t *rec = json_object();
    char host[256];
    const char *h = url ? strstr(url, "://") : NULL;
    size_t n = h ? strcspn(h + 3, "/:?#") : 0;
    if (rec && n && n < sizeof host) {
        memcpy(host, h + 3, n);
        host[n] = '\0';
        json_t *hs = json_string(host);
        if (!hs || json_object_set_new(rec, "host", hs) != 0) {
            json_decref(rec);
            return;
        }
    }
    json_t *norm = weir__rate_limit_normalize(raw, weir__now_ms());
    if (rec && norm && json_object_set_new(rec, "rate_limit", norm) != 0) {
        json_decref(rec);
        return;
    }
    if (!rec)
        json_decref(norm);
    l->record = rec;
    l->resp = resp;
}

json_t *weir__http_last(const weir_http_response *resp) {
    last *l = mine(false);
    if (!l || !l->record || (resp && resp != l->resp))
        return NULL;
    return json_incref(l->record);
}

json_t *weir__http_failure(const char *provider, const weir_http_response *resp) {
    json_t *f = weir__failure_from_http(provider, resp);
    json_t *rec = f ? weir__http_last(resp) : NULL;
    const char *key;
    json_t *v;
    json_object_foreach(rec, key, v) {
        if (json_object_set(f, key, v) != 0) {
            json_decref(f);
            f = NULL;
            break;
        }
    }
    json_decref(rec);
    return f;
}
