/*
 * core/format/failure.c - canonical failures and the one classification table
 * (docs/providers.md): HTTP status + provider error body -> failure code.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "failure.h"

/* Longest raw body excerpt kept in a message when the body is not JSON. */
#define BODY_EXCERPT_MAX 300

static const char *const canonical_codes[] = {
    "RATE_LIMIT",     "OVERLOADED",
    "SERVER",         "TIMEOUT",
    "TRANSPORT",      "EMPTY_RESPONSE",
    "CONTEXT_WINDOW_EXCEEDED", "QUOTA",
    "AUTH",           "INVALID_REQUEST",
    "ABORTED",        "UNKNOWN",
    "IO", /* the host's own I/O failed (its session log could not be written) */
};

bool weir__failure_code_valid(const char *code) {
    if (!code)
        return false;
    for (size_t i = 0; i < sizeof canonical_codes / sizeof canonical_codes[0]; i++)
        if (strcmp(code, canonical_codes[i]) == 0)
            return true;
    return false;
}

json_t *weir__failure_vnew(const char *provider, const char *code, const char *fmt,
                           va_list ap) {
    if (!weir__failure_code_valid(code))
        code = "UNKNOWN";
    char *msg = fmt ? weir__vasprintf(fmt, ap) : weir__strdup("");
    if (!msg)
        return NULL;
    json_t *f = json_object();
    json_t *m = json_string(msg);
    if (!m) { /* not UTF-8 (a raw provider body): keep the ASCII of it */
        for (char *c = msg; *c; c++)
            if ((unsigned char)*c >= 0x80)
                *c = '?';
        m = json_string(msg);
    }
    weir__free(msg);
    if (!f) {
        json_decref(m);
        return NULL;
    }
    /* json_object_set_new consumes the value even when it fails: set them all */
    int bad = json_object_set_new(f, "code", json_string(code));
    bad |= json_object_set_new(f, "message", m);
    if (provider)
        bad |= json_object_set_new(f, "provider", json_string(provider));
    if (bad) {
        json_decref(f);
        return NULL;
    }
    return f;
}

json_t *weir__failure_new(const char *provider, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *f = weir__failure_vnew(provider, code, fmt, ap);
    va_end(ap);
    return f;
}

/* Case-insensitive search for `needle` in the first `len` bytes of `hay`. */
static bool contains_ci(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    if (!hay || n > len)
        return false;
    for (size_t i = 0; i + n <= len; i++) {
        size_t j = 0;
        while (j < n && tolower((unsigned char)hay[i + j]) == tolower((unsigned char)needle[j]))
            j++;
        if (j == n)
            return true;
    }
    return false;
}

static bool contains_any(const char *hay, size_t len, const char *const *needles) {
    for (; *needles; needles++)
        if (contains_ci(hay, len, *needles))
            return true;
    return false;
}

/* ---- the classification table ------------------------------------------ */

/* Body wording that means the context window overflowed (both providers). */
static const char *const overflow_patterns[] = {
    "context_length_exceeded", "maximum context length", "prompt is too long",
    "context window",          "too many tokens",         "input is too long",
    "exceed_context_size",     "available context size", /* llama.cpp server */
    NULL,
};
/* Body wording that means a 429 is an exhausted quota, not a rate limit. */
static const char *const quota_patterns[] = {
    "insufficient_quota", "exceeded your current quota", "billing",
    "credit balance is too low", NULL,
};
static const char *const overloaded_patterns[] = {"overloaded_error", NULL};

/*
 * status + body -> code, in this order (first match wins):
 *   429 + quota wording          QUOTA
 *   429                          RATE_LIMIT
 *   529, or overloaded_error     OVERLOADED
 *   5xx                          SERVER
 *   401, 403                     AUTH
 *   402                          QUOTA (payment required)
 *   408                          TIMEOUT
 *   4xx + overflow wording       CONTEXT_WINDOW_EXCEEDED
 *   4xx + quota wording          QUOTA (Anthropic's credit balance is a 400)
 *   other 4xx                    INVALID_REQUEST
 *   no/2xx status (in-band error event bodies): overflow wording
 *                                CONTEXT_WINDOW_EXCEEDED, quota wording QUOTA,
 *                                rate_limit RATE_LIMIT, api_error/server_error
 *                                SERVER, authentication_error/permission_error
 *                                AUTH, invalid_request_error INVALID_REQUEST
 *   anything else                UNKNOWN
 */
