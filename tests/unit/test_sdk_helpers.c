/*
 * tests/unit/test_sdk_helpers.c - the plugin author's helpers (issue #36):
 * weir/sdk.h's pure ones (error filling, typed config readers, the token
 * estimate and meter, a message's text, the summary transcript) and the
 * 1.12 members of the api table (agent_route, agent_state, unique_id),
 * through a real host with provider-openai on the mock LLM server and
 * through the test kit.  Each with its bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "host_int.h"
#include "mock_llm.h"
#include "testutil.h"
#include "weir/sdk.h"
#include "weir/testkit.h"

/* ------------------------------------------------------------------------ */
/* Error filling                                                             */
/* ------------------------------------------------------------------------ */

static void error_fill_sets_code_and_text(void **state) {
    (void)state;
    weir_error err;
    memset(&err, 'x', sizeof err);
    assert_int_equal(weir_error_fill(&err, WEIR_E_LIMIT, "row '%s': %d over", "cap", 3),
                     WEIR_E_LIMIT);
    assert_int_equal(err.code, WEIR_E_LIMIT);
    assert_string_equal(err.text, "row 'cap': 3 over");
    assert_string_equal(err.plugin, "");
    assert_string_equal(err.hook, "");
    /* NULL err: only the code comes back */
    assert_int_equal(weir_error_fill(NULL, WEIR_E_NOMEM, "x"), WEIR_E_NOMEM);
    /* a long text is cut, NUL-terminated */
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    weir_error_fill(&err, WEIR_E_INVAL, "%s", big);
    assert_int_equal(strlen(err.text), sizeof err.text - 1);
}

/* ------------------------------------------------------------------------ */
/* Config readers                                                            */
/* ------------------------------------------------------------------------ */

static void config_readers_read_each_type_and_default(void **state) {
    (void)state;
    json_t *cfg = json_loads("{\"s\":\"v\",\"i\":7,\"d\":0.5,\"di\":2,\"b\":true,"
                             "\"a\":[\"x\",\"y\"]}",
                             0, NULL);
    weir_error err;
    weir_config_reader r = weir_config_reader_init(cfg, "row1", &err);
    const char *s = NULL, *s2 = NULL;
    long long i = 0, i2 = 0;
    double d = 0, d2 = 0, d3 = 0;
    bool b = false, b2 = true;
    const json_t *a = NULL, *a2 = (const json_t *)1;
    assert_int_equal(weir_config_string(&r, "s", "dflt", &s), WEIR_OK);
    assert_int_equal(weir_config_string(&r, "none", "dflt", &s2), WEIR_OK);
    assert_int_equal(weir_config_int(&r, "i", 1, 0, 10, &i), WEIR_OK);
    assert_int_equal(weir_config_int(&r, "none", 3, 0, 10, &i2), WEIR_OK);
    assert_int_equal(weir_config_double(&r, "d", 1, 0, 1, &d), WEIR_OK);
    assert_int_equal(weir_config_double(&r, "di", 1, 0, 5, &d2), WEIR_OK);
    assert_int_equal(weir_config_double(&r, "none", 0.25, 0, 1, &d3), WEIR_OK);
    assert_int_equal(weir_config_bool(&r, "b", false, &b), WEIR_OK);
    assert_int_equal(weir_config_bool(&r, "none", false, &b2), WEIR_OK);
    assert_int_equal(weir_config_array(&r, "a", 1, 4, JSON_STRING, &a), WEIR_OK);
    assert_int_equal(weir_config_array(&r, "none", 1, 4, JSON_STRING, &a2), WEIR_OK);
    assert_string_equal(s, "v");
    assert_string_equal(s2, "dflt");
    assert_int_equal(i, 7);
    assert_int_equal(i2, 3);
    assert_true(d == 0.5 && d2 == 2.0 && d3 == 0.25);
    assert_true(b);
    assert_false(b2);
    assert_int_equal(json_array_size(a), 2);
    assert_null(a2);
    assert_int_equal(r.status, WEIR_OK);
    /* NULL config: every field takes its default */
    weir_config_reader none = weir_config_reader_init(NULL, "row1", &err);
    assert_int_equal(weir_config_int(&none, "i", 9, 0, 10, &i), WEIR_OK);
    assert_int_equal(i, 9);
    json_decref(cfg);
}

