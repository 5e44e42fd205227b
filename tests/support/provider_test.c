/*
 * tests/support/provider_test.c - shared helpers and plugin scenarios of the
 * HTTP provider tests (see provider_test.h).
 */
#define WEIR_NO_API_MACROS /* the fake host fills the table itself */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "failure.h"
#include "http.h"
#include "schema.h"

#include "provider_common.h"
#include "provider_test.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Data, JSON and chunks                                                    */
/* ------------------------------------------------------------------------ */

static char *data_path(const char *name) {
    char *p = weir__asprintf("%s/providers/%s", wt_env("WEIR_TEST_DATA_DIR"), name);
    assert_non_null(p);
    return p;
}

char *pt_read_data(const char *name) {
    char *path = data_path(name);
    char *text = wt_read_file(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    free(path);
    return text;
}

json_t *pt_load_data(const char *name) {
    char *text = pt_read_data(name);
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    if (!v)
        fail_msg("%s: %s", name, jerr.text);
    free(text);
    return v;
}

void pt_assert_json_equal(const json_t *got, const json_t *want) {
    if (json_equal(got, want))
        return;
    char *g = json_dumps(got, JSON_INDENT(1)), *w = json_dumps(want, JSON_INDENT(1));
    print_error("got:\n%s\nwant:\n%s\n", g ? g : "(null)", w ? w : "(null)");
    free(g);
    free(w);
    fail();
}

int pt_collect(void *user_data, json_t *chunk) {
    assert_int_equal(json_array_append_new(user_data, chunk), 0);
    return 0;
}

/* SSE text: events separated by blank lines, "event: " and "data: " lines. */
void pt_feed_sse(const char *text, pt_event_fn fn, void *ctx) {
    char data[65536], event[64] = "";
    size_t len = 0;
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n == 0) {
            if (len)
                fn(ctx, event, data, len);
            len = 0;
            event[0] = '\0';
        } else if (n > 7 && strncmp(line, "event: ", 7) == 0) {
            snprintf(event, sizeof event, "%.*s", (int)(n - 7), line + 7);
        } else if (n >= 5 && strncmp(line, "data:", 5) == 0) {
            size_t skip = n > 5 && line[5] == ' ' ? 6 : 5;
            if (len)
                data[len++] = '\n';
            assert_true(len + n - skip < sizeof data);
            memcpy(data + len, line + skip, n - skip);
            len += n - skip;
        }
        line += n + (end ? 1 : 0);
    }
    if (len)
        fn(ctx, event, data, len);
}

/* Exactly one finish, and it is the last chunk; its reason (borrowed). */
json_t *pt_finish_reason(const json_t *chunks) {
    size_t n = json_array_size(chunks), finishes = 0, i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), "finish") == 0)
            finishes++;
    }
    assert_int_equal(finishes, 1);
    json_t *last = json_array_get(chunks, n - 1);
    assert_string_equal(json_string_value(json_object_get(last, "type")), "finish");
    return json_object_get(last, "reason");
}

void pt_assert_failure(const json_t *chunks, const char *kind, const char *code,
                       const char *message) {
    json_t *reason = pt_finish_reason(chunks);
    assert_string_equal(json_string_value(json_object_get(reason, "kind")), kind);
    json_t *f = json_object_get(reason, "failure");
    assert_string_equal(json_string_value(json_object_get(f, "code")), code);
    assert_string_equal(json_string_value(json_object_get(f, "provider")), "llm");
    if (message)
        assert_string_equal(json_string_value(json_object_get(f, "message")), message);
}

/* Assemble chunks into an assistant message (as the core does); *usage gets
 * the usage chunk's object (new reference) or NULL. */
