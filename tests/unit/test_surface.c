/*
 * tests/unit/test_surface.c - the surface fold and message derivation
 * (docs/session-log.md): replace splices, tool/result
 * rewrites, replace_generation, derivation rules and the derive cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "session_log.h"
#include "surface.h"
#include "testutil.h"

typedef struct fixture {
    weir__surface *s;
    json_t *events; /* every envelope built, kept alive */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    assert_int_equal(weir__surface_create(&f->s), WEIR_OK);
    f->events = json_array();
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    weir__surface_destroy(f->s);
    json_decref(f->events);
    free(f);
    return 0;
}

static json_t *msg(const char *role, const char *text) {
    return json_pack("{s:s,s:[{s:s,s:s}]}", "role", role, "content", "type", "text", "text", text);
}

/* Envelope with the next seq: data {turn:1, step:1, message}, op "append". */
static json_t *env(fixture *f, const char *type, json_t *message) {
    json_t *ev =
        json_pack("{s:I,s:i,s:s,s:{s:i,s:i}}", "seq", (json_int_t)json_array_size(f->events),
                  "time", 1, "type", type, "data", "turn", 1, "step", 1);
    if (message)
        json_object_set_new(json_object_get(ev, "data"), "message", message);
    if (weir__is_surface_type(type))
        json_object_set_new(ev, "surface_op", json_string("append"));
    json_array_append_new(f->events, ev);
    return ev;
}

static void set_replace(json_t *ev, int start, int end, json_t *src) {
    json_object_set_new(
        ev, "surface_op",
        json_pack("{s:s,s:i,s:i}", "op", "replace", "start_seq", start, "end_seq", end));
    if (src)
        json_object_set_new(ev, "source_seqs", src);
}

static void push(fixture *f, json_t *ev) {
    char m[256];
    if (weir__surface_check(f->s, ev, m, sizeof m) != 0)
        fail_msg("check: %s", m);
    assert_int_equal(weir__surface_apply(f->s, ev), WEIR_OK);
}

static void reject(fixture *f, json_t *ev, const char *want) {
    char m[256];
    size_t len = weir__surface_len(f->s);
    uint64_t gen = weir__surface_replace_generation(f->s);
    assert_int_equal(weir__surface_check(f->s, ev, m, sizeof m), -1);
    assert_string_equal(m, want);
    assert_int_equal(weir__surface_len(f->s), len);
    assert_int_equal(weir__surface_replace_generation(f->s), gen);
}

/* user nodes at seqs 0..n-1 */
static void users(fixture *f, int n) {
    char t[16];
    for (int i = 0; i < n; i++) {
        snprintf(t, sizeof t, "u%d", i);
        push(f, env(f, "user/message", msg("user", t)));
    }
}