/* One failing read of `field` in {"i":0,"s":1,"a":[1,"x"],...}: its text. */
static void expect_config_error(const char *config, int (*read)(weir_config_reader *),
                                const char *text) {
    json_t *cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
    weir_error err;
    memset(&err, 0, sizeof err);
    weir_config_reader r = weir_config_reader_init(cfg, "cap", &err);
    assert_int_equal(read(&r), WEIR_E_PLUGIN_CONFIG);
    assert_int_equal(r.status, WEIR_E_PLUGIN_CONFIG);
    assert_int_equal(err.code, WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.plugin, "cap");
    assert_string_equal(err.text, text);
    json_decref(cfg);
}

static int read_int(weir_config_reader *r) {
    long long v;
    return weir_config_int(r, "max", 5, 1, 100, &v);
}
static int read_str(weir_config_reader *r) {
    const char *v;
    return weir_config_string(r, "name", NULL, &v);
}
static int read_double(weir_config_reader *r) {
    double v;
    return weir_config_double(r, "ratio", 0.5, 0, 1, &v);
}
static int read_bool(weir_config_reader *r) {
    bool v;
    return weir_config_bool(r, "on", false, &v);
}
static int read_array(weir_config_reader *r) {
    const json_t *v;
    return weir_config_array(r, "list", 1, 3, JSON_STRING, &v);
}

static void config_readers_name_the_row_and_field(void **state) {
    (void)state;
    expect_config_error("{\"max\":0}", read_int,
                        "row 'cap': config field 'max': expected an integer from 1 to 100, got 0");
    expect_config_error("{\"max\":\"9\"}", read_int,
                        "row 'cap': config field 'max': expected an integer from 1 to 100, got "
                        "a string");
    expect_config_error("{\"name\":1}", read_str,
                        "row 'cap': config field 'name': expected a string, got an integer");
    expect_config_error("{\"ratio\":1.5}", read_double,
                        "row 'cap': config field 'ratio': expected a number from 0 to 1, got 1.5");
    expect_config_error("{\"on\":null}", read_bool,
                        "row 'cap': config field 'on': expected a boolean, got null");
    expect_config_error("{\"list\":{}}", read_array,
                        "row 'cap': config field 'list': expected an array, got an object");
    expect_config_error("{\"list\":[]}", read_array,
                        "row 'cap': config field 'list': expected 1 to 3 items, got 0");
    expect_config_error("{\"list\":[\"a\",2]}", read_array,
                        "row 'cap': config field 'list': item 1: unexpected an integer");
}

static void config_readers_stop_at_the_first_failure(void **state) {
    (void)state;
    json_t *cfg = json_loads("{\"a\":-1,\"b\":\"x\"}", 0, NULL);
    weir_error err;
    weir_config_reader r = weir_config_reader_init(cfg, "row", &err);
    long long a = 42;
    const char *b = NULL;
    assert_int_equal(weir_config_int(&r, "a", 1, 0, 9, &a), WEIR_E_PLUGIN_CONFIG);
    /* a later good read does nothing and keeps the first error */
    assert_int_equal(weir_config_string(&r, "b", NULL, &b), WEIR_E_PLUGIN_CONFIG);
    assert_null(b);
    assert_int_equal(a, 42);
    assert_non_null(strstr(err.text, "field 'a'"));
    /* bad input: NULL reader, NULL field, NULL out, a config that is no object */
    assert_int_equal(weir_config_int(NULL, "a", 1, 0, 9, &a), WEIR_E_INVAL);
    weir_config_reader r2 = weir_config_reader_init(cfg, "row", &err);
    assert_int_equal(weir_config_int(&r2, NULL, 1, 0, 9, &a), WEIR_E_INVAL);
    assert_string_equal(err.text, "weir_config_*: NULL field");
    weir_config_reader r3 = weir_config_reader_init(cfg, "row", &err);
    assert_int_equal(weir_config_bool(&r3, "a", false, NULL), WEIR_E_INVAL);
    json_t *arr = json_array();
    weir_config_reader r4 = weir_config_reader_init(arr, "row", &err);
    assert_int_equal(r4.status, WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.text, "row 'row': config: expected an object");
    assert_int_equal(weir_config_int(&r4, "a", 1, 0, 9, &a), WEIR_E_PLUGIN_CONFIG);
    /* no err: the status alone says it */
    weir_config_reader r5 = weir_config_reader_init(cfg, NULL, NULL);
    assert_int_equal(weir_config_int(&r5, "a", 1, 0, 9, &a), WEIR_E_PLUGIN_CONFIG);
    json_decref(arr);
    json_decref(cfg);
}