json_t *pt_assemble(const json_t *chunks, json_t **usage) {
    json_t *content = json_array();
    *usage = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        json_int_t index = json_integer_value(json_object_get(c, "index"));
        json_t *block = json_array_get(content, (size_t)index);
        if (strcmp(type, "block-start") == 0) {
            const char *bt = json_string_value(json_object_get(c, "block_type"));
            assert_int_equal(index, json_array_size(content));
            json_array_append_new(content, strcmp(bt, "tool_call") == 0
                                               ? json_pack("{s:s,s:s,s:s,s:s}", "type", "tool_call",
                                                           "id", "", "name", "", "arguments", "")
                                               : json_pack("{s:s,s:s}", "type", bt, "text", ""));
        } else if (strcmp(type, "text-delta") == 0 || strcmp(type, "reasoning-delta") == 0) {
            char *t = weir__asprintf("%s%s", json_string_value(json_object_get(block, "text")),
                                     json_string_value(json_object_get(c, "text")));
            json_object_set_new(block, "text", json_string(t));
            free(t);
        } else if (strcmp(type, "tool-call-delta") == 0) {
            if (json_object_get(c, "id"))
                json_object_set(block, "id", json_object_get(c, "id"));
            if (json_object_get(c, "name"))
                json_object_set(block, "name", json_object_get(c, "name"));
            char *a = weir__asprintf("%s%s", json_string_value(json_object_get(block, "arguments")),
                                     json_string_value(json_object_get(c, "arguments_delta")));
            json_object_set_new(block, "arguments", json_string(a));
            free(a);
        } else if (strcmp(type, "usage") == 0) {
            *usage = json_incref(json_object_get(c, "usage"));
        }
    }
    return json_pack("{s:s,s:o}", "role", "assistant", "content", content);
}

/* ------------------------------------------------------------------------ */
/* A provider's pure parts, driven the same way                             */
/* ------------------------------------------------------------------------ */

typedef struct feed_ctx {
    const pt_provider_ops *ops;
    void *decoder;
} feed_ctx;

static void feed_event(void *ctx, const char *event, const char *data, size_t len) {
    feed_ctx *f = ctx;
    f->ops->decoder_event(f->decoder, event, data, len);
}

void pt_feed_decoder(const pt_provider_ops *ops, void *decoder, const char *sse) {
    feed_ctx f = {ops, decoder};
    pt_feed_sse(sse, feed_event, &f);
}

json_t *pt_decode_text(const pt_provider_ops *ops, const char *sse) {
    json_t *chunks = json_array();
    void *d = ops->decoder_new(pt_collect, chunks);
    assert_non_null(d);
    pt_feed_decoder(ops, d, sse);
    assert_int_equal(ops->decoder_end(d, NULL, false), 0);
    ops->decoder_free(d);
    return chunks;
}

json_t *pt_decode_file(const pt_provider_ops *ops, const char *name) {
    char *sse = pt_read_data(name);
    json_t *chunks = pt_decode_text(ops, sse);
    free(sse);
    return chunks;
}

void pt_check_stream(const pt_provider_ops *ops, const char *sse, const char *expected) {
    json_t *chunks = pt_decode_file(ops, sse);
    json_t *want = pt_load_data(expected);
    pt_assert_json_equal(chunks, want);
    pt_finish_reason(chunks);
    json_decref(want);
    json_decref(chunks);
}

void pt_check_request_survives_allocation_failures(const pt_provider_ops *ops) {
    char name[128];
    snprintf(name, sizeof name, "%s/request.expected.json", ops->dir);
    json_t *request = pt_load_data("request.json");
    json_t *want = pt_load_data(name);
    for (long n = 1;; n++) {
        char msg[256] = "";
        weir__alloc_fail_after(n);
        json_t *body = ops->request_body(request, msg, sizeof msg);
        weir__alloc_fail_after(-1);
        if (body) {
            pt_assert_json_equal(body, want);
            json_decref(body);
            break;
        }
        assert_string_equal(msg, "out of memory");
        assert_true(n < 100000);
    }
    json_decref(want);
    json_decref(request);
}

void pt_check_transport_failure_and_abort(const pt_provider_ops *ops, const char *partial_sse) {
    json_t *chunks = json_array();
    void *d = ops->decoder_new(pt_collect, chunks);
    pt_feed_decoder(ops, d, partial_sse);
    ops->decoder_end(d, json_pack("{s:s,s:s}", "code", "TIMEOUT", "message", "idle"), false);
    ops->decoder_free(d);
    pt_assert_failure(chunks, "error", "TIMEOUT", "idle");
    json_decref(chunks);

    chunks = json_array();
    d = ops->decoder_new(pt_collect, chunks);
    ops->decoder_end(
        d, json_pack("{s:s,s:s,s:s}", "code", "ABORTED", "message", "cancelled", "provider", "llm"),
        false);
    ops->decoder_free(d);
    pt_assert_failure(chunks, "aborted", "ABORTED", "cancelled");
    json_decref(chunks);

    chunks = json_array();
    d = ops->decoder_new(pt_collect, chunks);
    ops->decoder_end(d, NULL, true);
    ops->decoder_free(d);
    pt_assert_failure(chunks, "aborted", "ABORTED", "the call was cancelled");
    json_decref(chunks);
}