static void assert_nodes(fixture *f, const size_t *want, size_t n) {
    assert_int_equal(weir__surface_len(f->s), n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(weir__surface_node(f->s, i), want[i]);
}

static void replace_single_node_start_equals_end(void **state) {
    fixture *f = *state;
    users(f, 3);
    json_t *ev = env(f, "user/message", msg("user", "new"));
    set_replace(ev, 1, 1, json_pack("[i]", 1));
    push(f, ev);
    assert_nodes(f, (size_t[]){0, 3, 2}, 3);
    assert_int_equal(weir__surface_replace_generation(f->s), 1);
}

static void replace_range_splices_in_place(void **state) {
    fixture *f = *state;
    users(f, 4);
    json_t *ev = env(f, "user/message", msg("user", "summary"));
    set_replace(ev, 1, 2, json_pack("[i,i]", 1, 2));
    push(f, ev);
    assert_nodes(f, (size_t[]){0, 4, 3}, 3);
    /* non-monotonic surface order: replace 4..3 */
    ev = env(f, "user/message", msg("user", "again"));
    set_replace(ev, 4, 3, json_pack("[i,i]", 3, 4));
    push(f, ev);
    assert_nodes(f, (size_t[]){0, 5}, 2);
}

static void replace_start_after_end_rejected(void **state) {
    fixture *f = *state;
    users(f, 3);
    json_t *ev = env(f, "user/message", msg("user", "x"));
    set_replace(ev, 2, 0, json_pack("[i,i,i]", 0, 1, 2));
    reject(f, ev, "replace start_seq 2 comes after end_seq 0 in surface order");
}

static void replace_missing_ends_rejected(void **state) {
    fixture *f = *state;
    users(f, 3);
    json_t *ev = env(f, "user/message", msg("user", "x"));
    set_replace(ev, 1, 1, json_pack("[i]", 1));
    push(f, ev); /* seq 1 is now shadowed */
    ev = env(f, "user/message", msg("user", "y"));
    set_replace(ev, 1, 2, json_pack("[i,i]", 1, 2));
    reject(f, ev, "replace start_seq 1 is not a current surface node");
    set_replace(ev, 0, 1, json_pack("[i,i]", 0, 1));
    reject(f, ev, "replace end_seq 1 is not a current surface node");
    set_replace(ev, 0, 2, json_pack("[i,i]", 0, 2));
    reject(f, ev, "source_seqs must include shadowed seq 3");
    json_object_del(ev, "source_seqs");
    reject(f, ev, "source_seqs must include shadowed seq 0");
}

/* A compaction's summary shadows the whole history at once: a replace over
 * 200,000 nodes, its source_seqs listing each in reverse order, is checked
 * and applied (the check sorts once instead of scanning the list for
 * every node: issue #34 measured 10 minutes over 800,000 seqs).  A seq
 * listed twice among them is still named, and so is one missing; with the
 * sorted copy refused (out of memory) the check falls back to the scan. */
static void replace_over_a_long_history(void **state) {
    fixture *f = *state;
    enum { N = 200000 };
    json_t *seqs = json_array();
    for (int i = 0; i < N; i++)
        json_array_append_new(seqs, json_integer(N - 1 - i));
    weir__surface *s = f->s;
    for (int i = 0; i < N; i++) { /* users(f, N), without a message each */
        json_t *ev = json_pack("{s:i,s:i,s:s,s:{s:i,s:i,s:{s:s,s:[]}},s:s}", "seq", i, "time", 1,
                               "type", "user/message", "data", "turn", 1, "step", 1, "message",
                               "role", "user", "content", "surface_op", "append");
        assert_int_equal(weir__surface_apply(s, ev), WEIR_OK);
        json_array_append_new(f->events, ev);
    }
    json_t *ev = env(f, "user/message", msg("user", "summary"));
    set_replace(ev, 0, N - 1, json_deep_copy(seqs));
    json_array_set_new(json_object_get(ev, "source_seqs"), 7, json_integer(N - 1)); /* twice */
    reject(f, ev, "source_seqs lists seq 199999 twice");
    json_array_set_new(json_object_get(ev, "source_seqs"), 7, json_integer(N - 8));
    json_array_remove(json_object_get(ev, "source_seqs"), 0); /* seq N-1 unlisted */
    reject(f, ev, "source_seqs must include shadowed seq 199999");
    json_object_set_new(ev, "source_seqs", json_pack("[i,i,i]", 0, 1, 0));
    set_replace(ev, 0, 1, json_pack("[i,i,i]", 0, 1, 0));
    weir__alloc_fail_only(1); /* the sorted copy */
    reject(f, ev, "source_seqs lists seq 0 twice");
    weir__alloc_fail_only(-1);
    set_replace(ev, 0, N - 1, seqs);
    push(f, ev);
    assert_nodes(f, (size_t[]){N}, 1);
}

static void surface_op_and_source_seqs_rules(void **state) {
    fixture *f = *state;
    users(f, 1);
    json_t *ev = env(f, "turn/start", NULL);
    json_object_set_new(ev, "surface_op", json_string("append"));
    reject(f, ev, "surface_op is only allowed on surface types, not turn/start");
    json_object_del(ev, "surface_op");
    json_object_set_new(ev, "source_seqs", json_pack("[i]", 0));
    reject(f, ev, "source_seqs is only allowed on surface types, not turn/start");
    ev = env(f, "user/message", msg("user", "x"));
    json_object_del(ev, "surface_op");
    reject(f, ev, "user/message needs surface_op");
    json_object_set_new(ev, "surface_op", json_string("prepend"));
    reject(f, ev, "surface_op must be \"append\" or {\"op\":\"replace\",...}");
    json_object_set_new(ev, "surface_op", json_string("append"));
    json_object_set_new(ev, "source_seqs", json_array());
    reject(f, ev, "source_seqs must be a non-empty array of earlier seqs");
    json_object_set_new(ev, "source_seqs", json_pack("[i]", 2)); /* its own seq */
    reject(f, ev, "source_seqs[0] is not an earlier seq");
    json_object_del(ev, "source_seqs");
    json_object_set_new(json_object_get(ev, "data"), "message", msg("assistant", "x"));
    reject(f, ev, "user/message needs data.message.role \"user\"");
    json_object_set_new(json_object_get(ev, "data"), "message", json_pack("{s:s}", "role", "user"));
    reject(f, ev, "user/message needs data.message.content (an array of blocks)");
}

static void malformed_blocks_rejected(void **state) {
    fixture *f = *state;
    static const struct {
        const char *type, *message, *want;
    } cases[] = {
        {"assistant/message", "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\","
         "\"#id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"}]}",
         "assistant/message: data.message.content[0] needs a non-empty string id"},
        {"assistant/message", "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\","
         "\"id\":\"c1\",\"name\":\"ls\",\"arguments\":{}}]}",
         "assistant/message: data.message.content[0] needs string arguments (the raw JSON text)"},
        {"user/message", "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},7]}",
         "user/message: data.message.content[1] must be an object with a string type"},
        {"user/message", "{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}",
         "user/message: data.message.content[0] needs a string text"},
        {"tool/result", "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\","
         "\"content\":[]}]}",
         "tool/result: data.message.content[0] needs a non-empty string call_id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *ev = env(f, cases[i].type, json_loads(cases[i].message, 0, NULL));
        reject(f, ev, cases[i].want);
        json_array_remove(f->events, json_array_size(f->events) - 1);
    }
    /* unknown block types pass as they are (images, future blocks) */
    push(f, env(f, "user/message",
                json_pack("{s:s,s:[{s:s,s:s,s:s}]}", "role", "user", "content", "type", "image",
                          "media_type", "image/png", "data", "AAAA")));
    assert_int_equal(weir__surface_len(f->s), 1);
}