/* ------------------------------------------------------------------------ */
/* Token estimate and meter                                                  */
/* ------------------------------------------------------------------------ */

static json_t *text_msg(const char *role, const char *text) {
    return json_pack("{s:s, s:[{s:s, s:s}]}", "role", role, "content", "type", "text", "text",
                     text);
}

static void token_estimate_counts_every_block(void **state) {
    (void)state;
    assert_int_equal(weir_tokens_for_chars(0), 0);
    assert_int_equal(weir_tokens_for_chars(1), 1);
    assert_int_equal(weir_tokens_for_chars(8), 2);
    assert_int_equal(weir_tokens_for_chars(9), 3);
    json_t *m = text_msg("user", "12345678"); /* 8 chars: 2 + 4 */
    assert_int_equal(weir_message_tokens(m), 6);
    json_t *tool = json_loads(
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"read\","
        "\"arguments\":\"{}\"},{\"type\":\"image\"}]}",
        0, NULL); /* 2 + 4 + 2 = 8 chars: 2, one image: 1000, + 4 */
    assert_int_equal(weir_message_tokens(tool), 1006);
    json_t *result = json_loads("{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\","
                                "\"content\":[{\"type\":\"text\",\"text\":\"abcd\"}]}]}",
                                0, NULL);
    assert_int_equal(weir_message_tokens(result), 5);
    json_t *all = json_pack("[O,O,O]", m, tool, result);
    assert_int_equal(weir_messages_tokens(all), 6 + 1006 + 5);
    /* an empty assistant message adds nothing to the derived history */
    json_t *empty = text_msg("assistant", "");
    assert_int_equal(weir_event_tokens("assistant/message", empty), 0);
    assert_int_equal(weir_event_tokens("user/message", empty), 4);
    json_t *usage = json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", 10, "output_tokens", 5,
                              "cache_read_tokens", -3, "cache_write_tokens", 2);
    assert_int_equal(weir_usage_tokens(usage), 17);
    /* bad input */
    assert_int_equal(weir_message_tokens(NULL), 0);
    assert_int_equal(weir_message_tokens(json_null()), 0);
    assert_int_equal(weir_messages_tokens(NULL), 0);
    assert_int_equal(weir_event_tokens(NULL, m), 0);
    assert_int_equal(weir_usage_tokens(NULL), 0);
    json_decref(usage);
    json_decref(empty);
    json_decref(all);
    json_decref(result);
    json_decref(tool);
    json_decref(m);
}

static json_t *envelope(size_t seq, const char *type, json_t *message, json_t *op) {
    json_t *ev = json_pack("{s:I, s:s, s:{s:o}}", "seq", (json_int_t)seq, "type", type, "data",
                           "message", message ? message : json_null());
    if (op)
        json_object_set_new(ev, "surface_op", op);
    return ev;
}

static bool pin_all(const json_t *message, void *ud) {
    (void)message;
    (*(int *)ud)++;
    return true;
}