static const char *classify(long status, const char *body, size_t len) {
    if (status == 429)
        return contains_any(body, len, quota_patterns) ? "QUOTA" : "RATE_LIMIT";
    if (status == 529 || contains_any(body, len, overloaded_patterns))
        return "OVERLOADED";
    if (status >= 500 && status <= 599)
        return "SERVER";
    if (status == 401 || status == 403)
        return "AUTH";
    if (status == 402)
        return "QUOTA";
    if (status == 408)
        return "TIMEOUT";
    if (status >= 400 && status <= 499)
        return contains_any(body, len, overflow_patterns) ? "CONTEXT_WINDOW_EXCEEDED"
               : contains_any(body, len, quota_patterns)  ? "QUOTA"
                                                          : "INVALID_REQUEST";
    if (status < 300) {
        if (contains_any(body, len, overflow_patterns))
            return "CONTEXT_WINDOW_EXCEEDED";
        if (contains_any(body, len, quota_patterns))
            return "QUOTA";
        if (contains_ci(body, len, "rate_limit"))
            return "RATE_LIMIT";
        if (contains_ci(body, len, "api_error") || contains_ci(body, len, "server_error"))
            return "SERVER";
        if (contains_ci(body, len, "authentication_error") ||
            contains_ci(body, len, "permission_error"))
            return "AUTH";
        if (contains_ci(body, len, "invalid_request_error"))
            return "INVALID_REQUEST";
    }
    return "UNKNOWN";
}

/* error.message (OpenAI and Anthropic both nest it there) or a top-level
 * "message"; borrowed from `root`, or NULL. */
static const char *json_error_message(const json_t *root) {
    const json_t *err = json_object_get(root, "error");
    const char *msg = weir__json_str(err, "message", NULL);
    if (!msg && json_is_string(err))
        msg = json_string_value(err);
    if (!msg)
        msg = weir__json_str(root, "message", NULL);
    return msg;
}

json_t *weir__failure_from_http(const char *provider, const weir_http_response *resp) {
    if (!resp)
        return weir__failure_new(provider, "UNKNOWN", "no HTTP response");
    const char *body = resp->body;
    size_t len = body ? resp->body_len : 0;
    const char *code = classify(resp->status, body, len);

    json_t *root = len ? weir__json_loadb(body, len, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    const char *msg = json_is_object(root) ? json_error_message(root) : NULL;
    json_t *f;
    if (msg && *msg) {
        f = weir__failure_new(provider, code, "%s", msg);
    } else if (len) {
        size_t n = len > BODY_EXCERPT_MAX ? BODY_EXCERPT_MAX : len;
        /* do not cut a UTF-8 sequence in half */
        while (n < len && n > 0 && ((unsigned char)body[n] & 0xC0) == 0x80)
            n--;
        f = weir__failure_new(provider, code, "HTTP %ld: %.*s%s", resp->status, (int)n, body,
                              n < len ? "..." : "");
    } else if (resp->status) {
        f = weir__failure_new(provider, code, "HTTP %ld with an empty body", resp->status);
    } else {
        f = weir__failure_new(provider, code, "no HTTP status received");
    }
    json_decref(root);
    if (!f)
        return NULL;
    json_t *rid = NULL;
    if (resp->request_id[0]) {
        rid = json_stringn(resp->request_id, strnlen(resp->request_id, sizeof resp->request_id));
        if (!rid) /* not UTF-8: leave it out rather than lose the failure */
            rid = json_null();
    }
    if ((resp->status > 0 && json_object_set_new(f, "status", json_integer(resp->status))) ||
        (resp->retry_after_ms >= 0 &&
         json_object_set_new(f, "retry_after_ms", json_integer(resp->retry_after_ms))) ||
        (json_is_string(rid) && json_object_set_new(f, "request_id", json_incref(rid)))) {
        json_decref(rid);
        json_decref(f);
        return NULL;
    }
    json_decref(rid);
    return f;
}