void pt_check_malformed_is_truncated_and_escaped(const pt_provider_ops *ops, const char *unit) {
    char data[600];
    memset(data, 'a', sizeof data);
    data[0] = '\x01';
    data[1] = '\\';
    data[2] = '\xff';
    json_t *chunks = json_array();
    void *d = ops->decoder_new(pt_collect, chunks);
    assert_int_not_equal(ops->decoder_event(d, "", data, sizeof data), 0);
    ops->decoder_end(d, NULL, false);
    ops->decoder_free(d);
    char want[400];
    int n = snprintf(want, sizeof want, "malformed stream %s (invalid JSON): \\x01\\\\\\xff", unit);
    memset(want + n, 'a', 197);
    strcpy(want + n + 197, "...");
    pt_assert_failure(chunks, "error", "TRANSPORT", want);
    json_decref(chunks);
}

/* Keeps nothing; counts finishes. */
static int collect_lossy(void *user_data, json_t *chunk) {
    int *finishes = user_data;
    if (strcmp(json_string_value(json_object_get(chunk, "type")), "finish") == 0)
        (*finishes)++;
    json_decref(chunk);
    return 0;
}

void pt_check_decoder_survives_allocation_failures(const pt_provider_ops *ops) {
    char name[128];
    snprintf(name, sizeof name, "%s/tool_calls.sse", ops->dir);
    char *sse = pt_read_data(name);
    for (long n = 1;; n++) {
        int finishes = 0;
        weir__alloc_fail_after(n);
        void *d = ops->decoder_new(collect_lossy, &finishes);
        int end = -1;
        if (d) {
            pt_feed_decoder(ops, d, sse);
            end = ops->decoder_end(d, NULL, false);
            ops->decoder_free(d);
        }
        long used = weir__alloc_fail_after(-1);
        /* exactly one finish unless the finish itself could not be built */
        assert_int_equal(finishes, end == 0 ? 1 : 0);
        if (used < n)
            break; /* nothing failed: the whole stream decoded */
        assert_true(n < 100000);
    }
    free(sse);
}

/* ------------------------------------------------------------------------ */
/* The plugin through a fake host (real HTTP, loopback mock LLM)            */
/* ------------------------------------------------------------------------ */

pt_fake_host pt_host;
const char *pt_plugin_file;

static const char *fake_plugin_id(const weir_plugin *self) {
    (void)self;
    return "llm";
}
static void fake_set_data(weir_plugin *self, void *data) {
    (void)self;
    pt_host.data = data;
}
static void *fake_data(const weir_plugin *self) {
    (void)self;
    return pt_host.data;
}
static void fake_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static void fake_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...) {
    (void)self;
    (void)level;
    size_t used = strlen(pt_host.log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pt_host.log + used, sizeof pt_host.log - used, fmt, ap);
    va_end(ap);
}
/* Hooks: the providers listen to agent/created and agent/disposed only (their
 * request cache); the tests call the listeners with a NULL call. */