static void meter_follows_appends_replaces_and_usage(void **state) {
    (void)state;
    weir_meter m;
    weir_meter_init(&m);
    assert_int_equal(weir_meter_tokens(&m), 0);
    int pins = 0;
    /* 0: a user message (8 chars: 6 tokens), pinned */
    json_t *ev = envelope(0, "user/message", text_msg("user", "12345678"), json_string("append"));
    assert_int_equal(weir_meter_apply(&m, ev, pin_all, &pins), 0);
    json_decref(ev);
    assert_int_equal(pins, 1);
    assert_int_equal(m.pinned_tokens, 6);
    /* 1: not a surface event: only remembered */
    ev = json_pack("{s:i, s:s, s:{s:s, s:s}}", "seq", 1, "type", "request/context", "data",
                   "provider", "p", "model", "m");
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), 0);
    json_decref(ev);
    assert_int_equal(m.context_seq, 1);
    /* 2: the answer with its usage: the baseline */
    ev = envelope(2, "assistant/message", text_msg("assistant", "abcd"), json_string("append"));
    json_object_set_new(json_object_get(ev, "data"), "usage",
                        json_pack("{s:i, s:i}", "input_tokens", 100, "output_tokens", 20));
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), 0);
    json_decref(ev);
    assert_int_equal(weir_meter_tokens(&m), 120);
    /* 3: a new user message adds its estimate to the baseline */
    ev = envelope(3, "user/message", text_msg("user", "abcdefgh"), json_string("append"));
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), 0);
    assert_int_equal(weir_meter_tokens(&m), 126);
    /* applied again: skipped */
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), 0);
    assert_int_equal(weir_meter_tokens(&m), 126);
    json_decref(ev);
    /* 4: a replace of nodes 0..2 makes the baseline stale: the estimate */
    ev = envelope(4, "user/message", text_msg("user", "sum"),
                  json_pack("{s:i, s:i}", "start_seq", 0, "end_seq", 2));
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), 0);
    json_decref(ev);
    assert_false(m.baseline);
    assert_int_equal(m.count, 2);
    assert_int_equal(m.pinned_tokens, 0);
    assert_int_equal(weir_meter_tokens(&m), (1 + 4) + (2 + 4));
    /* bad input: a gap, a replace of nodes that are gone, NULLs */
    ev = envelope(9, "user/message", text_msg("user", "x"), json_string("append"));
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), -1);
    json_decref(ev);
    ev = envelope(5, "user/message", text_msg("user", "x"),
                  json_pack("{s:i, s:i}", "start_seq", 0, "end_seq", 2));
    assert_int_equal(weir_meter_apply(&m, ev, NULL, NULL), -1);
    assert_int_equal(weir_meter_apply(NULL, ev, NULL, NULL), -1);
    json_decref(ev);
    assert_int_equal(weir_meter_apply(&m, NULL, NULL, NULL), -1);
    assert_int_equal(weir_meter_tokens(NULL), 0);
    weir_meter_clear(&m);
    assert_int_equal(m.next_seq, 0);
    weir_meter_clear(NULL);
}

static void meter_seeds_from_a_surface(void **state) {
    (void)state;
    json_t *surface = json_pack("[{s:i, s:s, s:o}, {s:i, s:s, s:o}]", "seq", 3, "type",
                                "user/message", "message", text_msg("user", "12345678"), "seq", 7,
                                "type", "assistant/message", "message",
                                text_msg("assistant", "abcd"));
    json_t *usage = json_pack("{s:i}", "input_tokens", 50);
    weir_meter m;
    weir_meter_init(&m);
    assert_int_equal(weir_meter_seed(&m, surface, usage, NULL, NULL), 0);
    assert_int_equal(m.next_seq, 8);
    assert_int_equal(m.count, 2);
    assert_int_equal(weir_meter_tokens(&m), 50);
    /* a seeded meter is not empty: a second seed is refused */
    assert_int_equal(weir_meter_seed(&m, surface, usage, NULL, NULL), -1);
    weir_meter_clear(&m);
    /* malformed surfaces */
    json_t *bad = json_pack("[{s:s, s:s}]", "seq", "x", "type", "user/message");
    assert_int_equal(weir_meter_seed(&m, bad, NULL, NULL, NULL), -1);
    assert_int_equal(weir_meter_seed(&m, NULL, NULL, NULL, NULL), -1);
    assert_int_equal(weir_meter_seed(NULL, surface, NULL, NULL, NULL), -1);
    json_t *twice = json_pack("[{s:i, s:s, s:n}, {s:i, s:s, s:n}]", "seq", 1, "type",
                              "user/message", "message", "seq", 1, "type", "user/message",
                              "message");
    assert_int_equal(weir_meter_seed(&m, twice, NULL, NULL, NULL), -1);
    json_decref(twice);
    json_decref(bad);
    json_decref(usage);
    json_decref(surface);
    weir_meter_clear(&m);
}

/* ------------------------------------------------------------------------ */
/* Text and transcripts                                                      */
/* ------------------------------------------------------------------------ */

