/*
 * tests/support/provider_test.h - what the HTTP provider tests
 * (test_provider_openai, test_provider_anthropic) share: test data, JSON and
 * chunk assertions, SSE text splitting, and a fake host table that loads a
 * built provider plugin and runs it against the loopback mock LLM (real core
 * HTTP client), plus the plugin scenarios whose only differences are
 * parameters.  cmocka assertions; single-threaded test use only.
 */
#ifndef WEIR_TEST_PROVIDER_TEST_H
#define WEIR_TEST_PROVIDER_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http.h"
#include "mock_llm.h"
#include "provider_cache.h"
#include "cancel.h"
#include "weir/plugin.h"

/** The API key the plugin tests configure; it must never leak. */
#define PT_KEY "sk-test-SECRET-12345"

/* ------------------------------------------------------------------------ */
/* Data, JSON and chunks                                                    */
/* ------------------------------------------------------------------------ */

/** $WEIR_TEST_DATA_DIR/providers/<name> as text (malloc'd); fails the test if absent. */
char *pt_read_data(const char *name);

/** $WEIR_TEST_DATA_DIR/providers/<name> parsed (new reference); fails the test if bad. */
json_t *pt_load_data(const char *name);

/** Fail the test, printing both, unless `got` equals `want` (both borrowed). */
void pt_assert_json_equal(const json_t *got, const json_t *want);

/** A decoder emit callback appending each chunk (stolen) to the array `user_data`. */
int pt_collect(void *user_data, json_t *chunk);

/** Called by pt_feed_sse for each event: name ("" when none) and data (borrowed). */
typedef void (*pt_event_fn)(void *ctx, const char *event, const char *data, size_t len);

/**
 * Split SSE text (events separated by blank lines; "event: " and "data: "
 * lines, data lines joined by '\n') and call `fn` for each event.
 */
void pt_feed_sse(const char *text, pt_event_fn fn, void *ctx);

/** Assert exactly one finish chunk, last in `chunks`; its reason (borrowed). */
json_t *pt_finish_reason(const json_t *chunks);

/**
 * Assert the finish has `kind` and a failure of `code` from provider "llm",
 * with `message` unless it is NULL.
 */
void pt_assert_failure(const json_t *chunks, const char *kind, const char *code,
                       const char *message);

/**
 * Assemble chunks into an assistant message (as the core does; new
 * reference); *usage gets the usage chunk's object (new reference) or NULL.
 */
json_t *pt_assemble(const json_t *chunks, json_t **usage);

/* ------------------------------------------------------------------------ */
/* A provider's pure parts, driven the same way                             */
/* ------------------------------------------------------------------------ */

/** One provider's stream decoder and request translation, as the shared checks call them. */
typedef struct pt_provider_ops {
    /** A decoder for provider "llm" emitting to `emit` (NULL when out of memory). */
    void *(*decoder_new)(int (*emit)(void *user_data, json_t *chunk), void *user_data);
    /** Feed one SSE event (name may be ""; data borrowed). */
    int (*decoder_event)(void *decoder, const char *event, const char *data, size_t len);
    /** End the transfer (steals `failure`). */
    int (*decoder_end)(void *decoder, json_t *failure, bool aborted);
    void (*decoder_free)(void *decoder);
    /** Translate a canonical request (new reference, or NULL with `msg`). */
    json_t *(*request_body)(const json_t *request, char *msg, size_t size);
    const char *dir; /* the provider's test data folder under providers/ */
} pt_provider_ops;

/** Feed SSE text (see pt_feed_sse) to `decoder`. */
void pt_feed_decoder(const pt_provider_ops *ops, void *decoder, const char *sse);

/** Decode a whole SSE text; the chunks (new reference).  Asserts one finish went out. */
json_t *pt_decode_text(const pt_provider_ops *ops, const char *sse);

/** pt_decode_text of the data file providers/<name>. */
json_t *pt_decode_file(const pt_provider_ops *ops, const char *name);

/** Decoding providers/<sse> gives exactly the chunks of providers/<expected>. */
void pt_check_stream(const pt_provider_ops *ops, const char *sse, const char *expected);