static json_t *tool_msg(const char *call_id, const char *text) {
    return json_pack("{s:s,s:[{s:s,s:s,s:[{s:s,s:s}]}]}", "role", "tool", "content", "type",
                     "tool_result", "call_id", call_id, "content", "type", "text", "text", text);
}

static void tool_result_rewrite_changes_only_content(void **state) {
    fixture *f = *state;
    users(f, 1);
    push(f, env(f, "tool/result", tool_msg("c1", "long output"))); /* seq 1 */
    /* content-only rewrite: OK */
    json_t *ev = env(f, "tool/result", tool_msg("c1", "[pruned]")); /* seq 2 */
    json_object_set_new(json_object_get(ev, "data"), "message",
                        json_pack("{s:s,s:[]}", "role", "tool", "content"));
    set_replace(ev, 1, 1, json_pack("[i]", 1));
    push(f, ev);
    /* changing data beside message.content is refused */
    ev = env(f, "tool/result", tool_msg("c1", "x"));
    json_object_set_new(json_object_get(ev, "data"), "message",
                        json_pack("{s:s,s:[],s:b}", "role", "tool", "content", "is_error", 1));
    set_replace(ev, 2, 2, json_pack("[i]", 2));
    reject(f, ev, "a tool/result rewrite may change only message.content");
    ev = env(f, "tool/result", tool_msg("c1", "x"));
    json_object_set_new(json_object_get(ev, "data"), "message",
                        json_pack("{s:s,s:[]}", "role", "tool", "content"));
    json_object_set_new(json_object_get(ev, "data"), "step", json_integer(7));
    set_replace(ev, 2, 2, json_pack("[i]", 2));
    reject(f, ev, "a tool/result rewrite may change only message.content");
    /* only a single tool/result node */
    ev = env(f, "tool/result", tool_msg("c1", "x"));
    set_replace(ev, 0, 2, json_pack("[i,i]", 0, 2));
    reject(f, ev, "a tool/result may only replace a single tool/result node");
    ev = env(f, "tool/result", tool_msg("c1", "x"));
    set_replace(ev, 0, 0, json_pack("[i]", 0));
    reject(f, ev, "a tool/result may only replace a single tool/result node");
    /* a summary may replace a range holding tool results */
    ev = env(f, "user/message", msg("user", "summary"));
    set_replace(ev, 0, 2, json_pack("[i,i]", 0, 2));
    push(f, ev);
    assert_int_equal(weir__surface_len(f->s), 1);
}