static void message_text_joins_text_blocks(void **state) {
    (void)state;
    json_t *m = json_loads("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                           "{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}",
                           0, NULL);
    char *t = weir_message_text(m);
    assert_string_equal(t, "a\nb");
    free(t);
    t = weir_message_text(NULL);
    assert_string_equal(t, "");
    free(t);
    json_decref(m);
}

static void transcript_renders_roles_and_blocks(void **state) {
    (void)state;
    json_t *msgs = json_loads(
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"read a.txt\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":\"hidden\"},"
        "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":\"{\\\"p\\\":1}\"}]},"
        "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"c1\",\"is_error\":"
        "true,\"content\":[{\"type\":\"text\",\"text\":\"no such file\"}]}]}]",
        0, NULL);
    assert_non_null(msgs);
    char *t = weir_transcript(msgs, 0);
    assert_string_equal(t, "user:\nread a.txt\n\nassistant:\n[tool call read] {\"p\":1}\n\n"
                           "tool:\n[tool error]\nno such file\n");
    free(t);
    t = weir_transcript(NULL, 10);
    assert_string_equal(t, "");
    free(t);
    json_decref(msgs);
}

static void transcript_is_bounded_without_splitting_utf8(void **state) {
    (void)state;
    /* 200 two-byte characters */
    char text[401];
    for (int i = 0; i < 200; i++)
        memcpy(text + 2 * i, "\xc3\xa9", 2);
    text[400] = '\0';
    json_t *msgs = json_pack("[o]", text_msg("user", text));
    char *full = weir_transcript(msgs, 0);
    size_t len = strlen(full); /* "user:\n" + 400 + "\n" */
    assert_int_equal(len, 407);
    char *cut = weir_transcript(msgs, 101);
    assert_non_null(cut);
    /* head 25 bytes -> 24 (no split), tail 76 bytes -> 76 from an even offset */
    const char *note = strstr(cut, "\n[... ");
    assert_non_null(note);
    assert_int_equal(note - cut, 24);
    json_t *valid = json_string(cut); /* NULL when the text is not valid UTF-8 */
    assert_non_null(valid);
    json_decref(valid);
    assert_string_equal(cut + strlen(cut) - 1, "\n");
    assert_true(strlen(cut) < len);
    free(cut);
    free(full);
    json_decref(msgs);
}

/* ------------------------------------------------------------------------ */
/* The 1.12 api members                                                      */
/* ------------------------------------------------------------------------ */

static void unique_id_is_prefixed_and_unique(void **state) {
    (void)state;
    const weir_api *api = weir_host_api();
    assert_true(WEIR_API_HAS(api, unique_id));
    char a[64], b[64];
    assert_int_equal(api->unique_id("cmp", a, sizeof a), WEIR_OK);
    assert_int_equal(api->unique_id("cmp", b, sizeof b), WEIR_OK);
    assert_int_equal(strlen(a), 4 + 16);
    assert_memory_equal(a, "cmp-", 4);
    assert_int_equal(strspn(a + 4, "0123456789abcdef"), 16);
    assert_string_not_equal(a, b);
    assert_int_equal(api->unique_id(NULL, a, sizeof a), WEIR_OK);
    assert_memory_equal(a, "id-", 3);
    /* bad input: NULL buf, too small, bad prefixes */
    assert_int_equal(api->unique_id("x", NULL, 64), WEIR_E_INVAL);
    assert_int_equal(api->unique_id("cmp", a, 20), WEIR_E_INVAL);
    assert_string_equal(a, "");
    assert_int_equal(api->unique_id("a b", a, sizeof a), WEIR_E_INVAL);
    assert_int_equal(api->unique_id("", a, sizeof a), WEIR_E_INVAL);
    assert_int_equal(api->unique_id("0123456789012345678901234567890123", a, sizeof a),
                     WEIR_E_INVAL);
}

/* agent_state destructor calls, recorded. */
static int g_destroyed, g_destroyed_value;
static void count_destroy(void *st) {
    g_destroyed_value = *(int *)st;
    g_destroyed++;
}

static const weir_api *g_api;
static weir_plugin *g_self;
static char g_route[128]; /* "provider/model" of the last agent_route a listener read, or "-" */