/** request.json translates to <dir>/request.expected.json or fails "out of memory". */
void pt_check_request_survives_allocation_failures(const pt_provider_ops *ops);

/**
 * An idle failure after `partial_sse` ends the stream with it; an ABORTED
 * failure and a bare abort end it "aborted".
 */
void pt_check_transport_failure_and_abort(const pt_provider_ops *ops, const char *partial_sse);

/** 600 bytes of invalid JSON are quoted escaped and cut at 200; `unit` "chunk" or "event". */
void pt_check_malformed_is_truncated_and_escaped(const pt_provider_ops *ops, const char *unit);

/** Decoding <dir>/tool_calls.sse under every allocation failure emits exactly one finish. */
void pt_check_decoder_survives_allocation_failures(const pt_provider_ops *ops);

/* ------------------------------------------------------------------------ */
/* The plugin through a fake host (real HTTP, loopback mock LLM)            */
/* ------------------------------------------------------------------------ */

/** What the fake host saw.  Reset by pt_plugin_setup. */
typedef struct pt_fake_host {
    const weir_provider *provider; /* registered by the plugin's init */
    void *provider_self;
    void *data;     /* the plugin's data */
    json_t *chunks; /* every chunk the plugin emitted */
    char log[8192]; /* every log line, concatenated */
    weir__http *http;
    weir_signal signal;
    const char *cancel_on; /* chunk type whose arrival cancels the signal */
    weir_hook_fn disposed; /* the plugin's agent/disposed listener, if any */
    void *disposed_data;   /* its user_data */
    weir_hook_fn created;  /* the plugin's agent/created listener, if any */
    void *created_data;    /* its user_data */
} pt_fake_host;

/** The fake host state of the running test. */
extern pt_fake_host pt_host;

/** The fake host's API table. */
extern const weir_api pt_fake_api;

/** File name of the plugin under test in $WEIR_TEST_PLUGIN_DIR; set it in main. */
extern const char *pt_plugin_file;

/** The plugin's descriptor (valid after pt_plugin_setup). */
extern const weir_plugin_desc *pt_plugin_desc;

/** cmocka setup: load the plugin (once) and reset pt_host.  `state` unused. */
int pt_plugin_setup(void **state);

/** cmocka teardown: fini the plugin if it was initialised; free pt_host's state. */
int pt_plugin_teardown(void **state);

/**
 * Start the mock with `script`, init the plugin with `config_tmpl` (its one
 * "@BASE@" is the mock's base URL), run one stream of `request_json` (NULL:
 * providers/request.json); *rc is the stream's status.
 * @return the running mock (stop it with mock_llm_stop).
 */
mock_llm *pt_run_plugin(const char *script, const char *config_tmpl, const char *request_json,
                        int *rc);

/**
 * Start the mock with `script` and init the plugin with `config_tmpl` (its
 * one "@BASE@" is the mock's base URL), without a stream: for model_info.
 * @return the running mock (stop it with mock_llm_stop).
 */
mock_llm *pt_start_plugin(const char *script, const char *config_tmpl);

/**
 * Assert the plugin's model_info for `model` (may be NULL) is exactly
 * {context_window, max_output}, leaving out a member given as 0; both 0:
 * NULL (unknown).
 */
void pt_assert_model_info(const char *model, long context_window, long max_output);

/** Assert the API key appears in no chunk and no log line. */
void pt_assert_no_secret(void);

/**
 * Every mock fault maps to its canonical failure (provider "llm").
 * `base_url` is the config's base_url ("@BASE@" is the mock's);
 * `overloaded_codes` the '|'-separated codes the overloaded fault may give.
 */
void pt_check_fault_mapping(const char *base_url, const char *overloaded_codes);

/**
 * A 200 that is not an event stream (mock "raw"): a text/html page (a
 * captive portal, quoting the key, which is scrubbed), a gzip body with a
 * Content-Encoding, and a 2 MiB header line each end "error" UNKNOWN with
 * status 200 and a message that says what came ("HTTP 200 with
 * Content-Type text/html (not an event stream): <body>", "response header
 * too large: ...").  `base_url` as for pt_check_fault_mapping.
 */