static void replace_generation_counts_replaces(void **state) {
    fixture *f = *state;
    users(f, 3);
    assert_int_equal(weir__surface_replace_generation(f->s), 0);
    for (int i = 0; i < 3; i++) {
        json_t *ev = env(f, "user/message", msg("user", "r"));
        int head = (int)weir__surface_node(f->s, 0);
        set_replace(ev, head, head, json_pack("[i]", head));
        push(f, ev);
        assert_int_equal(weir__surface_replace_generation(f->s), (uint64_t)i + 1);
    }
    users(f, 1);
    assert_int_equal(weir__surface_replace_generation(f->s), 3);
}

static char *dump(json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(v);
    return s;
}

static void derive_skips_non_surface_and_empty_messages(void **state) {
    fixture *f = *state;
    push(f, env(f, "turn/start", NULL));
    push(f, env(f, "system/message", msg("system", "be brief")));
    push(f, env(f, "system/message", msg("system", ""))); /* dormant */
    json_t *u = msg("user", "hi");
    json_object_set_new(u, "id", json_string("in-1"));
    json_object_set_new(u, "source", json_pack("{s:s}", "kind", "human"));
    push(f, env(f, "user/message", u));
    push(f, env(f, "assistant/attempt", NULL));
    push(f, env(f, "assistant/message", json_pack("{s:s,s:[]}", "role", "assistant", "content")));
    push(f, env(f, "assistant/message", msg("assistant", "hello")));
    push(f, env(f, "tool/result", tool_msg("c1", "out")));
    assert_int_equal(weir__surface_len(f->s), 6);
    char *s = dump(weir__surface_derive(f->s));
    assert_string_equal(
        s,
        "[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"be brief\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"source\":{\"kind\":"
        "\"human\"}},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"hello\"}]},"
        "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"c1\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"out\"}]}]}]");
    free(s);
    assert_null(weir__derive_event_message(json_array_get(f->events, 0)));
    assert_null(weir__derive_event_message(json_array_get(f->events, 2)));
}

/* Issue #32 item 1: an answer whose only block is a reasoning block with
 * empty text and a continuation (an Anthropic redacted_thinking-only reply)
 * is content: derived, so it goes back; empty reasoning without one is not. */