/* agent/pre-step: bump this row's per-agent counter. */
static json_t *bump(weir_call *call, const json_t *args, void *ud) {
    (void)args, (void)ud;
    int *n = g_api->agent_state(g_self, g_api->call_agent(call), sizeof *n, count_destroy);
    if (!n) {
        g_api->call_fail(call, "no state");
        return NULL;
    }
    (*n)++;
    json_t *route = g_api->agent_route(g_api->call_agent(call), NULL);
    snprintf(g_route, sizeof g_route, "%s/%s",
             route ? json_string_value(json_object_get(route, "provider")) : "-",
             route ? json_string_value(json_object_get(route, "model")) : "-");
    json_decref(route);
    return g_api->next(call);
}

static int state_init(weir_plugin *self, const weir_api *api, const json_t *config,
                      weir_error *err) {
    (void)config, (void)err;
    g_api = api;
    g_self = self;
    return api->hook_register(self, "agent/pre-step", bump, NULL);
}

static const weir_plugin_desc state_desc = {
    WEIR_PLUGIN_HEADER, .name = "statefx", .version = "1", .description = "agent_state test",
    .init = state_init};

static json_t *pre_step(weir_tk *tk) {
    json_t *args = json_pack("{s:s,s:i,s:i,s:[]}", "agent", "testkit", "turn", 1, "step", 1,
                             "messages");
    weir_error err;
    json_t *dflt = json_pack("{s:s,s:[]}", "kind", "enter", "messages");
    json_t *r = weir_tk_invoke(tk, "agent/pre-step", args, dflt, &err); /* dflt borrowed */
    json_decref(args);
    json_decref(dflt);
    if (!r)
        fail_msg("agent/pre-step: %s", err.text);
    return r;
}

static void agent_state_lives_until_agent_disposed(void **state) {
    (void)state;
    g_destroyed = 0;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &state_desc, "st", NULL, &err), WEIR_OK);
    for (int i = 0; i < 41; i++)
        json_decref(pre_step(tk));
    assert_int_equal(g_destroyed, 0);
    json_t *args = json_pack("{s:s}", "agent", "testkit");
    json_t *r = weir_tk_invoke(tk, "agent/disposed", args, NULL, &err);
    assert_non_null(r);
    json_decref(r);
    assert_int_equal(g_destroyed, 1); /* the block of 41 bumps, once */
    assert_int_equal(g_destroyed_value, 41);
    /* a new block after the disposal starts at zero */
    for (int i = 0; i < 41; i++)
        json_decref(pre_step(tk));
    json_decref(pre_step(tk));
    weir_tk_destroy(tk); /* the row unloads: its blocks go */
    json_decref(args);
    assert_int_equal(g_destroyed, 2);
    assert_int_equal(g_destroyed_value, 42);
}

static void agent_state_checks_its_input(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &state_desc, "st", NULL, &err), WEIR_OK);
    int dummy;
    weir_agent *agent = (weir_agent *)(void *)&dummy; /* identity only */
    assert_null(g_api->agent_state(NULL, agent, 4, NULL));
    assert_null(g_api->agent_state(g_self, NULL, 4, NULL));
    assert_null(g_api->agent_state(g_self, agent, 0, NULL));
    assert_null(g_api->agent_state(g_self, agent, SIZE_MAX, NULL));
    int *a = g_api->agent_state(g_self, agent, sizeof(int), NULL);
    assert_non_null(a);
    assert_int_equal(*a, 0);
    assert_ptr_equal(g_api->agent_state(g_self, agent, sizeof(int), NULL), a);
    assert_null(g_api->agent_state(g_self, agent, 2 * sizeof(int), NULL)); /* another size */
    weir_tk_destroy(tk); /* freed with the row (no destructor: ASan sees no leak) */
}