static int fake_hook_register(weir_plugin *self, const char *hook, weir_hook_fn fn,
                              const weir_hook_opts *opts) {
    (void)self;
    if (strcmp(hook, "agent/disposed") == 0) {
        pt_host.disposed = fn;
        pt_host.disposed_data = opts ? opts->user_data : NULL;
    } else if (strcmp(hook, "agent/created") == 0) {
        pt_host.created = fn;
        pt_host.created_data = opts ? opts->user_data : NULL;
    } else {
        return WEIR_E_INVAL;
    }
    return WEIR_OK;
}
static int fake_register(weir_plugin *self, const weir_provider *provider, void *self_ptr) {
    (void)self;
    pt_host.provider = provider;
    pt_host.provider_self = self_ptr;
    return WEIR_OK;
}
static int fake_emit(weir_stream *stream, json_t *chunk) {
    (void)stream;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (pt_host.cancel_on && type && strcmp(type, pt_host.cancel_on) == 0)
        weir__signal_cancel(&pt_host.signal, "user");
    bool cancelled = weir__signal_cancelled(&pt_host.signal);
    json_array_append_new(pt_host.chunks, chunk);
    return cancelled ? WEIR_E_CANCELLED : WEIR_OK;
}
static weir_signal *fake_stream_signal(weir_stream *stream) {
    (void)stream;
    return &pt_host.signal;
}
static int fake_http_sse(weir_stream *stream, const weir_http_request *req, weir_sse_fn on_event,
                         void *ud, weir_http_response *resp, json_t **failure) {
    (void)stream;
    return weir__http_sse(pt_host.http, &pt_host.signal, req, on_event, ud, resp, failure);
}
static json_t *fake_failure_new(const char *provider, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static json_t *fake_failure_new(const char *provider, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *f = weir__failure_vnew(provider, code, fmt, ap);
    va_end(ap);
    return f;
}

const weir_api pt_fake_api = {
    .abi_major = WEIR_ABI_MAJOR,
    .abi_minor = WEIR_ABI_MINOR,
    .struct_size = sizeof(weir_api),
    .plugin_id = fake_plugin_id,
    .plugin_set_data = fake_set_data,
    .plugin_data = fake_data,
    .log = fake_log,
    .signal_cancelled = weir__signal_cancelled,
    .provider_register = fake_register,
    .hook_register = fake_hook_register,
    .stream_emit = fake_emit,
    .stream_signal = fake_stream_signal,
    .http_sse = fake_http_sse,
    .http_response_clear = weir__http_response_clear,
    .failure_from_http = weir__failure_from_http,
    .failure_new = fake_failure_new,
    .http_get = weir__http_get, /* the window probe (provider-openai) */
};

static void *plugin_handle;
const weir_plugin_desc *pt_plugin_desc;

int pt_plugin_setup(void **state) {
    (void)state;
    if (!plugin_handle) {
        char *path = weir__asprintf("%s/%s", wt_env("WEIR_TEST_PLUGIN_DIR"), pt_plugin_file);
        plugin_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!plugin_handle)
            fail_msg("dlopen %s: %s", path, dlerror());
        free(path);
        weir_plugin_describe_fn describe =
            (weir_plugin_describe_fn)dlsym(plugin_handle, WEIR_PLUGIN_ENTRY_SYMBOL);
        assert_non_null(describe);
        pt_plugin_desc = describe();
    }
    memset(&pt_host, 0, sizeof pt_host);
    assert_int_equal(weir__signal_init(&pt_host.signal), 0);
    assert_int_equal(weir__http_create(&pt_host.http), 0);
    pt_host.chunks = json_array();
    return 0;
}

int pt_plugin_teardown(void **state) {
    (void)state;
    if (pt_plugin_desc->fini && pt_host.data)
        pt_plugin_desc->fini(NULL);
    weir__http_destroy(pt_host.http);
    weir__signal_destroy(&pt_host.signal);
    json_decref(pt_host.chunks);
    return 0;
}

/* `tmpl` with its one "@BASE@" replaced by `base` (malloc'd). */
static char *with_base(const char *tmpl, const char *base) {
    const char *at = strstr(tmpl, "@BASE@");
    assert_non_null(at);
    char *out = weir__asprintf("%.*s%s%s", (int)(at - tmpl), tmpl, base, at + 6);
    assert_non_null(out);
    return out;
}

mock_llm *pt_run_plugin(const char *script, const char *config_tmpl, const char *request_json,
                        int *rc) {
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    char *base = mock_llm_base_url(m);
    char *config_text = with_base(config_tmpl, base);
    json_t *config = json_loads(config_text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err), WEIR_OK);
    assert_non_null(pt_host.provider);
    json_t *request =
        request_json ? json_loads(request_json, 0, NULL) : pt_load_data("request.json");
    assert_non_null(request);
    void *call = NULL;
    assert_int_equal(pt_host.provider->prepare_call(pt_host.provider_self, request, &pt_host.signal,
                                                    &call, &err),
                     WEIR_OK);
    *rc = pt_host.provider->stream(pt_host.provider_self, call, request, (weir_stream *)&pt_host);
    json_decref(request);
    json_decref(config);
    free(config_text);
    free(base);
    return m;
}