void pt_check_not_an_event_stream(const char *base_url);

/**
 * A 200 JSON body instead of a stream: a whole answer ends "error" UNKNOWN
 * "HTTP 200 with a JSON body (not an event stream: does the server
 * stream?): <body>"; an error object is classified as an in-band error
 * (INVALID_REQUEST with its message).  `base_url` as above.
 */
void pt_check_json_instead_of_a_stream(const char *base_url);

/**
 * A server that quotes the key back (mock "echo_key": the 401 body, an
 * in-band error event, a malformed chunk) still gives the failure's code
 * (and 401), with the key replaced by PC_REDACTED, whether the key is
 * `api_key` or the value of the header `key_header` ("Name": "value" JSON
 * text, its name in another case than the provider's own).
 */
void pt_check_echoed_secrets_are_scrubbed(const char *base_url, const char *key_header);

/** A cancel at the first text-delta ends the stream "aborted" ABORTED. */
void pt_check_cancel_mid_stream(const char *config);

/**
 * A stream kept alive by SSE comments alone (mock "keepalive") ends after
 * stream_total_timeout_ms (300, the idle timeout never fires) with an
 * "error" TIMEOUT whose message names the timeout and its value.
 * `base_url` as for pt_check_fault_mapping.
 */
void pt_check_total_timeout(const char *base_url);

/**
 * Bad configs fail init with their exact messages, and bad call configs fail
 * prepare_call; `temperature_message` is the provider's text for 3.0.
 */
void pt_check_bad_config_and_call_config(const char *temperature_message);

/** The config schema accepts the documented shape and rejects others. */
void pt_check_config_schema(const char *plugin_name);

/* ------------------------------------------------------------------------ */
/* Fuzz targets (header-only: they do not link the test support library)   */
/* ------------------------------------------------------------------------ */

/** What a fuzzed decoder emitted. */
typedef struct pt_fuzz_seen {
    size_t chunks, finishes;
    bool finish_last;
} pt_fuzz_seen;

/** Decoder emit callback counting into the pt_fuzz_seen `user_data`; aborts on an untyped chunk. */
static inline int pt_fuzz_count(void *user_data, json_t *chunk) {
    pt_fuzz_seen *s = user_data;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (!type)
        abort();
    s->chunks++;
    s->finish_last = strcmp(type, "finish") == 0;
    s->finishes += s->finish_last;
    json_decref(chunk);
    return 0;
}

/** Call `line` for each '\n'-separated line of the fuzz input (borrowed). */
static inline void pt_fuzz_lines(const char *data, size_t size,
                                 void (*line)(void *ctx, const char *p, size_t n), void *ctx) {
    const char *p = data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line(ctx, p, n);
        p += n + 1;
    }
}

/** Abort unless the stream ended with exactly one finish chunk, last (when `end` is 0). */
static inline void pt_fuzz_check_end(int end, const pt_fuzz_seen *s) {
    if (end == 0 && (s->finishes != 1 || !s->finish_last))
        abort();
}

/** A request cache (freed with pc_cache_free) with `agent` bound to `owner`, this
 * thread's owner (pc_cache_set_owner) from now on: a memo test's set-up.  NULL
 * when out of memory. */
static inline pc_cache *pt_memo_cache(const void *agent, const void *owner) {
    pc_cache *cache = pc_cache_new(4096, 1 << 20);
    if (cache && pc_cache_bind_agent(cache, agent, owner) != 0) {
        pc_cache_free(cache);
        return NULL;
    }
    pc_cache_set_owner(owner);
    return cache;
}

/** A provider's request text builder, with a request cache (may be NULL). */
typedef char *(*pt_request_text_fn)(const json_t *request, pc_cache *cache, char *msg,
                                    size_t size);

/**
 * Translate `request` (borrowed) without and twice with a request cache;
 * abort unless the three texts (or failure messages) are the same and a
 * body parses as JSON.
 */