static void derive_keeps_empty_reasoning_with_a_continuation(void **state) {
    fixture *f = *state;
    users(f, 1);
    push(f, env(f, "assistant/message",
                json_pack("{s:s,s:[{s:s,s:s}]}", "role", "assistant", "content", "type",
                          "reasoning", "text", "")));
    json_t *redacted = json_pack(
        "{s:s,s:[{s:s,s:s,s:{s:s,s:s,s:{s:s}}}]}", "role", "assistant", "content", "type",
        "reasoning", "text", "", "continuation", "provider", "anthropic", "model",
        "claude-opus-4-7", "data", "redacted_data", "RD");
    push(f, env(f, "assistant/message", redacted));
    char *s = dump(weir__surface_derive(f->s));
    assert_string_equal(
        s, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"u0\"}]},"
           "{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":\"\","
           "\"continuation\":{\"provider\":\"anthropic\",\"model\":\"claude-opus-4-7\","
           "\"data\":{\"redacted_data\":\"RD\"}}}]}]");
    free(s);
}

static void derive_excludes_shadowed_nodes(void **state) {
    fixture *f = *state;
    users(f, 3);
    json_t *ev = env(f, "user/message", msg("user", "S"));
    set_replace(ev, 0, 1, json_pack("[i,i]", 0, 1));
    push(f, ev);
    char *s = dump(weir__surface_derive(f->s));
    assert_string_equal(s,
                        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"S\"}]},"
                        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"u2\"}]}]");
    free(s);
}

/* The log's cached derivation equals a fresh fold after appends and replaces. */
static void log_derive_cache_matches_fresh_fold(void **state) {
    (void)state;
    char *dir = wt_tmpdir("surface");
    char path[4200];
    snprintf(path, sizeof path, "%s/s.jsonl", dir);
    weir__log *log = NULL;
    weir_error err;
    assert_int_equal(weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &log, &err), WEIR_OK);
    json_t *append = json_string("append");
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 3; i++) {
            json_t *data =
                json_pack("{s:i,s:i,s:o}", "turn", 1, "step", 1, "message", msg("user", "m"));
            assert_int_equal(
                weir__log_append(log, "user/message", data, append, NULL, 0, NULL, &err), WEIR_OK);
            json_decref(data);
            char *a = dump(weir__log_derive(log)),
                 *b = dump(weir__surface_derive(weir__log_surface(log)));
            assert_string_equal(a, b);
            free(a);
            free(b);
        }
        size_t first = weir__surface_node(weir__log_surface(log), 0);
        size_t second = weir__surface_node(weir__log_surface(log), 1);
        json_t *op = json_pack("{s:s,s:I,s:I}", "op", "replace", "start_seq", (json_int_t)first,
                               "end_seq", (json_int_t)second);
        json_t *src = json_pack("[I,I]", (json_int_t)first, (json_int_t)second);
        json_t *data =
            json_pack("{s:i,s:i,s:o}", "turn", 1, "step", 1, "message", msg("user", "sum"));
        assert_int_equal(weir__log_append(log, "user/message", data, op, src, 0, NULL, &err),
                         WEIR_OK);
        json_decref(op);
        json_decref(src);
        json_decref(data);
        char *a = dump(weir__log_derive(log)),
             *b = dump(weir__surface_derive(weir__log_surface(log)));
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
    assert_int_equal(weir__surface_replace_generation(weir__log_surface(log)), 4);
    json_decref(append);
    weir__log_close(log);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(replace_single_node_start_equals_end, setup, teardown),
        cmocka_unit_test_setup_teardown(replace_range_splices_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(replace_start_after_end_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(replace_missing_ends_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(surface_op_and_source_seqs_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(tool_result_rewrite_changes_only_content, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_blocks_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(replace_generation_counts_replaces, setup, teardown),
        cmocka_unit_test_setup_teardown(derive_skips_non_surface_and_empty_messages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(derive_keeps_empty_reasoning_with_a_continuation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(derive_excludes_shadowed_nodes, setup, teardown),
        cmocka_unit_test(log_derive_cache_matches_fresh_fold),
        cmocka_unit_test_setup_teardown(replace_over_a_long_history, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