mock_llm *pt_start_plugin(const char *script, const char *config_tmpl) {
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    char *base = mock_llm_base_url(m);
    char *config_text = with_base(config_tmpl, base);
    json_t *config = json_loads(config_text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    memset(&err, 0, sizeof err);
    if (pt_plugin_desc->init(NULL, &pt_fake_api, config, &err) != WEIR_OK)
        fail_msg("init: %s", err.text);
    assert_non_null(pt_host.provider);
    json_decref(config);
    free(config_text);
    free(base);
    return m;
}

void pt_assert_model_info(const char *model, long context_window, long max_output) {
    json_t *info = pt_host.provider->model_info(pt_host.provider_self, model);
    if (info && (json_object_get(info, "price") || json_object_get(info, "server_compaction"))) {
        /* the limits only (pt_assert_model_price; server_compaction has tests of its own) */
        json_t *limits = json_copy(info);
        json_decref(info);
        info = limits;
        json_object_del(info, "price");
        json_object_del(info, "server_compaction");
        if (json_object_size(info) == 0) {
            json_decref(info);
            info = NULL;
        }
    }
    json_t *want = context_window || max_output ? json_object() : NULL;
    if (context_window)
        json_object_set_new(want, "context_window", json_integer(context_window));
    if (max_output)
        json_object_set_new(want, "max_output", json_integer(max_output));
    if (!json_equal(info, want) && (info || want)) {
        char *got = info ? json_dumps(info, JSON_COMPACT) : NULL;
        fail_msg("model_info(%s): got %s, want {%ld, %ld}", model ? model : "NULL",
                 got ? got : "NULL", context_window, max_output);
    }
    json_decref(info);
    json_decref(want);
}

void pt_assert_no_secret(void) {
    char *dump = json_dumps(pt_host.chunks, JSON_COMPACT);
    assert_null(strstr(dump, "SECRET"));
    assert_null(strstr(pt_host.log, "SECRET"));
    free(dump);
}

/* True when `code` is one of the '|'-separated codes in `list`. */
static bool code_in(const char *list, const char *code) {
    size_t n = code ? strlen(code) : 0;
    for (const char *p = list; code && p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (strncmp(p, code, n) == 0 && (p[n] == '|' || p[n] == '\0'))
            return true;
    return false;
}

void pt_check_fault_mapping(const char *base_url, const char *overloaded_codes) {
    const struct {
        const char *fault, *kind, *code;
    } cases[] = {
        {"rate_limit", "error", "RATE_LIMIT"},
        {"server_error", "error", "SERVER"},
        {"overloaded", "error", overloaded_codes},
        {"auth", "error", "AUTH"},
        {"overflow", "error", "CONTEXT_WINDOW_EXCEEDED"},
        {"reset", "error", "TRANSPORT"},
        {"malformed", "error", "TRANSPORT"},
        {"truncated", "error", "TRANSPORT"},
        {"inband_error", "error", "OVERLOADED"},
        {"stall", "error", "TIMEOUT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        char script[256];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"text\":\"Hello there, friend\",\"fault\":\"%s\"}]}",
                 cases[i].fault);
        char config[256];
        snprintf(config, sizeof config,
                 "{\"base_url\":\"%s\",\"api_key\":\"" PT_KEY "\",\"stream_idle_timeout_ms\":300}",
                 base_url);
        int rc;
        mock_llm *m = pt_run_plugin(script, config, NULL, &rc);
        assert_int_equal(rc, WEIR_OK);
        json_t *reason = pt_finish_reason(pt_host.chunks);
        json_t *f = json_object_get(reason, "failure");
        const char *code = json_string_value(json_object_get(f, "code"));
        if (!code_in(cases[i].code, code))
            fail_msg("fault %s: got %s (%s)", cases[i].fault, code ? code : "(none)",
                     json_string_value(json_object_get(f, "message")));
        assert_string_equal(json_string_value(json_object_get(reason, "kind")), cases[i].kind);
        assert_string_equal(json_string_value(json_object_get(f, "provider")), "llm");
        if (strcmp(cases[i].fault, "rate_limit") == 0)
            assert_int_equal(json_integer_value(json_object_get(f, "retry_after_ms")), 1000);
        pt_assert_no_secret();
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

/* Run one stream against a mock answering `entry` (one script entry) and
 * assert its finish: "error", `code`, status `status` (0: none) and a
 * message that is `message`, or starts with it when `prefix`. */
static void check_one_answer(const char *base_url, const char *entry, const char *code,
                             long status, const char *message, bool prefix) {
    pt_plugin_setup(NULL);
    char script[1024], config[256];
    snprintf(script, sizeof script, "{\"requests\":[%s]}", entry);
    snprintf(config, sizeof config,
             "{\"base_url\":\"%s\",\"api_key\":\"" PT_KEY "\",\"stream_idle_timeout_ms\":2000}",
             base_url);
    int rc;
    mock_llm *m = pt_run_plugin(script, config, NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    pt_assert_failure(pt_host.chunks, "error", code, NULL);
    json_t *f = json_object_get(pt_finish_reason(pt_host.chunks), "failure");
    const char *msg = json_string_value(json_object_get(f, "message"));
    if (!msg || (prefix ? strncmp(msg, message, strlen(message)) : strcmp(msg, message)))
        fail_msg("%s: got \"%s\", want \"%s\"%s", entry, msg ? msg : "(none)", message,
                 prefix ? "..." : "");
    assert_int_equal(json_integer_value(json_object_get(f, "status")), status);
    pt_assert_no_secret();
    mock_llm_stop(m);
    pt_plugin_teardown(NULL);
}

void pt_check_not_an_event_stream(const char *base_url) {
    /* a captive portal's page, quoting the key as a careless one might */
    check_one_answer(base_url,
                     "{\"fault\":\"raw\",\"status\":200,\"headers\":{\"Content-Type\":"
                     "\"text/html\"},\"body\":\"<html><body>Hotel Wi-Fi: log in\\n<!-- "
                     PT_KEY " --></body></html>\"}",
                     "UNKNOWN", 200,
                     "HTTP 200 with Content-Type text/html (not an event stream): <html><body>"
                     "Hotel Wi-Fi: log in\\n<!-- " PC_REDACTED " --></body></html>",
                     false);
    /* a gzip body weir did not ask for */
    check_one_answer(base_url,
                     "{\"fault\":\"raw\",\"status\":200,\"headers\":{\"Content-Type\":"
                     "\"text/event-stream\",\"Content-Encoding\":\"gzip\"},\"body_hex\":"
                     "\"1f8b08000000000002ff4b492c49b452a8564a54b232ace5e202003e7574090f000000\"}",
                     "UNKNOWN", 200,
                     "HTTP 200 with Content-Type text/event-stream and Content-Encoding gzip (not "
                     "an event stream; weir did not ask for compression): \\x1f\\x8b\\x08\\x00",
                     true);
    /* a 2 MiB header line */
    check_one_answer(base_url,
                     "{\"fault\":\"raw\",\"status\":200,\"headers\":{\"Content-Type\":"
                     "\"text/event-stream\"},\"pad_lines\":1,\"pad_bytes\":2097152}",
                     "UNKNOWN", 200, "response header too large: ", true);
}

void pt_check_json_instead_of_a_stream(const char *base_url) {
    /* a server that does not stream: its whole answer as JSON */
    check_one_answer(base_url,
                     "{\"fault\":\"raw\",\"status\":200,\"headers\":{\"Content-Type\":"
                     "\"application/json\"},\"body\":\"{\\\"id\\\":\\\"x\\\",\\\"choices\\\":[]}\"}",
                     "UNKNOWN", 200,
                     "HTTP 200 with a JSON body (not an event stream: does the server stream?): "
                     "{\"id\":\"x\",\"choices\":[]}",
                     false);
    /* an error sent with a 200: classified as an in-band error */
    check_one_answer(base_url,
                     "{\"fault\":\"raw\",\"status\":200,\"headers\":{\"Content-Type\":"
                     "\"application/json\"},\"body\":\"{\\\"error\\\":{\\\"message\\\":"
                     "\\\"model 'm' is not loaded\\\",\\\"type\\\":\\\"invalid_request_error\\\"}}\"}",
                     "INVALID_REQUEST", 200, "model 'm' is not loaded", false);
}

void pt_check_echoed_secrets_are_scrubbed(const char *base_url, const char *key_header) {
    static const struct {
        const char *fault, *code;
        long status;
    } faults[] = {{"auth", "AUTH", 401}, {"inband_error", "OVERLOADED", 0},
                  {"malformed", "TRANSPORT", 0}};
    char configs[2][512];
    snprintf(configs[0], sizeof configs[0],
             "{\"base_url\":\"%s\",\"api_key\":\"" PT_KEY "\",\"stream_idle_timeout_ms\":300}",
             base_url);
    snprintf(configs[1], sizeof configs[1],
             "{\"base_url\":\"%s\",\"headers\":{%s},\"stream_idle_timeout_ms\":300}", base_url,
             key_header);
    for (size_t c = 0; c < 2; c++) {
        for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
            pt_plugin_setup(NULL);
            char script[256];
            snprintf(script, sizeof script,
                     "{\"requests\":[{\"text\":\"Hello there\",\"fault\":\"%s\","
                     "\"echo_key\":true}]}",
                     faults[i].fault);
            int rc;
            mock_llm *m = pt_run_plugin(script, configs[c], NULL, &rc);
            assert_int_equal(rc, WEIR_OK);
            json_t *f = json_object_get(pt_finish_reason(pt_host.chunks), "failure");
            const char *code = json_string_value(json_object_get(f, "code"));
            const char *message = json_string_value(json_object_get(f, "message"));
            if (!code || strcmp(code, faults[i].code) != 0 || !message ||
                !strstr(message, PC_REDACTED))
                fail_msg("config %zu, fault %s: got %s: %s", c, faults[i].fault,
                         code ? code : "(none)", message ? message : "(none)");
            if (faults[i].status)
                assert_int_equal(json_integer_value(json_object_get(f, "status")),
                                 faults[i].status);
            pt_assert_no_secret();
            mock_llm_stop(m);
            pt_plugin_teardown(NULL);
        }
    }
}

void pt_check_cancel_mid_stream(const char *config) {
    pt_host.cancel_on = "text-delta";
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"text\":\"a long answer in many pieces\",\"chunk_size\":2}]}", config,
        NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    pt_assert_failure(pt_host.chunks, "aborted", "ABORTED", NULL);
    mock_llm_stop(m);
}

void pt_check_total_timeout(const char *base_url) {
    char config[256];
    snprintf(config, sizeof config,
             "{\"base_url\":\"%s\",\"api_key\":\"" PT_KEY "\",\"stream_idle_timeout_ms\":200,"
             "\"stream_total_timeout_ms\":300}",
             base_url);
    int rc;
    int64_t t0 = weir__now_ms();
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"text\":\"never\",\"fault\":\"keepalive\",\"chunk_delay_ms\":20}]}",
        config, NULL, &rc);
    int64_t took = weir__now_ms() - t0;
    assert_int_equal(rc, WEIR_OK);
    pt_assert_failure(pt_host.chunks, "error", "TIMEOUT",
                      "total timeout (stream_total_timeout_ms) of 300 ms expired before the "
                      "response ended");
    if (took < 300 || took > 5000)
        fail_msg("the stream took %lld ms", (long long)took);
    pt_assert_no_secret();
    mock_llm_stop(m);
}

void pt_check_bad_config_and_call_config(const char *temperature_message) {
    static const struct {
        const char *config, *message;
    } cases[] = {
        {"{\"headers\":{\"Bad Name\":\"x\"}}",
         "config.headers: \"Bad Name\" is not a valid header name"},
        {"{\"headers\":{\"X-A\":\"a\\r\\nInjected: " PT_KEY "\"}}",
         "config.headers.X-A: the value must be a string without line breaks"},
        {"{\"connect_timeout_ms\":0}",
         "config.connect_timeout_ms: expected a positive integer (milliseconds)"},
        {"{\"stream_total_timeout_ms\":-1}",
         "config.stream_total_timeout_ms: expected 0 (off) or a positive integer "
         "(milliseconds)"},
        {"{\"models\":{\"m\":{\"context_window\":\"big\"}}}",
         "config.models.m: expected {context_window, max_output} positive integers"},
        {"{\"models\":{\"m\":{\"price\":{\"input\":-1,\"output\":2}}}}",
         "config.models.m.price.input: expected a number >= 0 (USD per million tokens)"},
        {"{\"models\":{\"m\":{\"price\":{\"input\":1,\"output\":\"2\"}}}}",
         "config.models.m.price.output: expected a number >= 0 (USD per million tokens)"},
        {"{\"models\":{\"m\":{\"price\":{\"input\":1}}}}",
         "config.models.m.price.output: missing (input and output are required)"},
        {"{\"models\":{\"m\":{\"price\":{\"input\":1,\"output\":2,\"cache_write\":1}}}}",
         "config.models.m.price.cache_write: unknown member (input, cached_input, "
         "cache_write_5m, cache_write_1h, output)"},
        {"{\"models\":{\"m\":{\"price\":3}}}",
         "config.models.m.price: expected an object {input, output, cached_input?, "
         "cache_write_5m?, cache_write_1h?} (USD per million tokens)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *config = json_loads(cases[i].config, 0, NULL);
        assert_non_null(config);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err),
                         WEIR_E_PLUGIN_CONFIG);
        assert_string_equal(err.text, cases[i].message);
        assert_string_equal(err.plugin, "llm");
        json_decref(config);
    }
    json_t *config = json_object();
    weir_error err;
    assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err), WEIR_OK);
    void *call = NULL;
    json_t *bad = json_pack("{s:s,s:s,s:i}", "provider", "llm", "model", "m", "max_tokens", 0);
    assert_int_equal(
        pt_host.provider->prepare_call(pt_host.provider_self, bad, &pt_host.signal, &call, &err),
        WEIR_E_INVAL);
    assert_string_equal(err.text, "call config: \"max_tokens\" must be a positive integer");
    json_decref(bad);
    bad = json_pack("{s:s,s:f}", "model", "m", "temperature", 3.0);
    assert_int_equal(
        pt_host.provider->prepare_call(pt_host.provider_self, bad, &pt_host.signal, &call, &err),
        WEIR_E_INVAL);
    assert_string_equal(err.text, temperature_message);
    json_decref(bad);
    bad = json_pack("{s:s}", "provider", "llm");
    assert_int_equal(
        pt_host.provider->prepare_call(pt_host.provider_self, bad, &pt_host.signal, &call, &err),
        WEIR_E_INVAL);
    assert_string_equal(err.text, "call config: \"model\" must be a non-empty string");
    json_decref(bad);
    json_decref(config);
}