static inline void pt_fuzz_check_request(const json_t *request, pt_request_text_fn text) {
    char msg[256], msg2[256];
    char *plain = text(request, NULL, msg, sizeof msg);
    pc_cache *cache = pc_cache_new(4, 1 << 16);
    for (int round = 0; cache && round < 2; round++) {
        char *cached = text(request, cache, msg2, sizeof msg2);
        if (!plain != !cached || (plain && strcmp(plain, cached) != 0) ||
            (!plain && strcmp(msg, msg2) != 0))
            abort();
        free(cached);
    }
    if (plain) { /* well-formed, and the very text jansson would dump */
        json_t *body = json_loads(plain, JSON_REJECT_DUPLICATES, NULL);
        char *again = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (!again || strcmp(again, plain) != 0)
            abort();
        free(again);
        json_decref(body);
    }
    free(plain);
    pc_cache_free(cache);
}

/** A provider's request body builder into a memo (openai_request_build). */
typedef int (*pt_request_build_fn)(const json_t *request, pc_cache *cache, pc_memo *memo,
                                   char *msg, size_t size);

/* The body `build` made in `memo` against the one `text` makes from nothing
 * for `req`: the same text, or the same failure message. */
static inline void pt_fuzz_same_as_plain(const json_t *req, pc_cache *cache,
                                         pt_request_text_fn text, pt_request_build_fn build) {
    char msg[256] = "", msg2[256] = "";
    char *plain = text(req, NULL, msg, sizeof msg);
    pc_memo *memo = pc_cache_memo_take(cache);
    if (!memo)
        abort();
    int rc = build(req, cache, memo, msg2, sizeof msg2);
    if ((plain != NULL) != (rc == 0) ||
        (plain && (memo->text.len != strlen(plain) || memcmp(memo->text.p, plain, memo->text.len))) ||
        (!plain && strcmp(msg, msg2) != 0))
        abort();
    free(plain);
    pc_cache_memo_give(cache, memo);
}

/**
 * The memo oracle: the history of `request` (borrowed) built up one message
 * at a time, then with a message in the middle rewritten (a new object, as a
 * compaction makes) and the last two dropped, each step built through one
 * bound agent's memo: abort unless every body is byte for byte the one built
 * from nothing (or fails with the same message).  At most 40 messages.
 */
static inline void pt_fuzz_check_memo(const json_t *request, pt_request_text_fn text,
                                      pt_request_build_fn build) {
    const json_t *msgs = json_object_get(request, "messages");
    if (!json_is_object(request) || !json_is_array(msgs))
        return;
    static const char owner = 'o', agent = 'a';
    pc_cache *cache = pc_cache_new(64, 1 << 20);
    json_t *req = json_copy((json_t *)(uintptr_t)request), *hist = json_array();
    if (!cache || !req || !hist || pc_cache_bind_agent(cache, &agent, &owner) != 0 ||
        json_object_set(req, "messages", hist) != 0) {
        pc_cache_free(cache);
        json_decref(req);
        json_decref(hist);
        return;
    }
    pc_cache_set_owner(&owner);
    size_t n = json_array_size(msgs) < 40 ? json_array_size(msgs) : 40;
    for (size_t i = 0; i < n; i++) {
        if (json_array_append(hist, json_array_get(msgs, i)) != 0)
            abort();
        pt_fuzz_same_as_plain(req, cache, text, build);
    }
    if (n > 0) {
        json_t *copy = json_deep_copy(json_array_get(hist, n / 2));
        if (!copy || json_array_set_new(hist, n / 2, copy) != 0)
            abort();
        pt_fuzz_same_as_plain(req, cache, text, build);
        for (int k = 0; k < 2 && json_array_size(hist) > 0; k++) {
            if (json_array_remove(hist, json_array_size(hist) - 1) != 0)
                abort();
            pt_fuzz_same_as_plain(req, cache, text, build);
        }
    }
    pc_cache_set_owner(NULL);
    json_decref(hist);
    json_decref(req);
    pc_cache_free(cache);
}

#endif /* WEIR_TEST_PROVIDER_TEST_H */