/* A real host: provider-openai on the mock server, one turn, then the route. */
static void agent_route_in_a_real_host(void **state) {
    (void)state;
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start("{\"requests\":[{\"text\":\"ok\"}]}", &m), 0);
    char *base = mock_llm_base_url(m);
    char *rows = NULL;
    assert_true(asprintf(&rows,
                         "[{\"id\":\"llm\",\"plugin\":\"provider-openai\",\"config\":{"
                         "\"base_url\":\"%s/v1\",\"api_key\":\"k\",\"probe_windows\":false,"
                         "\"models\":{\"m\":{\"context_window\":100000,\"max_output\":256}}}}]",
                         base) > 0);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    dh_open(&d, NULL);
    const weir_api *api = weir_host_api();
    assert_true(WEIR_API_HAS(api, agent_route));
    weir_error err;
    weir_error_clear(&err);
    /* before the first request: none */
    assert_null(api->agent_route(d.agent, &err));
    assert_int_equal(err.code, WEIR_E_NOT_FOUND);
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    json_t *route = api->agent_route(d.agent, &err);
    if (!route)
        fail_msg("agent_route: %s", err.text);
    assert_string_equal(json_string_value(json_object_get(route, "provider")), "llm");
    assert_string_equal(json_string_value(json_object_get(route, "model")), "m");
    assert_int_equal(json_integer_value(json_object_get(route, "context_window")), 100000);
    assert_int_equal(json_integer_value(json_object_get(route, "max_output")), 256);
    assert_string_equal(json_string_value(json_object_get(route, "host")), "127.0.0.1");
    char *want = NULL;
    assert_true(asprintf(&want, "%s/v1", base) > 0);
    assert_string_equal(json_string_value(json_object_get(route, "base_url")), want);
    free(want);
    json_decref(route);
    /* bad input */
    assert_null(api->agent_route(NULL, &err));
    assert_int_equal(err.code, WEIR_E_INVAL);
    assert_null(api->agent_route(NULL, NULL));

    /* agent_state on a real agent: freed when the agent is disposed */
    g_destroyed = 0;
    weir_plugin *row = weir__host_plugin(d.host, "llm");
    assert_non_null(row);
    int *st = api->agent_state(row, d.agent, sizeof *st, count_destroy);
    assert_non_null(st);
    *st = 41;
    dh_close(&d);
    assert_int_equal(g_destroyed, 1);
    assert_int_equal(g_destroyed_value, 41);
    /* and one of an agent still known when the host goes: with the row */
    int other;
    st = api->agent_state(row, (weir_agent *)(void *)&other, sizeof *st, count_destroy);
    assert_non_null(st);
    *st = 7;
    dh_teardown(&d);
    assert_int_equal(g_destroyed, 2);
    assert_int_equal(g_destroyed_value, 7);
    mock_llm_stop(m);
    free(rows);
    free(base);
}

/* The test kit's agent has the route the test sets. */
static void testkit_route_is_settable(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &state_desc, "st", NULL, &err), WEIR_OK);
    json_decref(pre_step(tk));
    assert_string_equal(g_route, "-/-"); /* none set: as before a first request */
    json_t *route = json_pack("{s:s, s:s, s:i}", "provider", "p", "model", "m",
                              "context_window", 1000);
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
    json_decref(pre_step(tk));
    assert_string_equal(g_route, "p/m");
    /* bad input */
    assert_int_equal(weir_tk_set_route(NULL, NULL, &err), WEIR_E_INVAL);
    json_t *arr = json_array();
    assert_int_equal(weir_tk_set_route(tk, arr, &err), WEIR_E_INVAL);
    json_decref(arr);
    json_decref(pre_step(tk));
    assert_string_equal(g_route, "p/m"); /* a refused route changes nothing */
    weir_tk_destroy(tk);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_fill_sets_code_and_text),
        cmocka_unit_test(config_readers_read_each_type_and_default),
        cmocka_unit_test(config_readers_name_the_row_and_field),
        cmocka_unit_test(config_readers_stop_at_the_first_failure),
        cmocka_unit_test(token_estimate_counts_every_block),
        cmocka_unit_test(meter_follows_appends_replaces_and_usage),
        cmocka_unit_test(meter_seeds_from_a_surface),
        cmocka_unit_test(message_text_joins_text_blocks),
        cmocka_unit_test(transcript_renders_roles_and_blocks),
        cmocka_unit_test(transcript_is_bounded_without_splitting_utf8),
        cmocka_unit_test(unique_id_is_prefixed_and_unique),
        cmocka_unit_test(agent_state_lives_until_agent_disposed),
        cmocka_unit_test(agent_state_checks_its_input),
        cmocka_unit_test(agent_route_in_a_real_host),
        cmocka_unit_test(testkit_route_is_settable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