void pt_check_config_schema(const char *plugin_name) {
    assert_string_equal(pt_plugin_desc->name, plugin_name);
    static const char *const good[] = {
        "{}",
        "{\"base_url\":\"http://127.0.0.1:1\",\"api_key\":\"k\",\"headers\":{\"X-A\":\"b\"},"
        "\"models\":{\"m\":{\"context_window\":128000,\"max_output\":16384}},"
        "\"connect_timeout_ms\":10000,\"stream_idle_timeout_ms\":300000,"
        "\"stream_total_timeout_ms\":1800000}",
        "{\"stream_total_timeout_ms\":0}",
        /* every provider's models.<id> takes options, headers and price */
        "{\"options\":{\"service_tier\":\"auto\"},\"models\":{\"m\":{\"options\":{},"
        "\"headers\":{\"X-B\":\"c\"},\"price\":{\"input\":1,\"output\":2}}}}",
    };
    static const char *const bad[] = {
        "{\"base_url\":1}",
        "{\"headers\":{\"X-A\":1}}",
        "{\"models\":{\"m\":{\"context_window\":0}}}",
        "{\"connect_timeout_ms\":\"10\"}",
        "{\"stream_total_timeout_ms\":-1}",
        "{\"api_keys\":\"typo\"}",
    };
    char msg[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *config = json_loads(good[i], 0, NULL);
        if (weir__schema_validate_text(pt_plugin_desc->config_schema, config, msg, sizeof msg) != 0)
            fail_msg("%s: %s", good[i], msg);
        json_decref(config);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *config = json_loads(bad[i], 0, NULL);
        assert_int_equal(
            weir__schema_validate_text(pt_plugin_desc->config_schema, config, msg, sizeof msg), -1);
        json_decref(config);
    }
}
