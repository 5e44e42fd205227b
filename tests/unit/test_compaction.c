/*
 * tests/unit/test_compaction.c - compaction-basic: its pure policy
 * (plugins/compaction-basic/compaction_policy.c: token estimates,
 * measurement, pruning, UTF-8 safe truncation, range selection, config) and,
 * through the real host and driver with provider-scripted, pressure
 * compaction between steps, tool-result pruning, overflow recovery, bounded
 * attempts and summarizer failures.  Every log is checked by dh_teardown
 * (weir_log_check, replay, derive == request).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_context.h"
#include "compaction_policy.h"
#include "driver_harness.h"
#include "harness_check.h"
#include "mock_llm.h"
#include "schema.h"
#include "cancel.h"
#include "surface.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static json_t *parse(const char *text) {
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("bad test JSON: %s: %s", je.text, text);
    return v;
}

static void config_ok(const char *text, cp_config *cfg) {
    json_t *config = text ? parse(text) : NULL;
    char msg[256] = "";
    bool oom = true;
    if (cp_config_parse(config, cfg, &oom, msg, sizeof msg) != 0)
        fail_msg("cp_config_parse: %s", msg);
    assert_false(oom);
    json_decref(config);
}

static const char *config_error(const char *text) {
    static char msg[256];
    json_t *config = parse(text);
    cp_config cfg;
    bool oom = true;
    msg[0] = '\0';
    assert_int_equal(cp_config_parse(config, &cfg, &oom, msg, sizeof msg), -1);
    assert_false(oom);
    json_decref(config);
    return msg;
}

/* `n` copies of `c`, malloc'd. */
static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *out = NULL;
    assert_true(vasprintf(&out, f, ap) >= 0);
    va_end(ap);
    return out;
}

/* Surface node texts for the range tests. */
#define NODE(seq, type, role, blocks)                                                              \
    "{\"seq\":" #seq ",\"type\":\"" type "\",\"message\":{\"role\":\"" role "\","                  \
    "\"content\":[" blocks "]}}"
#define TEXT(text) "{\"type\":\"text\",\"text\":\"" text "\"}"
#define SYS NODE(0, "system/message", "system", TEXT("be brief"))
#define USER(seq, text) NODE(seq, "user/message", "user", TEXT(text))
#define ASSIST(seq, text) NODE(seq, "assistant/message", "assistant", TEXT(text))
#define CALL(seq, id)                                                                              \
    NODE(seq, "assistant/message", "assistant",                                                    \
         "{\"type\":\"tool_call\",\"id\":\"" id "\",\"name\":\"t\",\"arguments\":\"{}\"}")
#define RESULT(seq, id, text)                                                                      \
    NODE(seq, "tool/result", "tool",                                                               \
         "{\"type\":\"tool_result\",\"call_id\":\"" id "\",\"content\":[" TEXT(text) "]}")

/* ------------------------------------------------------------------------ */
/* Pure policy                                                               */
/* ------------------------------------------------------------------------ */

static void config_defaults_and_validation(void **state) {
    (void)state;
    cp_config cfg;
    config_ok(NULL, &cfg);
    assert_true(cfg.threshold_ratio == 0.8);
    assert_int_equal(cfg.keep_recent_tokens, -1);
    assert_true(cfg.keep_recent_ratio == 0.16);
    assert_int_equal(cfg.max_result_chars, 4000);
    assert_int_equal(cfg.head_chars, 1500);
    assert_int_equal(cfg.tail_chars, 500);
    assert_int_equal(cfg.summary_max_tokens, -1); /* unset: the agent's own max_tokens */
    assert_int_equal(cfg.max_attempts, 2);
    assert_int_equal(cfg.max_overflow_retries, 1);
    assert_null(cfg.summary_provider);
    assert_non_null(cfg.summary_prompt);
    cp_config_clear(&cfg);
    cp_config_clear(&cfg); /* idempotent */

    config_ok("{\"threshold_ratio\":0.5,\"keep_recent_tokens\":100,\"summary\":{\"provider\":\"p\","
              "\"model\":\"m\",\"prompt\":\"Sum up.\"}}",
              &cfg);
    assert_int_equal(cfg.keep_recent_tokens, 100);
    assert_string_equal(cfg.summary_provider, "p");
    assert_string_equal(cfg.summary_prompt, "Sum up.");
    cp_config_clear(&cfg);

    assert_string_equal(config_error("{\"threshold_ratio\":0}"),
                        "config.threshold_ratio: expected a number in (0, 1]");
    assert_string_equal(config_error("{\"keep_recent_tokens\":1,\"keep_recent_ratio\":0.1}"),
                        "config: keep_recent_tokens and keep_recent_ratio are mutually exclusive");
    assert_string_equal(config_error("{\"threshold_ratio\":0.5,\"keep_recent_ratio\":0.5}"),
                        "config.keep_recent_ratio: must be at least 0 and below threshold_ratio "
                        "(0.5)");
    assert_string_equal(config_error("{\"prune\":{\"max_result_chars\":100,\"head_chars\":40,"
                                     "\"tail_chars\":20}}"),
                        "config.prune: head_chars + tail_chars + 48 (the marker) must stay below "
                        "max_result_chars (100)");
    assert_string_equal(config_error("{\"summary\":{\"provider\":\"p\"}}"),
                        "config.summary: provider and model must be set together");

    char msg[256] = "";
    json_t *bad = parse("{\"prune\":{\"max_chars\":1}}");
    assert_int_not_equal(weir__schema_validate_text(cp_config_schema, bad, msg, sizeof msg), 0);
    json_decref(bad);
}

static void token_estimates_count_four_characters_a_token(void **state) {
    (void)state;
    assert_int_equal(cp_tokens_for_chars(0), 0);
    assert_int_equal(cp_tokens_for_chars(1), 1);
    assert_int_equal(cp_tokens_for_chars(4), 1);
    assert_int_equal(cp_tokens_for_chars(5), 2);
    assert_int_equal(cp_message_tokens(NULL), 0);
    json_t *m =
        parse("{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"12345678\"},"
              "{\"type\":\"tool_call\",\"id\":\"c\",\"name\":\"ab\",\"arguments\":\"{}\"},"
              "{\"type\":\"image\",\"media_type\":\"image/png\",\"data\":\"xx\"}]}");
    /* 8 + (1 + 2 + 2) = 13 chars -> 4 tokens, + 1000 for the image, + 4 per message */
    assert_int_equal(cp_message_tokens(m), 1008);
    json_decref(m);
    json_t *usage = parse("{\"input_tokens\":100,\"output_tokens\":20,\"cache_read_tokens\":5,"
                          "\"cache_write_tokens\":3,\"reasoning_tokens\":7}");
    assert_int_equal(cp_usage_tokens(usage), 128);
    json_decref(usage);
}

static void measure_uses_the_usage_baseline_until_a_replace_lands_behind_it(void **state) {
    (void)state;
    /* USER(1) "abcd" = 1+4 = 5 tokens; ASSIST(2) = 5; USER(3) "abcdabcd" = 2+4 = 6 */
    json_t *s = parse("[" USER(1, "abcd") "," ASSIST(2, "abcd") "," USER(3, "abcdabcd") "]");
    assert_int_equal(cp_measure(s, 2, 1000, 0), 1006); /* baseline + what came after it */
    assert_int_equal(cp_measure(s, 2, 1000, 7), 1013); /* + pending input */
    assert_int_equal(cp_measure(s, -1, 1000, 0), 16);  /* no usage: all estimated */
    assert_int_equal(cp_measure(s, 9, 1000, 0), 16);   /* response no longer on the surface */
    json_decref(s);
    /* a summary (seq 5) replaced what came before the response: the baseline is stale */
    s = parse("[" USER(5, "abcd") "," ASSIST(2, "abcd") "," USER(3, "abcdabcd") "]");
    assert_int_equal(cp_measure(s, 2, 1000, 0), 16);
    json_decref(s);
}

static void pruning_keeps_head_marker_and_tail(void **state) {
    (void)state;
    bool oom = false;
    assert_null(cp_prune_text("0123456789", 10, 2, 2, &oom)); /* not over the limit */
    char *out = cp_prune_text("0123456789ABCDEF", 10, 3, 2, &oom);
    assert_non_null(out);
    assert_string_equal(out, "012\n[\xE2\x80\xA6 11 characters pruned \xE2\x80\xA6]\nEF");
    free(out);
    out = cp_prune_text("0123456789ABCDEF", 10, 0, 0, &oom); /* zero head and tail */
    assert_string_equal(out, "\n[\xE2\x80\xA6 16 characters pruned \xE2\x80\xA6]\n");
    free(out);
    assert_false(oom);
}

static void pruning_never_splits_utf8(void **state) {
    (void)state;
    /* 12 code points: e-acute (2 bytes) x 6, then a 4-byte emoji x 6 */
    const char *text = "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
                       "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80"
                       "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80";
    assert_int_equal(cp_utf8_len(text), 12);
    bool oom = false;
    char *out = cp_prune_text(text, 5, 3, 2, &oom);
    assert_non_null(out);
    assert_string_equal(out, "\xC3\xA9\xC3\xA9\xC3\xA9\n[\xE2\x80\xA6 7 characters pruned "
                             "\xE2\x80\xA6]\n\xF0\x9F\x98\x80\xF0\x9F\x98\x80");
    json_t *probe = json_string(out); /* jansson accepts only valid UTF-8 */
    assert_non_null(probe);
    json_decref(probe);
    free(out);
    /* an invalid byte counts as one code point and is never merged with its neighbours */
    out = cp_prune_text("ab\xFF"
                        "cdefgh",
                        5, 3, 1, &oom);
    assert_non_null(out);
    assert_memory_equal(out, "ab\xFF\n[", 5);
    free(out);
}

static void pruning_a_tool_message_converges_in_one_pass(void **state) {
    (void)state;
    cp_config cfg;
    config_ok("{\"prune\":{\"max_result_chars\":60,\"head_chars\":4,\"tail_chars\":3}}", &cfg);
    char *big = repeat('x', 100);
    json_t *m = json_pack("{s:s, s:[{s:s, s:s, s:[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s}]}]}",
                          "role", "tool", "content", "type", "tool_result", "call_id", "c1",
                          "content", "type", "text", "text", "short", "type", "image", "media_type",
                          "image/png", "data", "AA", "type", "text", "text", big);
    free(big);
    size_t chars = 0;
    bool oom = false;
    json_t *p = cp_prune_message(m, &cfg, &chars, &oom);
    assert_non_null(p);
    assert_int_equal(chars, 93);
    json_t *inner = json_object_get(json_array_get(json_object_get(p, "content"), 0), "content");
    assert_string_equal(json_string_value(json_object_get(json_array_get(inner, 0), "text")),
                        "short");
    assert_string_equal(json_string_value(json_object_get(json_array_get(inner, 1), "type")),
                        "image"); /* non-text blocks keep their place */
    assert_string_equal(json_string_value(json_object_get(json_array_get(inner, 2), "text")),
                        "xxxx\n[\xE2\x80\xA6 93 characters pruned \xE2\x80\xA6]\nxxx");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(p, "content"), 0), "call_id")),
                        "c1");
    assert_true(cp_message_tokens(p) < cp_message_tokens(m));
    json_t *again = cp_prune_message(p, &cfg, &chars, &oom); /* a second pass is a no-op */
    assert_null(again);
    assert_int_equal(chars, 0);
    assert_false(oom);
    json_decref(p);
    json_decref(m);
    cp_config_clear(&cfg);
}

static void range_is_head_anchored_after_the_system_node(void **state) {
    (void)state;
    json_t *s = parse("[" SYS "," USER(1, "aaaaaaaa") "," ASSIST(2, "bbbbbbbb") "," USER(
        3, "cc") "," ASSIST(4, "dd") "]");
    size_t a = 99, b = 99;
    assert_true(cp_select_range(s, 0, &a, &b)); /* keep 0: only the newest node stays */
    assert_int_equal(a, 1);
    assert_int_equal(b, 3);
    assert_true(cp_select_range(s, 6, &a, &b)); /* 5 + 5 tokens: the last two stay */
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(cp_range_tokens(s, 1, 2), 12);
    assert_false(cp_select_range(s, 1000, &a, &b)); /* the tail would be everything */
    json_decref(s);
}

static void range_never_splits_a_tool_call_from_its_result(void **state) {
    (void)state;
    json_t *s = parse("[" SYS "," USER(1, "aaaa") "," CALL(2, "c1") "," RESULT(
        3, "c1", "r1") "," CALL(4, "c2") "," RESULT(5, "c2", "r2") "," ASSIST(6, "done") "]");
    size_t a, b;
    /* keep 0: cut before node 6 is balanced */
    assert_true(cp_select_range(s, 0, &a, &b));
    assert_int_equal(b, 5);
    /* a tail of 6 tokens would start at the result r2: the cut moves before its call */
    assert_true(cp_select_range(s, 6, &a, &b));
    assert_int_equal(a, 1);
    assert_int_equal(b, 3);
    json_decref(s);
    /* parallel calls: both results must stay with their assistant message */
    s = parse("[" USER(
        1, "aaaa") ","
                   "{\"seq\":2,\"type\":\"assistant/message\",\"message\":{\"role\":\"assistant\","
                   "\"content\":[{\"type\":\"tool_call\",\"id\":\"p1\",\"name\":\"t\","
                   "\"arguments\":\"{}\"},"
                   "{\"type\":\"tool_call\",\"id\":\"p2\",\"name\":\"t\",\"arguments\":\"{}\"}]}}"
                   "," RESULT(3, "p1", "x") "," RESULT(4, "p2", "y") "]");
    assert_true(cp_select_range(s, 0, &a, &b));
    assert_int_equal(a, 0);
    assert_int_equal(b, 0);
    json_decref(s);
}

/* The cut moves head-ward over every node between a call and its result,
 * counts an id a provider reuses call by call, and never keeps a call
 * block without its id. */
static void range_moves_past_far_results_and_reused_ids(void **state) {
    (void)state;
    json_t *s = parse("[" SYS "," USER(1, "aaaa") "," CALL(2, "a") "," USER(3, "bb") ","
                      ASSIST(4, "cc") "," RESULT(5, "a", "r") "," CALL(6, "b") ","
                      RESULT(7, "b", "r") "," ASSIST(8, "done") "]");
    size_t a = 99, b = 99;
    /* a tail that starts at the result of a: the cut goes before its call */
    assert_true(cp_select_range(s, cp_range_tokens(s, 6, 8) + 1, &a, &b));
    assert_int_equal(a, 1);
    assert_int_equal(b, 1);
    assert_true(cp_balanced(s, 1, 8));
    assert_false(cp_balanced(s, 1, 5));
    json_decref(s);
    /* the same id in two steps: two calls and one result split the second pair */
    s = parse("[" USER(0, "aaaa") "," CALL(1, "r") "," RESULT(2, "r", "x") "," CALL(3, "r") ","
              RESULT(4, "r", "y") "," ASSIST(5, "done") "]");
    assert_false(cp_balanced(s, 0, 4));
    assert_true(cp_balanced(s, 0, 3));
    assert_true(cp_select_range(s, cp_range_tokens(s, 4, 5) + 1, &a, &b));
    assert_int_equal(a, 0);
    assert_int_equal(b, 2);
    json_decref(s);
    /* a call block without its id pairs with nothing */
    s = parse("[" USER(0, "aaaa") ","
              "{\"seq\":1,\"type\":\"assistant/message\",\"message\":{\"role\":\"assistant\","
              "\"content\":[{\"type\":\"tool_call\",\"name\":\"t\",\"arguments\":\"{}\"}]}}"
              "," ASSIST(2, "done") "]");
    assert_false(cp_balanced(s, 0, 2));
    assert_true(cp_balanced(s, 0, 1));
    assert_true(cp_select_range(s, 0, &a, &b));
    assert_int_equal(b, 0);
    json_decref(s);
}

static void nothing_compactable_declines(void **state) {
    (void)state;
    size_t a, b;
    json_t *s = parse("[" SYS "," USER(1, "only one") "]");
    assert_false(cp_select_range(s, 0, &a, &b));
    json_decref(s);
    /* one indivisible tool pair after the head */
    s = parse("[" SYS "," CALL(1, "c1") "," RESULT(2, "c1", "r") "]");
    assert_false(cp_select_range(s, 0, &a, &b));
    json_decref(s);
    s = parse("[]");
    assert_false(cp_select_range(s, 0, &a, &b));
    json_decref(s);
}

/* The checkpoint: preamble, framed summary; a nested earlier checkpoint is
 * merged (its frame taken out); pinned texts go under Critical context. */
static void checkpoint_shapes(void **state) {
    (void)state;
    char *t = cp_checkpoint_text("It went well.", NULL, 0);
    assert_string_equal(t, CP_CHECKPOINT_PREAMBLE "\n\n<compacted-summary>\nIt went well.\n"
                           "</compacted-summary>");
    json_t *m = cp_checkpoint_message(t, "cmp-1");
    json_t *want = json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "role", "user", "content",
                             "type", "text", "text", t, "source", "kind", "compaction",
                             "compaction_id", "cmp-1");
    assert_true(json_equal(m, want));
    json_decref(m);
    json_decref(want);
    /* the model echoed the earlier checkpoint: merged, not nested */
    char *echo = fmt("  %s\n\n%s\nold facts\n%s\nnew facts\n\n", CP_CHECKPOINT_PREAMBLE,
                     CP_SUMMARY_OPEN, CP_SUMMARY_CLOSE);
    char *clean = cp_clean_summary(echo);
    assert_string_equal(clean, "old facts\n\nnew facts");
    free(clean);
    free(echo);
    free(t);
    /* pinned texts land at the end of the Critical context section */
    const char *pins[] = {"never touch prod", "line one\nline two"};
    t = cp_checkpoint_text("## Current work\nX\n## Critical context that must survive\n- keep A\n"
                           "## Appendix\nZ",
                           pins, 2);
    assert_string_equal(t, CP_CHECKPOINT_PREAMBLE "\n\n<compacted-summary>\n## Current work\nX\n"
                           "## Critical context that must survive\n- keep A\n\n"
                           "Pinned messages of the user, kept verbatim after this checkpoint:\n"
                           "\n> never touch prod\n\n> line one\n> line two\n\n## Appendix\nZ\n"
                           "</compacted-summary>");
    free(t);
    /* no such section: one is added */
    t = cp_checkpoint_text("short", pins, 1);
    assert_non_null(strstr(t, "short\n\n## Critical context that must survive\n\nPinned messages"
                              " of the user, kept verbatim after this checkpoint:\n\n> never "
                              "touch prod\n</compacted-summary>"));
    free(t);
    /* a long pinned text is cut in the listing (the message itself stays whole) */
    char *big = repeat('p', 1000);
    const char *one[] = {big};
    t = cp_checkpoint_text("s", one, 1);
    assert_non_null(strstr(t, "cut here; the whole message follows this checkpoint"));
    assert_null(strstr(t, big));
    free(t);
    free(big);
}

/* The instruction: the structured sections, the kept tail, extra text. */
static void instruction_lists_the_sections(void **state) {
    (void)state;
    cp_config cfg;
    config_ok(NULL, &cfg);
    char *t = cp_instruction(&cfg, 0, NULL);
    const char *sections[] = {"## Primary request and intent", "## Key technical concepts",
                              "## Files and code",           "## Errors and fixes",
                              "## Pending tasks",            "## Current work",
                              "## Next step",                "## Critical context that must survive"};
    const char *at = t;
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
        const char *hit = strstr(at, sections[i]);
        if (!hit)
            fail_msg("section %s missing or out of order", sections[i]);
        at = hit;
    }
    assert_non_null(strstr(t, "merge what it says into yours"));
    assert_null(strstr(t, "verbatim after the checkpoint:"));
    free(t);
    t = cp_instruction(&cfg, 2, "KEEP NAMES");
    assert_non_null(strstr(t, "The last 2 messages above stay verbatim after the checkpoint"));
    assert_non_null(strstr(t, "\n\nAdditional instructions for this summary:\nKEEP NAMES"));
    free(t);
    cp_config_clear(&cfg);
    config_ok("{\"summary\":{\"prompt\":\"Sum up.\"}}", &cfg);
    t = cp_instruction(&cfg, 1, NULL);
    assert_string_equal(t, "Sum up.\n\nThe last 1 message above stays verbatim after the "
                           "checkpoint: cover what comes before it, and mention it only where "
                           "Current work and Next step need it.");
    free(t);
    cp_config_clear(&cfg);
}

static void config_pinned_and_breaker_keys(void **state) {
    (void)state;
    cp_config cfg;
    config_ok(NULL, &cfg);
    assert_int_equal(cfg.max_compactions_per_turn, 3);
    assert_true(cfg.min_savings_ratio == 0.1);
    assert_int_equal(cfg.npinned, 0);
    cp_config_clear(&cfg);
    config_ok("{\"pinned_patterns\":[\"^CONSTRAINT:\",\"(never|always) [a-z]+\"],"
              "\"max_compactions_per_turn\":5,\"min_savings_ratio\":0}",
              &cfg);
    assert_int_equal(cfg.npinned, 2);
    assert_int_equal(cfg.max_compactions_per_turn, 5);
    cp_config_clear(&cfg);
    const char *want = "config.pinned_patterns[1]: \"(unclosed\" is not a valid POSIX extended "
                       "regular expression: "; /* then the C library's own words */
    const char *got = config_error("{\"pinned_patterns\":[\"ok\",\"(unclosed\"]}");
    assert_int_equal(strncmp(got, want, strlen(want)), 0);
    assert_true(strlen(got) > strlen(want));
    assert_string_equal(config_error("{\"min_savings_ratio\":1}"),
                        "config.min_savings_ratio: expected a number in [0, 1)");
    assert_string_equal(config_error("{\"max_compactions_per_turn\":0}"),
                        "config.max_compactions_per_turn: expected an integer in [1, 100]");
    char msg[256] = "";
    json_t *bad = parse("{\"pinned_patterns\":[1]}");
    assert_int_not_equal(weir__schema_validate_text(cp_config_schema, bad, msg, sizeof msg), 0);
    json_decref(bad);
}

static void pinned_messages_by_pattern_or_source(void **state) {
    (void)state;
    cp_config cfg;
    config_ok("{\"pinned_patterns\":[\"^CONSTRAINT:\"]}", &cfg);
    json_t *m = parse("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},"
                      "{\"type\":\"text\",\"text\":\"CONSTRAINT: no tabs\"}]}");
    assert_true(cp_message_pinned(&cfg, m)); /* a line of its text matches (^: a line start) */
    json_decref(m);
    m = parse("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"CONSTRAINT: x\"}],"
              "\"source\":{\"kind\":\"compaction\"}}");
    assert_false(cp_message_pinned(&cfg, m)); /* a checkpoint lists pins; it is not one */
    json_decref(m);
    m = parse("{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"CONSTRAINT: x\"}]}");
    assert_false(cp_message_pinned(&cfg, m));
    json_decref(m);
    m = parse("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"plain\"}],"
              "\"source\":{\"kind\":\"human\",\"pinned\":true}}");
    assert_true(cp_message_pinned(&cfg, m));
    assert_true(cp_message_pinned(NULL, m));
    json_decref(m);
    cp_config_clear(&cfg);

    size_t starts[8], k = 9;
    bool none[] = {true, true};
    assert_false(cp_pinned_runs(none, 2, starts, &k)); /* all pinned: nothing to summarize */
    assert_int_equal(k, 2);
    bool first[] = {true, false, false, true, false}; /* pinned at 0 and 3 */
    assert_true(cp_pinned_runs(first, 5, starts, &k));
    assert_int_equal(k, 2);
    assert_int_equal(starts[0], 0); /* run 0 = [0]: the checkpoint */
    assert_int_equal(starts[1], 1); /* run 1 = [1, 2]: the copy of node 0 */
    assert_int_equal(starts[2], 3); /* run 2 = [3, 4]: node 3, itself */
    bool tail[] = {false, false, true, true};
    assert_true(cp_pinned_runs(tail, 4, starts, &k));
    assert_int_equal(starts[1], 2);
    assert_int_equal(starts[2], 3);
}

/* A surface array (as api->agent_surface gives it) from a core surface. */
static json_t *surface_array(const weir__surface *s, json_t *const *events) {
    json_t *out = json_array();
    for (size_t i = 0; i < weir__surface_len(s); i++) {
        const json_t *ev = events[weir__surface_node(s, i)];
        json_t *msg = weir__derive_event_message(ev);
        json_array_append_new(out, json_pack("{s:O, s:O, s:o}", "seq", json_object_get(ev, "seq"),
                                             "type", json_object_get(ev, "type"), "message",
                                             msg ? msg : json_null()));
    }
    return out;
}

/* The running meter gives cp_measure's figure after every append and
 * replace of a long pseudo-random history (the O(surface) reference). */
static void meter_matches_a_full_measurement(void **state) {
    (void)state;
    cp_config cfg;
    config_ok("{\"pinned_patterns\":[\"^PIN\"]}", &cfg);
    cp_meter m;
    cp_meter_init(&m);
    weir__surface *s = NULL;
    assert_int_equal(weir__surface_create(&s), WEIR_OK);
    enum { N = 600 };
    json_t *events[N];
    uint32_t rng = 12345;
    long long last_assistant = -1;
    size_t last_usage = 0;
    for (size_t seq = 0; seq < N; seq++) {
        rng = rng * 1103515245u + 12345u;
        uint32_t pick = (rng >> 16) % 10, len = (rng >> 8) % 97;
        char *text = repeat(pick == 1 ? 'P' : 'x', len);
        if (pick == 1 && len >= 3)
            memcpy(text, "PIN", 3);
        json_t *ev = NULL;
        size_t n = weir__surface_len(s);
        if (pick == 0) { /* a plugin event, no surface op */
            ev = json_pack("{s:I, s:s, s:{}}", "seq", (json_int_t)seq, "type", "drvtest/x", "data");
        } else if (pick <= 3) {
            ev = json_pack("{s:I, s:s, s:{s:{s:s, s:[{s:s, s:s}], s:{s:s, s:b}}}, s:s}", "seq",
                           (json_int_t)seq, "type", "user/message", "data", "message", "role",
                           "user", "content", "type", "text", "text", text, "source", "kind",
                           "human", "pinned", pick == 3 && len % 2, "surface_op", "append");
        } else if (pick <= 6) {
            bool usage = pick != 6;
            ev = json_pack("{s:I, s:s, s:{s:{s:s, s:[{s:s, s:s}]}}, s:s}", "seq", (json_int_t)seq,
                           "type", "assistant/message", "data", "message", "role", "assistant",
                           "content", "type", "text", "text", len % 5 ? text : "", "surface_op",
                           "append");
            if (usage)
                json_object_set_new(json_object_get(ev, "data"), "usage",
                                    json_pack("{s:I, s:I}", "input_tokens", (json_int_t)len * 3,
                                              "output_tokens", (json_int_t)7));
            last_assistant = (long long)seq;
            last_usage = usage ? (size_t)len * 3 + 7 : 0;
            if (!usage)
                last_assistant = -1;
        } else if (pick == 7) {
            ev = json_pack("{s:I, s:s, s:{s:{s:s, s:[{s:s, s:s}]}}, s:s}", "seq", (json_int_t)seq,
                           "type", "system/message", "data", "message", "role", "system",
                           "content", "type", "text", "text", text, "surface_op", "append");
        } else if (n > 0) { /* replace a run of current nodes with a user message */
            size_t a = (rng >> 4) % n, b = a + (rng >> 12) % 3;
            if (b >= n)
                b = n - 1;
            json_t *src = json_array();
            for (size_t i = a; i <= b; i++)
                json_array_append_new(src, json_integer((json_int_t)weir__surface_node(s, i)));
            ev = json_pack("{s:I, s:s, s:{s:{s:s, s:[{s:s, s:s}]}}, s:{s:s, s:I, s:I}, s:o}",
                           "seq", (json_int_t)seq, "type", "user/message", "data", "message",
                           "role", "user", "content", "type", "text", "text", text, "surface_op",
                           "op", "replace", "start_seq", (json_int_t)weir__surface_node(s, a),
                           "end_seq", (json_int_t)weir__surface_node(s, b), "source_seqs", src);
        } else {
            ev = json_pack("{s:I, s:s, s:{}}", "seq", (json_int_t)seq, "type", "drvtest/x", "data");
        }
        free(text);
        assert_non_null(ev);
        events[seq] = ev;
        assert_int_equal(weir__surface_apply(s, ev), WEIR_OK);
        assert_int_equal(cp_meter_apply(&m, ev, &cfg), 0);
        assert_int_equal(cp_meter_apply(&m, ev, &cfg), 0); /* applied twice: skipped */
        json_t *arr = surface_array(s, events);
        size_t want = cp_measure(arr, last_assistant, last_usage, 0);
        if (cp_meter_tokens(&m) != want)
            fail_msg("seq %zu: meter %zu, full measurement %zu", seq, cp_meter_tokens(&m), want);
        size_t pinned = 0, i;
        const json_t *node;
        json_array_foreach(arr, i, node) {
            if (cp_message_pinned(&cfg, json_object_get(node, "message")))
                pinned += cp_message_tokens(json_object_get(node, "message"));
        }
        assert_int_equal(m.pinned_tokens, pinned);
        assert_int_equal(m.count, json_array_size(arr));
        json_decref(arr);
    }
    /* a gap or a replace naming a node that is not current: stale */
    json_t *gap = json_pack("{s:I, s:s, s:{}}", "seq", (json_int_t)N + 5, "type", "x", "data");
    assert_int_equal(cp_meter_apply(&m, gap, &cfg), -1);
    json_decref(gap);
    json_t *bad = json_pack("{s:I, s:s, s:{s:{s:s, s:[]}}, s:{s:s, s:I, s:I}}", "seq", (json_int_t)N,
                            "type", "user/message", "data", "message", "role", "user", "content",
                            "surface_op", "op", "replace", "start_seq", (json_int_t)N + 1,
                            "end_seq", (json_int_t)N + 1);
    assert_int_equal(cp_meter_apply(&m, bad, &cfg), -1);
    json_decref(bad);
    for (size_t i = 0; i < N; i++)
        json_decref(events[i]);
    weir__surface_destroy(s);
    cp_meter_clear(&m);
    cp_meter_clear(&m);
    cp_config_clear(&cfg);
}

/* ------------------------------------------------------------------------ */
/* Through the host and driver                                               */
/* ------------------------------------------------------------------------ */

static const char *end_kind(const dh *d, int n) {
    return json_string_value(
        json_object_get(json_object_get(dh_event_data(d, "turn/end", n), "reason"), "kind"));
}

static const char *end_code(const dh *d, int n) {
    const json_t *reason = json_object_get(dh_event_data(d, "turn/end", n), "reason");
    return json_string_value(json_object_get(json_object_get(reason, "error"), "code"));
}

/* provider-scripted with a 1000-token demo model, plus compaction-basic. */
static void setup(dh *d, const char *replies, const char *compaction, const char *extra_rows) {
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":1000,\"max_output\":100}},"
                     "\"replies\":[%s]}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":%s}%s%s]",
                     replies, compaction, extra_rows ? "," : "", extra_rows ? extra_rows : "");
    dh_setup(d, rows, NULL);
    free(rows);
}

static void run_text(dh *d, const char *text) {
    dh_send(d, text, WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

static const char *first_text(const json_t *messages, size_t i) {
    return json_string_value(json_object_get(
        json_array_get(json_object_get(json_array_get(messages, i), "content"), 0), "text"));
}

static void pressure_compacts_between_turns_with_a_summary(void **state) {
    (void)state;
    char *u1 = repeat('u', 400), *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}},"
            "{\"text\":\"short answer\",\"usage\":{\"input_tokens\":850,\"output_tokens\":10}},"
            "{\"text\":\"SUMMARY-ONE\",\"expect\":{\"message_contains\":\"%s\","
            "\"messages_count\":5,\"last_role\":\"user\"}},"
            "{\"text\":\"third answer\",\"expect\":{\"message_contains\":"
            "\"<compacted-summary>\\nSUMMARY-ONE\\n</compacted-summary>\",\"messages_count\":3}}",
            a1, u1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    dh_open(&d, "pressure");
    run_text(&d, u1);
    run_text(&d, "second question");
    assert_int_equal(dh_count(&d, "compaction/start"), 0); /* 200 + 8 tokens: below 800 */
    run_text(&d, "third question");
    assert_string_equal(end_kind(&d, 2), "completed");
    dh_assert_types(&d,
                    "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                    "request/header,request/context,assistant/message,step/end,turn/end,"
                    "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                    "assistant/message,step/end,turn/end,"
                    "agent/inbox/spliced,turn/start,agent/inbox/spliced,compaction/start,"
                    "compaction/summary,user/message,compaction/end,step/start,user/message,"
                    "assistant/message,step/end,turn/end");
    const json_t *start = dh_event_data(&d, "compaction/start", 0);
    assert_string_equal(json_string_value(json_object_get(start, "trigger")), "pressure");
    assert_int_equal(json_integer_value(json_object_get(start, "tokens")), 860 + 4 + 4);
    assert_int_equal(json_integer_value(json_object_get(start, "threshold")), 800);
    assert_int_equal(json_integer_value(json_object_get(start, "context_window")), 1000);

    /* the replace: user/message over U1..U2, sources = summary event + every shadowed node */
    const json_t *u1ev = dh_find(&d, "user/message", 0), *u2ev = dh_find(&d, "user/message", 1);
    const json_t *a1ev = dh_find(&d, "assistant/message", 0);
    const json_t *sum = dh_find(&d, "compaction/summary", 0);
    const json_t *rep = dh_find(&d, "user/message", 2);
    json_t *op = json_pack("{s:s, s:O, s:O}", "op", "replace", "start_seq",
                           json_object_get(u1ev, "seq"), "end_seq", json_object_get(u2ev, "seq"));
    assert_true(json_equal(json_object_get(rep, "surface_op"), op));
    json_decref(op);
    json_t *src =
        json_pack("[O, O, O, O]", json_object_get(sum, "seq"), json_object_get(u1ev, "seq"),
                  json_object_get(a1ev, "seq"), json_object_get(u2ev, "seq"));
    assert_true(json_equal(json_object_get(rep, "source_seqs"), src));
    json_decref(src);
    const json_t *sd = json_object_get(sum, "data");
    char *want_text = cp_checkpoint_text("SUMMARY-ONE", NULL, 0);
    assert_string_equal(json_string_value(json_object_get(sd, "summary")), want_text);
    assert_string_equal(json_string_value(json_object_get(sd, "replay")), "full");
    assert_string_equal(json_string_value(json_object_get(sd, "provider")), "scripted");
    assert_string_equal(json_string_value(json_object_get(sd, "model")), "demo");
    assert_int_equal(json_array_size(json_object_get(sd, "shadowed_seqs")), 3);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_true(json_is_true(json_object_get(end, "ok")));
    assert_null(json_object_get(end, "error"));
    assert_int_equal(json_integer_value(json_object_get(end, "summaries")), 1);
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 0);
    assert_true(json_is_true(json_object_get(dh_find(&d, "compaction/end", 0), "ignorable")));

    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 4); /* summary, A2, U3, A3 */
    /* the checkpoint message: the summary block, then the ids recall takes */
    char *want_msg = fmt("%s\n\n## Recall ids\nThe recall tool returns the original text of "
                         "these messages and tool results, which this checkpoint replaced:\n"
                         "- seq:%lld: user message\n- seq:%lld: user message\n",
                         want_text, (long long)json_integer_value(json_object_get(u1ev, "seq")),
                         (long long)json_integer_value(json_object_get(u2ev, "seq")));
    assert_string_equal(first_text(msgs, 0), want_msg);
    free(want_msg);
    assert_string_equal(first_text(msgs, 1), "short answer");
    json_decref(msgs);
    free(want_text);
    free(u1);
    free(a1);
    dh_teardown(&d);
}

/* weir_agent_compact between turns: no threshold, one summary that keeps the
 * tail, the instructions in the summarizer's system prompt, a result object;
 * then declined when nothing is compactable. */
static void manual_compaction_between_turns(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies = fmt("{\"text\":\"%s\"},{\"text\":\"short answer\"},"
                        "{\"text\":\"SUMMARY-M\",\"expect\":{\"message_contains\":"
                        "\"Additional instructions for this summary:\\nKEEP NAMES\"}}",
                        a1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    dh_open(&d, "manual");
    run_text(&d, "first question");
    run_text(&d, "second question");
    assert_int_equal(dh_count(&d, "compaction/start"), 0); /* far below the threshold */
    json_t *r = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_compact(d.agent, "KEEP NAMES", &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "compacted");
    assert_string_equal(json_string_value(json_object_get(r, "message")), "summarized");
    assert_int_equal(json_integer_value(json_object_get(r, "summaries")), 1);
    assert_true(json_integer_value(json_object_get(r, "tokens_after")) <
                json_integer_value(json_object_get(r, "tokens_before")));
    const json_t *start = dh_event_data(&d, "compaction/start", 0);
    assert_string_equal(json_string_value(json_object_get(start, "trigger")), "manual");
    assert_int_equal(json_integer_value(json_object_get(start, "turn")), 2);
    assert_int_equal(json_integer_value(json_object_get(start, "step")), 0);
    assert_null(json_object_get(start, "threshold"));
    assert_string_equal(json_string_value(json_object_get(r, "compaction_id")),
                        json_string_value(json_object_get(start, "compaction_id")));
    json_decref(r);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_non_null(strstr(first_text(msgs, 0), "<compacted-summary>\nSUMMARY-M\n"));
    assert_string_equal(first_text(msgs, json_array_size(msgs) - 1), "short answer");
    json_decref(msgs);

    assert_int_equal(weir_agent_compact(NULL, NULL, &r, &err), WEIR_E_INVAL);
    assert_int_equal(weir_agent_compact(d.agent, NULL, NULL, &err), WEIR_E_INVAL);
    free(a1);
    dh_teardown(&d);
}

/* Declined, with nothing logged: before any request (no route), and when
 * the whole history fits in the kept tail. */
static void manual_compaction_declines(void **state) {
    (void)state;
    dh d;
    setup(&d, "{\"text\":\"an answer\"}", "{\"keep_recent_tokens\":100000}", NULL);
    dh_open(&d, "fresh");
    json_t *r = NULL;
    weir_error err;
    assert_int_equal(weir_agent_compact(d.agent, NULL, &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "declined");
    assert_string_equal(json_string_value(json_object_get(r, "message")),
                        "nothing was sent to a model yet");
    json_decref(r);
    run_text(&d, "a question");
    assert_int_equal(weir_agent_compact(d.agent, NULL, &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "declined");
    assert_string_equal(json_string_value(json_object_get(r, "message")), "nothing compactable");
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    json_decref(r);
    dh_teardown(&d);
}

static void pressure_summaries_are_bounded_per_trigger(void **state) {
    (void)state;
    char *u1 = repeat('u', 400), *a1 = repeat('a', 400), *u2 = repeat('v', 3600);
    char *replies = fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}},"
                        "{\"text\":\"S1\"},"
                        "{\"text\":\"fine\",\"expect\":{\"messages_count\":3}}",
                        a1);
    dh d;
    /* recall off: the figures below are the checkpoint's without its id list */
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_attempts\":1,\"recall\":{\"enabled\":false}}",
          NULL);
    free(replies);
    dh_open(&d, "bounded");
    run_text(&d, u1);
    run_text(&d, u2); /* 200 + 904 entering: the kept tail alone stays above 800 */
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_int_equal(json_integer_value(json_object_get(end, "summaries")), 1);
    assert_int_equal(json_integer_value(json_object_get(end, "tokens_before")), 1104);
    assert_int_equal(json_integer_value(json_object_get(end, "tokens_after")), 1039);
    assert_string_equal(json_string_value(json_object_get(end, "error")),
                        "still above the threshold (1039 >= 800 tokens) after 1 summary attempt");
    free(u1);
    free(a1);
    free(u2);
    dh_teardown(&d);
}

static void nothing_happens_below_the_threshold(void **state) {
    (void)state;
    dh d;
    /* no summary reply is scripted: a model call for a summary would exhaust the script */
    setup(&d,
          "{\"text\":\"one\",\"usage\":{\"input_tokens\":400,\"output_tokens\":10}},"
          "{\"text\":\"two\",\"usage\":{\"input_tokens\":780,\"output_tokens\":10}}",
          "{}", NULL);
    dh_open(&d, "below");
    run_text(&d, "first");
    run_text(&d, "second"); /* 410 + 6 tokens: below 800 */
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    assert_int_equal(dh_count(&d, "compaction/prune"), 0);
    dh_teardown(&d);
}

static const json_t *recorded_request(const dh *d, const char *purpose, int n);
static char *dumps(const json_t *v);
static void assert_same_bytes(const json_t *a, const json_t *b);
static int count_in_turn(const dh *d, const char *type, json_int_t turn);

/* Issue #32 item 4: pruning is part of a compaction, never a step of its
 * own.  Under pressure the summary comes first (its request replays the last
 * one unchanged), then, in the same compaction, the oversized results of
 * the kept tail are pruned: start, summary, its replace, prune, the
 * tool/result replace, end.  (Before #32 a pressure compaction pruned first
 * and stopped there when that was enough: a rewrite in the middle of the
 * history between compactions.) */
static void pruning_comes_with_the_summary(void **state) {
    (void)state;
    char *big = repeat('x', 6000), *u1 = repeat('u', 1200);
    char *tools = fmt("{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                      "{\"name\":\"big\",\"reply\":\"HEAD%sTAIL\"}]}}",
                      big);
    free(big);
    dh d;
    setup(&d,
          "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}],"
          "\"usage\":{\"input_tokens\":300,\"output_tokens\":10}},"
          "{\"text\":\"SUMMARY-P\",\"expect\":{\"message_contains\":\"HEADxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}},"
          "{\"text\":\"ok\",\"expect\":{\"message_contains\":\"characters pruned\"}}",
          "{\"prune\":{\"max_result_chars\":1000,\"head_chars\":100,\"tail_chars\":50}}", tools);
    free(tools);
    dh_open(&d, "prune");
    run_text(&d, u1);
    free(u1);
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    assert_int_equal(dh_count(&d, "compaction/prune"), 1);
    assert_int_equal(dh_count(&d, "tool/result"), 2);
    /* the summary request saw the result unpruned: the agent's last request, unchanged */
    const json_t *sreq = recorded_request(&d, "compaction", 0);
    assert_non_null(sreq);
    char *sbytes = dumps(json_object_get(sreq, "messages"));
    assert_null(strstr(sbytes, "characters pruned"));
    assert_non_null(strstr(sbytes, "xxxxTAIL"));
    free(sbytes);
    const json_t *orig = dh_find(&d, "tool/result", 0), *pruned = dh_find(&d, "tool/result", 1);
    const json_t *pe = dh_event_data(&d, "compaction/prune", 0);
    assert_int_equal(json_integer_value(json_object_get(pe, "seq")),
                     json_integer_value(json_object_get(orig, "seq")));
    assert_int_equal(json_integer_value(json_object_get(pe, "pruned_chars")), 6008 - 150);
    /* the rewrite changes only the content and cites the original */
    json_t *src = json_pack("[O]", json_object_get(orig, "seq"));
    assert_true(json_equal(json_object_get(pruned, "source_seqs"), src));
    json_decref(src);
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(pruned, "data"), "message"), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(block, "call_id")), "c1");
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(block, "content"), 0), "text"));
    assert_non_null(text);
    assert_int_equal(strncmp(text, "HEADxxx", 7), 0);
    assert_non_null(strstr(text, "xx\n[\xE2\x80\xA6 5858 characters pruned \xE2\x80\xA6]\nxx"));
    assert_int_equal(strcmp(text + strlen(text) - 6, "xxTAIL"), 0);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_true(json_is_true(json_object_get(end, "ok")));
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 1);
    assert_int_equal(json_integer_value(json_object_get(end, "summaries")), 1);
    /* one compaction between the tool step and the next: the summary, then the prune */
    char *types = dh_types(&d, true);
    assert_non_null(strstr(types, "tool/result,step/end,compaction/start,compaction/summary,"
                                  "user/message,compaction/prune-decision,compaction/prune,"
                                  "tool/result,compaction/end,step/start"));
    free(types);
    /* the next request: checkpoint, the call and its pruned result */
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 4);
    assert_non_null(strstr(first_text(msgs, 0), "SUMMARY-P"));
    json_decref(msgs);
    dh_teardown(&d);
}

/* Pruning alone only when no summary can help: here the only message before
 * the tool unit is pinned, so there is no summary range; the compaction
 * prunes and logs no summary. */
static void pruning_alone_when_no_summary_can_help(void **state) {
    (void)state;
    char *big = repeat('x', 6000);
    char *tools = fmt("{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                      "{\"name\":\"big\",\"reply\":\"HEAD%sTAIL\"}]}}",
                      big);
    free(big);
    dh d;
    setup(&d,
          "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}],"
          "\"usage\":{\"input_tokens\":100,\"output_tokens\":10}},"
          "{\"text\":\"ok\",\"expect\":{\"message_contains\":\"characters pruned\"}}",
          "{\"pinned_patterns\":[\"^run\"],\"prune\":{\"max_result_chars\":1000,"
          "\"head_chars\":100,\"tail_chars\":50}}",
          tools);
    free(tools);
    dh_open(&d, "prune-alone");
    run_text(&d, "run the tool");
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/prune"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    assert_null(recorded_request(&d, "compaction", 0));
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_true(json_is_true(json_object_get(end, "ok")));
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 1);
    char *types = dh_types(&d, true);
    assert_non_null(strstr(types, "tool/result,step/end,compaction/start,"
                                  "compaction/prune-decision,compaction/prune,tool/result,"
                                  "compaction/end,step/start"));
    free(types);
    dh_teardown(&d);
}

/* Between compactions the history is append-only: an oversized tool result
 * stays as it came while the context is below the threshold, and a failed
 * summary under pressure prunes nothing either (the surface is unchanged). */
static void no_pruning_between_compactions(void **state) {
    (void)state;
    char *big = repeat('x', 6000), *u1 = repeat('u', 1200);
    char *tools = fmt("{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                      "{\"name\":\"big\",\"reply\":\"%s\"}]}}",
                      big);
    free(big);
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":%d}},\"replies\":["
                     "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}],"
                     "\"usage\":{\"input_tokens\":300,\"output_tokens\":10}},"
                     "{\"text\":\"read it\",\"usage\":{\"input_tokens\":1950,\"output_tokens\":10}},"
                     "{\"fail\":{\"code\":\"SERVER\",\"message\":\"summarizer down\"}},"
                     "{\"text\":\"fine\",\"expect\":{\"message_contains\":\"xxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}"
                     "]}},%s,"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":{\"prune\":"
                     "{\"max_result_chars\":1000,\"head_chars\":100,\"tail_chars\":50}}}]",
                     2400, tools);
    free(tools);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, "append-only");
    run_text(&d, u1); /* 2 steps below the threshold (1920 tokens) */
    free(u1);
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    assert_int_equal(dh_count(&d, "compaction/prune"), 0);
    run_text(&d, "and now?"); /* above it: the summary fails, nothing is pruned */
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/prune"), 0);
    assert_int_equal(dh_count(&d, "tool/result"), 1);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 0);
    dh_teardown(&d);
}

/* Issue #32 item 4, thinking models: a session whose last request sent
 * reasoning continuations back compacts under pressure only at a turn
 * boundary (the first step of a turn, a user message entering, no tool loop
 * open), so the kept tail never holds a tool-use turn whose reasoning the
 * core dropped; pressure in the middle of the tool loop waits, unless the
 * request would overflow first (`overflow_at` true: usage near the window). */
static void thinking_run(bool overflow_at) {
    char *u1 = repeat('u', 2000);
    long usage = overflow_at ? 9200 : 8500; /* + max_tokens 1024: at / below the 10000 window */
    char *replies = fmt(
        "{\"reasoning\":\"let me look\",\"continuation\":{\"signature\":\"sig-1\"},"
        "\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":%ld,\"output_tokens\":10}},"
        "%s"
        "{\"text\":\"done\",\"usage\":{\"input_tokens\":%ld,\"output_tokens\":10}}"
        "%s",
        usage, overflow_at ? "{\"text\":\"SUMMARY-MID\"}," : "", usage,
        overflow_at ? "" : ",{\"text\":\"SUMMARY-T\"},{\"text\":\"fine\",\"expect\":{"
                           "\"message_contains\":\"SUMMARY-T\",\"last_role\":\"user\"}}");
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":10000,\"max_output\":1000}},"
                     "\"replies\":[%s]}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                     "{\"name\":\"echo\"}]}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
                     "{\"keep_recent_tokens\":1}}]",
                     replies);
    free(replies);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, overflow_at ? "thinking-overflow" : "thinking");
    run_text(&d, u1);
    free(u1);
    assert_string_equal(end_kind(&d, 0), "completed");
    /* the reasoning came back with its continuation */
    json_t *msgs = weir_agent_messages(d.agent);
    const json_t *block = json_array_get(json_object_get(json_array_get(msgs, 1), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(block, "type")), "reasoning");
    assert_non_null(json_object_get(block, "continuation"));
    json_decref(msgs);
    if (overflow_at) { /* no waiting: it would not fit */
        assert_int_equal(count_in_turn(&d, "compaction/start", 1), 1);
        const json_t *start = dh_event_data(&d, "compaction/start", 0);
        assert_int_equal(json_integer_value(json_object_get(start, "step")), 2);
        assert_int_equal(dh_count(&d, "compaction/summary"), 1);
        dh_teardown(&d);
        return;
    }
    assert_int_equal(dh_count(&d, "compaction/start"), 0); /* pressure at step 2: it waits */
    run_text(&d, "next question");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    const json_t *start = dh_event_data(&d, "compaction/start", 0);
    assert_int_equal(json_integer_value(json_object_get(start, "turn")), 2);
    assert_int_equal(json_integer_value(json_object_get(start, "step")), 1);
    assert_true(json_is_true(json_object_get(dh_event_data(&d, "compaction/end", 0), "ok")));
    /* the summary request carried the reasoning as the agent's last request did */
    const json_t *sreq = recorded_request(&d, "compaction", 0);
    assert_non_null(sreq);
    char *sent = dumps(json_object_get(sreq, "messages"));
    assert_non_null(strstr(sent, "sig-1"));
    free(sent);
    dh_teardown(&d);
}

static void thinking_sessions_compact_at_a_turn_boundary(void **state) {
    (void)state;
    thinking_run(false);
}

static void thinking_sessions_compact_mid_turn_before_an_overflow(void **state) {
    (void)state;
    thinking_run(true);
}

/* Issue #32 item 1: the summary request replays the agent's last request,
 * and agent_complete_stream filters its messages as the driver filters the
 * agent's own (core/format/continuation.h): a continuation of another route, a
 * malformed one and one made stale by an earlier compaction are left out
 * of both, so the summary's messages start with the last request's, byte
 * for byte (the provider's cached prefix; Anthropic's prefix check).  The
 * history keeps every one. */
static void summary_request_drops_the_continuations_the_last_request_dropped(void **state) {
    (void)state;
    char *a1 = repeat('a', 400), *a3 = repeat('b', 400);
    char *replies = fmt(
        "{\"text\":\"%s\"},"
        "{\"reasoning\":\"think\",\"continuation\":{\"signature\":\"SIG-STALE\"},"
        "\"text\":\"short answer\"},"
        "{\"text\":\"SUMMARY-1\"},"
        "{\"reasoning\":\"other\",\"continuation\":{\"provider\":\"scripted\",\"model\":"
        "\"other\",\"data\":{\"signature\":\"SIG-ROUTE\"}},\"text\":\"%s\"},"
        "{\"reasoning\":\"bad\",\"continuation\":{\"provider\":\"scripted\",\"model\":\"demo\","
        "\"data\":{\"signature\":42}},\"text\":\"fourth\"},"
        "{\"text\":\"fifth\"},"
        "{\"text\":\"SUMMARY-2\"}",
        a1, a3);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    dh_open(&d, "summary-filter");
    run_text(&d, "first question");
    run_text(&d, "second question");
    json_t *r = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_compact(d.agent, NULL, &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "compacted");
    json_decref(r);
    run_text(&d, "third question");
    run_text(&d, "fourth question");
    run_text(&d, "fifth question");
    assert_string_equal(end_kind(&d, 4), "completed");
    /* the history keeps them all (agent_messages is the raw history) */
    json_t *msgs = weir_agent_messages(d.agent);
    char *raw = dumps(msgs);
    json_decref(msgs);
    assert_non_null(strstr(raw, "SIG-STALE"));
    assert_non_null(strstr(raw, "SIG-ROUTE"));
    assert_non_null(strstr(raw, "\"bad\""));
    free(raw);
    assert_int_equal(weir_agent_compact(d.agent, NULL, &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "compacted");
    json_decref(r);

    const json_t *last = json_object_get(recorded_request(&d, NULL, 4), "messages");
    assert_non_null(last);
    assert_null(recorded_request(&d, NULL, 5));
    char *sent = dumps(last);
    assert_null(strstr(sent, "SIG-")); /* what the agent's own request left out */
    assert_null(strstr(sent, "\"bad\""));
    free(sent);
    const json_t *sreq = recorded_request(&d, "compaction", 1);
    assert_non_null(sreq);
    const json_t *smsgs = json_object_get(sreq, "messages");
    sent = dumps(smsgs);
    assert_null(strstr(sent, "SIG-"));
    assert_null(strstr(sent, "\"bad\""));
    assert_non_null(strstr(sent, "short answer"));
    free(sent);
    /* the last request (then its answer and the instruction): a byte-identical prefix */
    assert_int_equal(json_array_size(smsgs), json_array_size(last) + 2);
    for (size_t i = 0; i < json_array_size(last); i++)
        assert_same_bytes(json_array_get(smsgs, i), json_array_get(last, i));
    free(a1);
    free(a3);
    dh_teardown(&d);
}

static void overflow_recovery_retries_after_a_summary(void **state) {
    (void)state;
    char *u1 = repeat('u', 400), *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\"},"
            "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"too long\"}},"
            "{\"text\":\"SUMMARY-TWO\"},"
            "{\"text\":\"recovered\",\"expect\":{\"message_contains\":\"SUMMARY-TWO\","
            "\"messages_count\":2,\"last_role\":\"user\"}}",
            a1);
    dh d;
    setup(&d, replies, "{}", NULL);
    free(replies);
    dh_open(&d, "overflow");
    run_text(&d, u1);
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "completed");
    dh_assert_types(&d,
                    "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                    "request/header,request/context,assistant/message,step/end,turn/end,"
                    "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                    "assistant/attempt,compaction/start,compaction/summary,user/message,"
                    "compaction/end,assistant/message,step/end,turn/end");
    const json_t *start = dh_event_data(&d, "compaction/start", 0);
    assert_string_equal(json_string_value(json_object_get(start, "trigger")), "overflow");
    assert_null(json_object_get(start, "threshold"));
    /* forced: keeps only the newest node (the entered question) */
    const json_t *summary = dh_event_data(&d, "compaction/summary", 0);
    assert_int_equal(json_array_size(json_object_get(summary, "shadowed_seqs")), 2);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 3);
    assert_non_null(strstr(first_text(msgs, 0), "<compacted-summary>\nSUMMARY-TWO\n"));
    assert_string_equal(first_text(msgs, 1), "second question");
    json_decref(msgs);
    free(u1);
    free(a1);
    dh_teardown(&d);
}

static void overflow_with_nothing_compactable_keeps_the_original_error(void **state) {
    (void)state;
    dh d;
    setup(&d,
          "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"prompt is too long\"}}",
          "{}", NULL);
    dh_open(&d, "overflow-nothing");
    run_text(&d, "a single message");
    assert_string_equal(end_kind(&d, 0), "error");
    assert_string_equal(end_code(&d, 0), "CONTEXT_WINDOW_EXCEEDED");
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    assert_int_equal(dh_count(&d, "drvtest/request"), 1);
    dh_teardown(&d);
}

static void overflow_recovery_is_bounded_per_step(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies = fmt("{\"text\":\"%s\"},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\"}},"
                        "{\"text\":\"SUMMARY\"},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\"}}",
                        a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"max_overflow_retries\":1}", NULL);
    free(replies);
    dh_open(&d, "overflow-bounded");
    char *u1 = repeat('u', 400);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "error");
    assert_string_equal(end_code(&d, 1), "CONTEXT_WINDOW_EXCEEDED");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 2);
    dh_teardown(&d);
}

static void summarizer_failure_leaves_the_surface_unchanged(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies = fmt("{\"text\":\"%s\"},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\"}},"
                        "{\"fail\":{\"code\":\"SERVER\",\"message\":\"summarizer down\"}}",
                        a1);
    free(a1);
    dh d;
    setup(&d, replies, "{}", NULL);
    free(replies);
    dh_open(&d, "summary-fails");
    run_text(&d, "first question, long enough to be worth a summary");
    json_t *before = weir_agent_messages(d.agent);
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "error");
    assert_string_equal(end_code(&d, 1), "CONTEXT_WINDOW_EXCEEDED"); /* the original error */
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_string_equal(json_string_value(json_object_get(end, "error")),
                        "the summarizer failed: SERVER: summarizer down");
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    json_t *after = weir_agent_messages(d.agent);
    /* unchanged but for the question this turn entered */
    assert_int_equal(json_array_size(after), json_array_size(before) + 1);
    for (size_t i = 0; i < json_array_size(before); i++)
        assert_true(json_equal(json_array_get(before, i), json_array_get(after, i)));
    json_decref(before);
    json_decref(after);
    dh_teardown(&d);
}

static void a_non_shrinking_summary_is_rejected(void **state) {
    (void)state;
    char *long_summary = repeat('s', 3000);
    char *replies =
        fmt("{\"text\":\"first answer\",\"usage\":{\"input_tokens\":900,\"output_tokens\":10}},"
            "{\"text\":\"%s\"},"
            "{\"text\":\"second answer\",\"expect\":{\"messages_count\":3}}",
            long_summary);
    free(long_summary);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_attempts\":1}", NULL);
    free(replies);
    dh_open(&d, "no-shrink");
    run_text(&d, "first question");
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "completed"); /* pressure failures never stop a turn */
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    const char *err = json_string_value(json_object_get(end, "error"));
    assert_non_null(err);
    assert_non_null(strstr(err, "does not shrink"));
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    assert_int_equal(dh_count(&d, "user/message"), 2);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Issue #9: the replayed summary request, pinned context, the breaker,      */
/* the meter, and the compaction scenarios                                   */
/* ------------------------------------------------------------------------ */

/* The n-th recorded request of a plugin's call with `purpose` (NULL: the
 * lifecycle's requests), as the provider received it.  Borrowed. */
static const json_t *recorded_request(const dh *d, const char *purpose, int n) {
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "type")), "drvtest/request") != 0)
            continue;
        const char *p = json_string_value(json_object_get(json_object_get(e, "data"), "purpose"));
        if ((purpose ? p && !strcmp(p, purpose) : !p) && n-- == 0)
            return json_object_get(json_object_get(e, "data"), "request");
    }
    return NULL;
}

static char *dumps(const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    assert_non_null(s);
    return s;
}

static void assert_same_bytes(const json_t *a, const json_t *b) {
    char *x = dumps(a), *y = dumps(b);
    if (strcmp(x, y) != 0)
        fail_msg("not byte-identical:\n  %s\n  %s", x, y);
    free(x);
    free(y);
}

static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The summary request is the agent's last request as derived (system
 * prompt, tools, messages with their real tool calls and results), byte for
 * byte, plus one final user message with the structured instruction; it
 * goes through llm/stream (the recorder sees it) with the agent's call config
 * as it is (no tool_choice, the same max_tokens: issue #32 item 4);
 * tool calls in the answer are ignored; compaction/end reports the usage,
 * cache reads included. */
static void summary_request_replays_the_last_request_plus_one_instruction(void **state) {
    (void)state;
    char *u1 = repeat('u', 1200);
    dh d;
    setup(&d,
          "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{\"v\":1}}],"
          "\"usage\":{\"input_tokens\":30,\"output_tokens\":5}},"
          "{\"text\":\"answer one\",\"usage\":{\"input_tokens\":850,\"output_tokens\":10}},"
          "{\"text\":\"SUMMARY-R\",\"tool_calls\":[{\"id\":\"x1\",\"name\":\"echo\","
          "\"arguments\":{}}],\"usage\":{\"input_tokens\":700,\"output_tokens\":20,"
          "\"cache_read_tokens\":650}},"
          "{\"text\":\"answer two\",\"expect\":{\"messages_count\":4}}",
          "{\"keep_recent_tokens\":1}",
          "{\"id\":\"prompt\",\"plugin\":\"system-prompt\",\"config\":{\"text\":\"Be terse.\"}},"
          "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":[{\"name\":"
          "\"echo\"}]}}");
    dh_open(&d, "replay");
    run_text(&d, u1);
    json_t *before = weir_agent_messages(d.agent); /* the derived history the summary sees */
    assert_int_equal(json_array_size(before), 5);  /* system, user, call, result, answer */
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);

    const json_t *sreq = recorded_request(&d, "compaction", 0);
    assert_non_null(sreq);
    assert_null(recorded_request(&d, "compaction", 1));
    const json_t *header = json_object_get(dh_event_data(&d, "request/header", 0), "header");
    const json_t *smsgs = json_object_get(sreq, "messages");
    /* the derived request's messages, then exactly one more */
    assert_int_equal(json_array_size(smsgs), json_array_size(before) + 1);
    for (size_t i = 0; i < json_array_size(before); i++)
        assert_same_bytes(json_array_get(smsgs, i), json_array_get(before, i));
    /* the last request the agent sent is a byte-identical prefix (the provider's cache) */
    const json_t *last = json_object_get(recorded_request(&d, NULL, 1), "messages");
    assert_int_equal(json_array_size(last), 4);
    for (size_t i = 0; i < json_array_size(last); i++)
        assert_same_bytes(json_array_get(smsgs, i), json_array_get(last, i));
    /* real messages, not a transcript: the call and its result keep their structure */
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
                            json_array_get(smsgs, 2), "content"), 0), "type")),
                        "tool_call");
    assert_string_equal(json_string_value(json_object_get(json_array_get(smsgs, 3), "role")),
                        "tool");
    const json_t *ask = json_array_get(smsgs, json_array_size(smsgs) - 1);
    assert_string_equal(json_string_value(json_object_get(ask, "role")), "user");
    const char *instruction = first_text(smsgs, json_array_size(smsgs) - 1);
    assert_non_null(strstr(instruction, "## Primary request and intent"));
    assert_non_null(strstr(instruction, "## Critical context that must survive"));
    assert_non_null(strstr(instruction, "The last 1 message above stays verbatim"));
    assert_same_bytes(json_object_get(sreq, "tools"), json_object_get(header, "tools"));
    /* the agent's call config as it is (#32 item 4): no tool_choice (on Anthropic a
     * changed tool_choice invalidates the cached messages), the same max_tokens */
    assert_null(json_object_get(sreq, "tool_choice"));
    const json_t *config = json_object_get(header, "config");
    assert_int_equal(json_object_size(sreq), json_object_size(config) + 2); /* + messages, tools */
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)(uintptr_t)config, key, value) {
        assert_same_bytes(json_object_get(sreq, key), value);
    }
    assert_string_equal(json_string_value(json_object_get(sreq, "provider")), "scripted");
    assert_string_equal(json_string_value(json_object_get(sreq, "model")), "demo");

    /* the answer's tool call was ignored: one tool call in the log, the text counts */
    assert_int_equal(dh_count(&d, "tool/call"), 1);
    const json_t *sum = dh_event_data(&d, "compaction/summary", 0);
    assert_non_null(strstr(json_string_value(json_object_get(sum, "summary")),
                           "<compacted-summary>\nSUMMARY-R\n</compacted-summary>"));
    assert_string_equal(json_string_value(json_object_get(sum, "replay")), "full");
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    json_t *usage = parse("{\"input_tokens\":700,\"output_tokens\":20,\"cache_read_tokens\":650}");
    assert_true(json_equal(json_object_get(end, "usage"), usage));
    json_decref(usage);
    assert_true(json_integer_value(json_object_get(end, "tokens_after")) <
                json_integer_value(json_object_get(end, "tokens_before")));
    /* the checkpoint says it replaces earlier turns */
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(strncmp(first_text(msgs, 1), CP_CHECKPOINT_PREAMBLE,
                             strlen(CP_CHECKPOINT_PREAMBLE)),
                     0);
    assert_non_null(strstr(first_text(msgs, 1), "replaces the earlier turns"));
    json_decref(msgs);
    json_decref(before);
    free(u1);
    dh_teardown(&d);
}

/* The bytes of `body` from `"key":` up to `,"next":` (malloc'd). */
static char *member_text(const char *body, const char *key, const char *next) {
    char open[64], close[64];
    snprintf(open, sizeof open, "\"%s\":", key);
    snprintf(close, sizeof close, ",\"%s\":", next);
    const char *a = strstr(body, open);
    const char *b = a ? strstr(a, close) : NULL;
    if (!a || !b)
        fail_msg("no %s before %s in %s", key, next, body);
    return strndup(a, (size_t)(b - a));
}

/* The same on the wire: provider-openai against the mock server.  The
 * summary request's body starts with the previous request's messages, byte
 * for byte (what a provider's prompt cache keys on), lists the same tools
 * text and adds no tool_choice (issue #32 item 4: the call config stays the
 * agent's, so the cached prefix is read). */
static void summary_request_bytes_on_the_wire_extend_the_last_request(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *script = fmt("{\"requests\":["
                       "{\"text\":\"%s\",\"usage\":{\"input_tokens\":850,\"output_tokens\":10}},"
                       "{\"text\":\"SUMMARY-W\"},"
                       "{\"text\":\"answer two\"}]}",
                       a1);
    free(a1);
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    free(script);
    char *base = mock_llm_base_url(m);
    char *rows = fmt("[{\"id\":\"oa\",\"plugin\":\"provider-openai\",\"config\":{"
                     "\"base_url\":\"%s/v1\",\"api_key\":\"k\",\"probe_windows\":false,"
                     "\"models\":{\"m\":{\"context_window\":1000,\"max_output\":100}}}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
                     "{\"keep_recent_tokens\":1}},"
                     "{\"id\":\"prompt\",\"plugin\":\"system-prompt\",\"config\":{\"text\":"
                     "\"Be terse.\"}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
                     "[{\"name\":\"echo\"}]}}]",
                     base);
    free(base);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"oa\",\"model\":\"m\"}");
    free(rows);
    dh_open(&d, "wire");
    char *u1 = repeat('u', 400);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    assert_int_equal(mock_llm_requests(m), 3);
    char *first = mock_llm_request_body(m, 0), *summary = mock_llm_request_body(m, 1);
    assert_non_null(first);
    assert_non_null(summary);
    /* the first body up to the end of its last message is where the summary's starts */
    const char *end = strstr(first, "],\"tools\":");
    assert_non_null(end);
    assert_int_equal(strncmp(first, "{\"messages\":[", 13), 0);
    size_t upto = (size_t)(end - first);
    if (strncmp(summary, first, upto) != 0 || summary[upto] != ',')
        fail_msg("the summary request does not extend the last one:\n  last:    %s\n  summary: %s",
                 first, summary);
    char *t1 = member_text(first, "tools", "model"), *t2 = member_text(summary, "tools", "model");
    assert_string_equal(t1, t2);
    assert_null(strstr(summary, "tool_choice"));
    assert_null(strstr(first, "tool_choice"));
    assert_non_null(strstr(summary, "## Primary request and intent"));
    free(t1);
    free(t2);
    free(first);
    free(summary);
    dh_teardown(&d);
    mock_llm_stop(m);
}

/* The last user/message replace that copies the pinned message `from`. */
static const json_t *pinned_copy_event(const dh *d, json_int_t from) {
    size_t i;
    const json_t *e;
    const json_t *found = NULL;
    json_array_foreach(d->events, i, e) {
        const json_t *pf = json_object_get(json_object_get(e, "data"), "pinned_from");
        if (json_is_integer(pf) && json_integer_value(pf) == from)
            found = e;
    }
    return found;
}

/* A message matched by pinned_patterns and one sent with source.pinned stay
 * verbatim, in order, right after the checkpoint, through three
 * compactions; the checkpoint lists them under Critical context; an
 * earlier checkpoint the summarizer echoes is merged, not nested. */
static void pinned_messages_survive_three_compactions(void **state) {
    (void)state;
    char *a = repeat('a', 800);
    char *replies = fmt(
        "{\"text\":\"%s\",\"usage\":{\"input_tokens\":10,\"output_tokens\":200}},"
        "{\"text\":\"%s\",\"usage\":{\"input_tokens\":880,\"output_tokens\":20}},"
        "{\"text\":\"S1\"},"
        "{\"text\":\"%s\",\"usage\":{\"input_tokens\":880,\"output_tokens\":20}},"
        "{\"text\":\"%s\\n\\n<compacted-summary>\\nS1\\n</compacted-summary>\\nS2\"},"
        "{\"text\":\"%s\",\"usage\":{\"input_tokens\":880,\"output_tokens\":20}},"
        "{\"text\":\"<compacted-summary>\\nS2\\n</compacted-summary>\\nS3\"},"
        "{\"text\":\"done\"}",
        a, a, a, CP_CHECKPOINT_PREAMBLE, a);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"pinned_patterns\":[\"^CONSTRAINT:\"]}", NULL);
    free(replies);
    dh_open(&d, "pinned");
    run_text(&d, "hello");
    run_text(&d, "CONSTRAINT: never use tabs");
    json_t *msgs = weir_agent_messages(d.agent);
    json_t *p1 = json_incref(json_array_get(msgs, 2));
    json_int_t p1_seq = json_integer_value(json_object_get(dh_find(&d, "user/message", 1), "seq"));
    json_decref(msgs);
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    json_t *m = parse("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"keep the API "
                      "stable\"}],\"source\":{\"kind\":\"human\",\"pinned\":true}}");
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, "pin-2", &err), WEIR_OK);
    json_decref(m);
    dh_run(&d); /* turn 3: compaction 1 (P1 pinned), then P2 enters */
    json_t *p2 = NULL;
    for (int turn = 0; turn < 3; turn++) {
        if (turn > 0)
            run_text(&d, turn == 1 ? "third" : "fourth");
        assert_int_equal(dh_count(&d, "compaction/summary"), turn + 1);
        msgs = weir_agent_messages(d.agent);
        if (turn == 0) /* P2 entered after the compaction: the second to last message */
            p2 = json_incref(json_array_get(msgs, json_array_size(msgs) - 2));
        const json_t *source = json_object_get(json_array_get(msgs, 0), "source");
        assert_string_equal(json_string_value(json_object_get(source, "kind")), "compaction");
        const char *cp = first_text(msgs, 0);
        assert_int_equal(count_of(cp, CP_SUMMARY_OPEN), 1); /* merged, never nested */
        assert_int_equal(count_of(cp, CP_CHECKPOINT_PREAMBLE), 1);
        assert_non_null(strstr(cp, "## Critical context that must survive\n\nPinned messages of "
                                   "the user, kept verbatim after this checkpoint:\n\n"
                                   "> CONSTRAINT: never use tabs\n"));
        /* verbatim, in order, right after the checkpoint */
        assert_true(json_equal(json_array_get(msgs, 1), p1));
        if (turn > 0) {
            assert_true(json_equal(json_array_get(msgs, 2), p2));
            assert_non_null(strstr(cp, "> CONSTRAINT: never use tabs\n\n> keep the API stable\n"));
        }
        json_decref(msgs);
    }
    const char *last = json_string_value(json_object_get(dh_event_data(&d, "compaction/summary", 2),
                                                         "summary"));
    assert_null(strstr(last, "S2\n</compacted-summary>"));
    assert_non_null(strstr(last, "<compacted-summary>\nS2\n\nS3"));
    /* the copy cites the original */
    const json_t *copy = pinned_copy_event(&d, p1_seq);
    assert_non_null(copy);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(copy, "source_seqs"), 0)),
                     p1_seq);
    assert_non_null(json_object_get(dh_event_data(&d, "compaction/summary", 2), "pinned_seqs"));
    json_decref(p1);
    json_decref(p2);
    free(a);
    dh_teardown(&d);
}

/* The n-th durable event of `type` in turn `turn`, counting from 0; or NULL. */
static int count_in_turn(const dh *d, const char *type, json_int_t turn) {
    int n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        if (json_object_get(e, "seq") &&
            !strcmp(json_string_value(json_object_get(e, "type")), type) &&
            json_integer_value(json_object_get(json_object_get(e, "data"), "turn")) == turn)
            n++;
    }
    return n;
}

/* One turn of many tool steps, each needing a compaction: at most
 * max_compactions_per_turn start (a failed one counts), then
 * compaction/breaker {turn, reason, compactions} and no more compaction in
 * that turn; the next turn compacts again. */
static void breaker_trips_at_the_cap_and_resets_next_turn(void **state) {
    (void)state;
    char *u1 = repeat('u', 2000), *t = repeat('t', 800);
    char *replies = fmt(
        "{\"text\":\"%s\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":950,\"output_tokens\":5}},"
        "{\"fail\":{\"code\":\"SERVER\",\"message\":\"summarizer down\"}},"
        "{\"text\":\"%s\",\"tool_calls\":[{\"id\":\"c2\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":950,\"output_tokens\":5}},"
        "{\"text\":\"S2\"},"
        "{\"text\":\"%s\",\"tool_calls\":[{\"id\":\"c3\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":950,\"output_tokens\":5}},"
        "{\"text\":\"%s\",\"tool_calls\":[{\"id\":\"c4\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":950,\"output_tokens\":5}},"
        "{\"text\":\"done\",\"usage\":{\"input_tokens\":950,\"output_tokens\":5}},"
        "{\"text\":\"S3\"},"
        "{\"text\":\"fine\"}",
        t, t, t, t);
    free(t);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_compactions_per_turn\":2}",
          "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":[{\"name\":"
          "\"echo\"}]}}");
    free(replies);
    dh_open(&d, "storm");
    run_text(&d, u1);
    free(u1);
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "step/start"), 5);
    assert_int_equal(count_in_turn(&d, "compaction/start", 1), 2); /* the cap */
    assert_false(json_is_true(json_object_get(dh_event_data(&d, "compaction/end", 0), "ok")));
    assert_true(json_is_true(json_object_get(dh_event_data(&d, "compaction/end", 1), "ok")));
    assert_int_equal(dh_count(&d, "compaction/breaker"), 1); /* said once, then silent */
    const json_t *br = dh_event_data(&d, "compaction/breaker", 0);
    assert_int_equal(json_integer_value(json_object_get(br, "turn")), 1);
    assert_int_equal(json_integer_value(json_object_get(br, "step")), 4);
    assert_string_equal(json_string_value(json_object_get(br, "reason")),
                        "max_compactions_per_turn");
    assert_int_equal(json_integer_value(json_object_get(br, "compactions")), 2);
    assert_true(json_is_true(json_object_get(dh_find(&d, "compaction/breaker", 0), "ignorable")));
    run_text(&d, "next turn");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(count_in_turn(&d, "compaction/start", 2), 1); /* reset */
    assert_int_equal(dh_count(&d, "compaction/breaker"), 1);
    dh_teardown(&d);
}

/* A compaction that saved less than min_savings_ratio of what it shadowed
 * trips the breaker at once; the turn goes on without compacting; the next
 * turn compacts again. */
static void breaker_trips_on_low_savings_and_resets_next_turn(void **state) {
    (void)state;
    char *u1 = repeat('u', 4000), *s1 = repeat('s', 3600);
    char *replies = fmt(
        "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":1200,\"output_tokens\":5}},"
        "{\"text\":\"%s\"},"
        "{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"echo\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":1200,\"output_tokens\":5}},"
        "{\"text\":\"done\",\"usage\":{\"input_tokens\":1200,\"output_tokens\":5}},"
        "{\"text\":\"S2\"},"
        "{\"text\":\"fine\"}",
        s1);
    free(s1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_attempts\":1}",
          "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":[{\"name\":"
          "\"echo\"}]}}");
    free(replies);
    dh_open(&d, "low-savings");
    run_text(&d, u1);
    free(u1);
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "step/start"), 3);
    assert_int_equal(count_in_turn(&d, "compaction/start", 1), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 1); /* it committed, and saved little */
    assert_int_equal(dh_count(&d, "compaction/breaker"), 1);
    const json_t *br = dh_event_data(&d, "compaction/breaker", 0);
    assert_string_equal(json_string_value(json_object_get(br, "reason")), "min_savings_ratio");
    assert_int_equal(json_integer_value(json_object_get(br, "compactions")), 1);
    json_int_t shadowed = json_integer_value(json_object_get(br, "shadowed_tokens"));
    json_int_t saved = json_integer_value(json_object_get(br, "saved_tokens"));
    assert_true(shadowed > 0 && saved >= 0 && saved * 10 < shadowed);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_int_equal(json_integer_value(json_object_get(end, "shadowed_tokens")), shadowed);
    assert_int_equal(json_integer_value(json_object_get(end, "saved_tokens")), saved);
    run_text(&d, "next turn");
    assert_int_equal(count_in_turn(&d, "compaction/start", 2), 1); /* reset */
    assert_int_equal(dh_count(&d, "compaction/breaker"), 1);
    dh_teardown(&d);
}

/* stderr into a file while `fn` runs; returns what was written (malloc'd). */
typedef struct grab {
    int saved;
    char path[4096];
} grab;

static void grab_start(grab *g, const dh *d) {
    snprintf(g->path, sizeof g->path, "%s/stderr-%d.txt", d->dir, d->count);
    fflush(stderr);
    g->saved = dup(2);
    int fd = open(g->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0 && g->saved >= 0);
    dup2(fd, 2);
    close(fd);
}

static char *grab_end(grab *g) {
    fflush(stderr);
    dup2(g->saved, 2);
    close(g->saved);
    char *out = wt_read_file(g->path, NULL);
    assert_non_null(out);
    return out;
}

/* A model whose window is unknown: the "compaction off" warning once per
 * agent, not once per step. */
static void an_unknown_window_warns_once_per_agent(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{}}]},"
             "{\"text\":\"ok\",\"usage\":{\"input_tokens\":5000,\"output_tokens\":5}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":[{\"name\":"
             "\"echo\"}]}},"
             "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":{}}]",
             "{\"model\":\"no-window\"}");
    dh_open(&d, "no-window");
    grab g;
    grab_start(&g, &d);
    setenv("WEIR_LOG_LEVEL", "warn", 1);
    for (int i = 0; i < 5; i++) /* 5 turns of 2 steps: 10 pre-step checks */
        run_text(&d, "go");
    char *out = grab_end(&g);
    assert_int_equal(dh_count(&d, "step/start"), 10);
    assert_int_equal(count_of(out, "no context window known for scripted/no-window"), 1);
    free(out);
    dh_close(&d);
    d.count++;
    dh_open(&d, "another"); /* another agent: warned once again */
    grab_start(&g, &d);
    run_text(&d, "go");
    run_text(&d, "go");
    out = grab_end(&g);
    unsetenv("WEIR_LOG_LEVEL");
    assert_int_equal(count_of(out, "no context window known for scripted/no-window"), 1);
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    free(out);
    dh_teardown(&d);
}

/* Overflow recovery retries only when the surface's replace generation
 * advanced: a summary that is rejected (it does not shrink) leaves the
 * original error; one that lands is retried. */
static void overflow_retries_only_when_the_replace_generation_advanced(void **state) {
    (void)state;
    char *a1 = repeat('a', 400), *u1 = repeat('u', 400), *big = repeat('s', 3000);
    char *replies = fmt("{\"text\":\"%s\"},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"too long\"}},"
                        "{\"text\":\"%s\"},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"too long\"}},"
                        "{\"text\":\"SUMMARY\"},"
                        "{\"text\":\"recovered\"}",
                        a1, big);
    free(a1);
    free(big);
    dh d;
    setup(&d, replies, "{}", NULL);
    free(replies);
    dh_open(&d, "overflow-generation");
    run_text(&d, u1);
    free(u1);
    assert_int_equal(weir__agent_replace_generation(d.agent), 0);
    run_text(&d, "second question");
    assert_int_equal(weir__agent_replace_generation(d.agent), 0); /* nothing landed */
    assert_string_equal(end_kind(&d, 1), "error");
    assert_string_equal(end_code(&d, 1), "CONTEXT_WINDOW_EXCEEDED");
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1); /* no retry */
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_non_null(strstr(json_string_value(json_object_get(
                               dh_event_data(&d, "compaction/end", 0), "error")),
                           "does not shrink"));
    run_text(&d, "third question");
    assert_int_equal(weir__agent_replace_generation(d.agent), 1);
    assert_string_equal(end_kind(&d, 2), "completed"); /* retried after the replace */
    assert_int_equal(dh_count(&d, "assistant/attempt"), 2);
    dh_teardown(&d);
}

static json_t *to_small_from_turn_2(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    json_t *c = weir_host_api()->next(call);
    if (!c || json_integer_value(json_object_get(args, "turn")) < 2)
        return c;
    json_t *out = json_deep_copy(c);
    json_decref(c);
    json_object_set_new(out, "provider", json_string("small"));
    return out;
}

/* Compaction scenario: capacity is re-resolved after a provider switch: the check after
 * the first request to the small-window provider uses its window. */
static void capacity_is_re_resolved_after_a_provider_switch(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"big\",\"plugin\":\"provider-scripted\",\"config\":{\"models\":{\"demo\":"
             "{\"context_window\":1000000}},\"replies\":[{\"text\":\"one\",\"usage\":"
             "{\"input_tokens\":900,\"output_tokens\":10}}]}},"
             "{\"id\":\"small\",\"plugin\":\"provider-scripted\",\"config\":{\"models\":{\"demo\":"
             "{\"context_window\":1000}},\"replies\":[{\"text\":\"two\",\"usage\":"
             "{\"input_tokens\":900,\"output_tokens\":10}},{\"text\":\"SMALL-SUMMARY\"},"
             "{\"text\":\"three\"}]}},"
             "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
             "{\"keep_recent_tokens\":1}}]",
             "{\"provider\":\"big\"}");
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    weir_agent_hook h = {"agent/request", to_small_from_turn_2, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "switch");
    char *u1 = repeat('u', 400);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second"); /* checked against big's window (910 < 800000): nothing */
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    run_text(&d, "third"); /* the route is small now: 910 >= 800 */
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    const json_t *start = dh_event_data(&d, "compaction/start", 0);
    assert_int_equal(json_integer_value(json_object_get(start, "context_window")), 1000);
    assert_int_equal(json_integer_value(json_object_get(start, "turn")), 3);
    assert_string_equal(json_string_value(json_object_get(dh_event_data(&d, "compaction/summary",
                                                                        0),
                                                          "provider")),
                        "small");
    assert_string_equal(end_kind(&d, 2), "completed");
    dh_teardown(&d);
}

static json_t *cancel_in_turn_2(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    if (json_integer_value(json_object_get(args, "turn")) == 2)
        weir_agent_cancel(weir_host_api()->call_agent(call), "user", true);
    return weir_host_api()->next(call);
}

/* Compaction scenario: cancellation reaches capacity resolution: a cancel that arrives in
 * the pre-step chain, before the plugin resolves the window, stops the
 * pressure check (no compaction, no summary call); the next turn compacts. */
static void cancellation_reaches_capacity_resolution(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":900,\"output_tokens\":10}},"
            "{\"text\":\"SUMMARY-C\"},{\"text\":\"after\"}",
            a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.order = WEIR_ORDER_FIRST;
    weir_agent_hook h = {"agent/pre-step", cancel_in_turn_2, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "cancel-capacity");
    char *u1 = repeat('u', 800);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second");
    assert_string_equal(end_kind(&d, 1), "aborted");
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    assert_null(recorded_request(&d, "compaction", 0)); /* the summarizer was never called */
    run_text(&d, "third");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_true(json_is_true(json_object_get(dh_event_data(&d, "compaction/end", 0), "ok")));
    assert_string_equal(end_kind(&d, 2), "completed");
    dh_teardown(&d);
}

/* An llm/stream listener: the summary call (purpose "compaction") runs to its
 * end, then the turn is cancelled (a SIGTERM while the summary came back). */
static json_t *cancel_after_the_summary(weir_call *call, const json_t *args, void *ud) {
    int *cancels = ud; /* how many summary calls to cancel */
    json_t *chunks = weir_host_api()->next(call);
    const char *purpose = json_string_value(json_object_get(args, "purpose"));
    if (purpose && !strcmp(purpose, "compaction") && *cancels > 0 && (*cancels)--)
        weir_agent_cancel(weir_host_api()->call_agent(call), "disposed", true);
    return chunks;
}

/* Compaction scenario: a cancel while the summary call runs replaces nothing: the call
 * ends cancelled, nothing is committed and no new copy of the surface is taken, the
 * compaction ends with an error naming the cancel and the turn is aborted; the next turn
 * compacts. */
static void a_cancel_during_the_summary_call_replaces_nothing(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":900,\"output_tokens\":10}},"
            "{\"text\":\"SUMMARY-LATE\"},{\"text\":\"SUMMARY-D\"},{\"text\":\"after\"}",
            a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    int cancels = 1;
    o.user_data = &cancels;
    weir_agent_hook h = {"llm/stream", cancel_after_the_summary, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "cancel-summary");
    char *u1 = repeat('u', 800);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second");
    assert_non_null(recorded_request(&d, "compaction", 0)); /* the summarizer was called */
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    assert_int_equal(weir__agent_replace_generation(d.agent), 0);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(end, "error")), "cancelled"));
    assert_int_equal(json_integer_value(json_object_get(end, "summaries")), 0);
    assert_string_equal(end_kind(&d, 1), "aborted");
    run_text(&d, "third");
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    assert_int_equal(weir__agent_replace_generation(d.agent), 1);
    assert_string_equal(end_kind(&d, 2), "completed");
    dh_teardown(&d);
}

/* agent/pre-compact: the turn is cancelled while the compaction is about to start. */
static json_t *cancel_in_pre_compact(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    weir_agent_cancel(weir_host_api()->call_agent(call), "disposed", true);
    return weir_host_api()->next(call);
}

/* Compaction scenario: a cancel that arrives after the pressure check (here in
 * agent/pre-compact, whose listener lets the compaction proceed) starts no
 * compaction: no compaction/start, no summary call, the turn is aborted. */
static void a_cancel_before_the_start_starts_no_compaction(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":900,\"output_tokens\":10}},"
            "{\"text\":\"SUMMARY-E\"},{\"text\":\"after\"}",
            a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1}", NULL);
    free(replies);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    weir_agent_hook h = {"agent/pre-compact", cancel_in_pre_compact, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "cancel-pre-compact");
    char *u1 = repeat('u', 800);
    run_text(&d, u1);
    free(u1);
    run_text(&d, "second");
    assert_string_equal(end_kind(&d, 1), "aborted");
    assert_int_equal(dh_count(&d, "compaction/start"), 0);
    assert_null(recorded_request(&d, "compaction", 0));
    dh_teardown(&d);
}

/* Compaction scenario: overflow recovery and transient retries keep their own budgets in
 * one step: RATE_LIMIT, overflow, RATE_LIMIT, success with max_retries 2 and
 * max_overflow_retries 1. */
static void overflow_and_transient_retry_budgets_stay_independent(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies = fmt("{\"text\":\"%s\"},"
                        "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}},"
                        "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"long\"}},"
                        "{\"text\":\"SUMMARY-B\"},"
                        "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}},"
                        "{\"text\":\"made it\"}",
                        a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"max_overflow_retries\":1}",
          "{\"id\":\"retry\",\"plugin\":\"retry\",\"config\":{\"max_retries\":2,"
          "\"initial_delay_ms\":1,\"max_delay_ms\":2}}");
    free(replies);
    dh_open(&d, "budgets");
    run_text(&d, "first question, long enough to be worth a summary");
    run_text(&d, "second question");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "assistant/attempt"), 3);
    assert_int_equal(dh_count(&d, "retry/wait"), 2);        /* both transient retries */
    assert_int_equal(dh_count(&d, "compaction/start"), 1); /* the overflow's own */
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    dh_teardown(&d);
}

/* Compaction scenario: an overflow whose summary fails still retries: the
 * compaction then prunes alone (the request does not fit as it is), which
 * advanced the replace generation.  (Before #32 item 4 the prune came first
 * and the summary after it.) */
static void a_failure_after_a_durable_prune_still_retries(void **state) {
    (void)state;
    char *big = repeat('x', 6000);
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":1000000}},\"replies\":["
                     "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}]},"
                     "{\"text\":\"read it\"},"
                     "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"long\"}},"
                     "{\"fail\":{\"code\":\"SERVER\",\"message\":\"summarizer down\"}},"
                     "{\"text\":\"recovered\",\"expect\":{\"message_contains\":"
                     "\"characters pruned\"}}]}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                     "{\"name\":\"big\",\"reply\":\"%s\"}]}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":{\"prune\":"
                     "{\"max_result_chars\":1000,\"head_chars\":100,\"tail_chars\":50}}}]",
                     big);
    free(big);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, "prune-then-fail");
    run_text(&d, "run the tool");
    assert_int_equal(dh_count(&d, "compaction/start"), 0); /* a big window: no pressure */
    run_text(&d, "and now?");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/prune"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(end, "error")), "summarizer down"));
    /* the overflow's summary replays only the range (the whole request did not fit) */
    assert_non_null(recorded_request(&d, "compaction", 0));
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    dh_teardown(&d);
}

/* An llm/stream listener that changes the surface while a summary is made. */
static json_t *touch_surface(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    const char *purpose = json_string_value(json_object_get(args, "purpose"));
    if (purpose && !strcmp(purpose, "compaction")) {
        weir_agent *a = weir_host_api()->call_agent(call);
        json_t *surface = weir__agent_surface(a);
        size_t i;
        const json_t *node;
        json_array_foreach(surface, i, node) {
            if (strcmp(json_string_value(json_object_get(node, "type")), "user/message") != 0)
                continue;
            size_t seq = (size_t)json_integer_value(json_object_get(node, "seq"));
            json_t *ev = weir__agent_event(a, seq);
            weir_error err;
            weir_error_clear(&err);
            assert_int_equal(weir__agent_surface_replace(a, "user/message",
                                                         json_object_get(ev, "data"), seq, seq,
                                                         NULL, NULL, &err),
                             WEIR_OK);
            json_decref(ev);
            break;
        }
        json_decref(surface);
    }
    return weir_host_api()->next(call);
}

/* Compaction scenario: a meter change before summarization is rejected: the surface
 * changed while the summary was made, so nothing is replaced. */
static void a_meter_change_before_summarization_is_rejected(void **state) {
    (void)state;
    char *a1 = repeat('a', 400);
    char *replies =
        fmt("{\"text\":\"%s\",\"usage\":{\"input_tokens\":900,\"output_tokens\":10}},"
            "{\"text\":\"STALE\"},{\"text\":\"answer\"}",
            a1);
    free(a1);
    dh d;
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_attempts\":1}", NULL);
    free(replies);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    weir_agent_hook h = {"llm/stream", touch_surface, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "meter-change");
    run_text(&d, "first");
    json_t *before = weir_agent_messages(d.agent);
    run_text(&d, "second");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(end, "error")),
                           "the surface changed while the summary was made"));
    assert_int_equal(weir__agent_replace_generation(d.agent), 1); /* the listener's own */
    json_t *after = weir_agent_messages(d.agent);
    for (size_t i = 0; i < json_array_size(before); i++) /* no checkpoint */
        assert_true(json_equal(json_array_get(before, i), json_array_get(after, i)));
    json_decref(before);
    json_decref(after);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* The agent context API (core/api/agent_context.c)                             */
/* ------------------------------------------------------------------------ */

/* One completed turn with a tool call: system? no; U, A(call), R, A. */
static void context_setup_hooks(dh *d, const char *more_replies, bool loop,
                                const weir_agent_hook *hooks, size_t nhooks) {
    char *replies =
        fmt("{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{\"v\":1}}]},"
            "{\"text\":\"done\",\"usage\":{\"input_tokens\":7,\"output_tokens\":2}}%s%s",
            more_replies ? "," : "", more_replies ? more_replies : "");
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":1000,\"max_output\":100}},"
                     "\"loop\":%s,\"replies\":[%s]}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                     "{\"name\":\"echo\"}]}}]",
                     loop ? "true" : "false", replies);
    free(replies);
    dh_setup(d, rows, NULL);
    free(rows);
    d->hooks = hooks;
    d->nhooks = nhooks;
    dh_open(d, NULL);
    run_text(d, "call the tool");
}

static void context_setup(dh *d, const char *more_replies, bool loop) {
    context_setup_hooks(d, more_replies, loop, NULL, 0);
}

static void agent_context_reads_the_surface_and_events(void **state) {
    (void)state;
    dh d;
    context_setup(&d, NULL, false);
    json_t *surface = weir__agent_surface(d.agent);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(surface), 4);
    const char *types[] = {"user/message", "assistant/message", "tool/result", "assistant/message"};
    for (size_t i = 0; i < 4; i++) {
        const json_t *node = json_array_get(surface, i);
        assert_string_equal(json_string_value(json_object_get(node, "type")), types[i]);
        assert_true(json_equal(json_object_get(node, "message"), json_array_get(msgs, i)));
    }
    json_int_t last_seq = json_integer_value(json_object_get(json_array_get(surface, 3), "seq"));
    json_t *last = weir__agent_last_event(d.agent, "assistant/message");
    assert_int_equal(json_integer_value(json_object_get(last, "seq")), last_seq);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(last, "data"), "usage"), "input_tokens")),
                     7);
    json_t *same = weir__agent_event(d.agent, (size_t)last_seq);
    assert_true(json_equal(same, last));
    /* peek: the log's own envelope, the same object every time, no copy */
    const json_t *peeked = weir__agent_event_peek(d.agent, (size_t)last_seq);
    assert_non_null(peeked);
    assert_true(json_equal(peeked, same));
    assert_ptr_not_equal(peeked, same);
    assert_ptr_equal(weir__agent_event_peek(d.agent, (size_t)last_seq), peeked);
    assert_null(weir__agent_event_peek(d.agent, 100000));
    assert_null(weir__agent_event_peek(NULL, 0));
    json_decref(same);
    json_decref(last);
    assert_null(weir__agent_event(d.agent, 100000));
    assert_null(weir__agent_last_event(d.agent, "compaction/start"));
    assert_null(weir__agent_surface(NULL));
    assert_int_equal(weir__agent_replace_generation(d.agent), 0);

    json_t *info = weir__agent_model_info(d.agent, "scripted", "demo");
    json_t *want = parse("{\"context_window\":1000,\"max_output\":100}");
    assert_true(json_equal(info, want));
    json_decref(info);
    json_decref(want);
    assert_null(weir__agent_model_info(d.agent, "scripted", "unknown-model"));
    assert_null(weir__agent_model_info(d.agent, "nobody", "demo"));
    json_decref(surface);
    json_decref(msgs);
    dh_teardown(&d);
}

static void agent_context_replace_goes_through_the_log_validation(void **state) {
    (void)state;
    dh d;
    context_setup(&d, NULL, false);
    json_t *surface = weir__agent_surface(d.agent);
    size_t u = (size_t)json_integer_value(json_object_get(json_array_get(surface, 0), "seq"));
    size_t r = (size_t)json_integer_value(json_object_get(json_array_get(surface, 2), "seq"));
    json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}}", "turn", 1, "step", 2, "message",
                             "role", "user", "content", "type", "text", "text", "S");
    weir_error err;
    weir_error_clear(&err);
    size_t before = dh_count(&d, "user/message");
    assert_int_equal(
        weir__agent_surface_replace(d.agent, "assistant/message", data, u, u, NULL, NULL, &err),
        WEIR_E_INVAL);
    assert_string_equal(err.text, "agent_surface_replace: type 'assistant/message' cannot replace "
                                  "surface nodes (only user/message or tool/result)");
    /* start after end: rejected by the log, nothing changes */
    assert_int_equal(
        weir__agent_surface_replace(d.agent, "user/message", data, r, u, NULL, NULL, &err),
        WEIR_E_LOG_REJECTED);
    /* a tool/result rewrite that changes more than the content */
    json_t *rev = weir__agent_event(d.agent, r);
    json_t *rdata = json_deep_copy(json_object_get(rev, "data"));
    json_object_set_new(rdata, "step", json_integer(9));
    assert_int_equal(
        weir__agent_surface_replace(d.agent, "tool/result", rdata, r, r, NULL, NULL, &err),
        WEIR_E_LOG_REJECTED);
    assert_non_null(strstr(err.text, "a tool/result rewrite may change only message.content"));
    assert_int_equal(weir__agent_replace_generation(d.agent), 0);
    json_t *again = weir__agent_surface(d.agent);
    assert_true(json_equal(again, surface));
    json_decref(again);
    /* a valid summary over U..R: the default source_seqs are the shadowed nodes */
    size_t seq = 0;
    assert_int_equal(
        weir__agent_surface_replace(d.agent, "user/message", data, u, r, NULL, &seq, &err),
        WEIR_OK);
    assert_int_equal(weir__agent_replace_generation(d.agent), 1);
    json_t *ev = weir__agent_event(d.agent, seq);
    json_t *src = json_pack("[I, O, I]", (json_int_t)u,
                            json_object_get(json_array_get(surface, 1), "seq"), (json_int_t)r);
    assert_true(json_equal(json_object_get(ev, "source_seqs"), src));
    json_decref(src);
    json_decref(ev);
    assert_int_equal(dh_count(&d, "user/message"), before + 1);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 2);
    json_decref(msgs);
    json_decref(rev);
    json_decref(rdata);
    json_decref(data);
    json_decref(surface);
    dh_teardown(&d);
}

static void agent_complete_collects_text_and_reports_failures(void **state) {
    (void)state;
    dh d;
    context_setup(&d,
                  "{\"reasoning\":\"hmm\",\"text\":\"the summary\",\"chunks\":3,"
                  "\"usage\":{\"input_tokens\":5,\"output_tokens\":3}},"
                  "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}},"
                  "{\"text\":\"never read\"}",
                  false);
    json_t *req = parse("{\"provider\":\"scripted\",\"model\":\"demo\",\"max_tokens\":50,"
                        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                        "\"text\":\"summarize\"}]}]}");
    size_t events = json_array_size(d.events);
    json_t *result = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__agent_complete(d.agent, req, NULL, &result, &err), WEIR_OK);
    json_t *want = parse("{\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                         "\"text\":\"the summary\"}]},\"finish\":\"stop\","
                         "\"usage\":{\"input_tokens\":5,\"output_tokens\":3}}");
    assert_true(json_equal(result, want));
    json_decref(want);
    json_decref(result);
    assert_int_equal(weir__agent_complete(d.agent, req, NULL, &result, &err), WEIR_E_PROVIDER);
    assert_null(result);
    assert_string_equal(err.text, "RATE_LIMIT: slow down");
    assert_string_equal(err.plugin, "scripted");

    json_t *bad = parse("{\"provider\":\"nobody\",\"model\":\"m\",\"messages\":[]}");
    assert_int_equal(weir__agent_complete(d.agent, bad, NULL, &result, &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text, "agent_complete: unknown provider 'nobody': no plugin row with "
                                  "that id registered a provider");
    json_decref(bad);
    bad = parse("{\"provider\":\"scripted\",\"model\":\"m\"}");
    assert_int_equal(weir__agent_complete(d.agent, bad, NULL, &result, &err), WEIR_E_INVAL);
    json_decref(bad);

    weir_signal sig;
    assert_int_equal(weir__signal_init(&sig), WEIR_OK);
    weir__signal_cancel(&sig, "user");
    assert_int_equal(weir__agent_complete(d.agent, req, &sig, &result, &err), WEIR_E_CANCELLED);
    weir__signal_destroy(&sig);
    /* nothing was logged and no live frame was sent */
    assert_int_equal(json_array_size(d.events), events);
    json_decref(req);
    dh_teardown(&d);
}

/* An llm/stream listener for agent_complete_stream: records the purpose it
 * saw, fails on purpose "fail", answers by itself on purpose "replay". */
static json_t *probe_stream(weir_call *call, const json_t *args, void *ud) {
    char *seen = ud;
    const char *purpose = json_string_value(json_object_get(args, "purpose"));
    snprintf(seen, 64, "%s/%lld", purpose ? purpose : "(none)",
             (long long)json_integer_value(json_object_get(args, "turn")));
    if (purpose && !strcmp(purpose, "fail")) {
        weir_host_api()->call_fail(call, "probe refused");
        return NULL;
    }
    if (purpose && !strcmp(purpose, "replay")) /* every kind of block, two text blocks */
        return parse("[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\"},"
                     "{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"thinking\"},"
                     "{\"type\":\"continuation\",\"index\":0,\"continuation\":{\"s\":\"x\"}},"
                     "{\"type\":\"text-delta\",\"index\":1,\"text\":\"REPL\"},"
                     "{\"type\":\"text-delta\",\"index\":1,\"text\":\"AYED\"},"
                     "{\"type\":\"continuation\",\"index\":1,\"continuation\":{\"s\":\"y\"}},"
                     "{\"type\":\"tool-call-delta\",\"index\":2,\"id\":\"c1\","
                     "\"name\":\"echo\",\"arguments_delta\":\"{}\"},"
                     "{\"type\":\"text-delta\",\"index\":3,\"text\":\" twice\"},"
                     "{\"type\":\"usage\",\"usage\":{\"input_tokens\":2}},"
                     "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]");
    return weir_host_api()->next(call);
}

/* What a plugin sees of a long turn: at step 2 it peeks step 1's step/start
 * and takes a reference to step 1's assistant message. */
typedef struct {
    size_t start_seq, asst_seq;
    const json_t *peeked; /* step 1's step/start, peeked at step 2 */
    json_t *ref;          /* step 1's assistant message, held from step 2 */
    json_t *copy;         /* a deep copy of it */
    bool peek_same;       /* at step 4 the peek gives the same object */
    bool ref_released;    /* at step 4 a new reference is another object... */
    bool ref_equal;       /* ... with the same JSON, and the held one is intact */
    int steps;
} long_turn_probe;

static json_t *probe_long_turn(weir_call *call, const json_t *args, void *ud) {
    long_turn_probe *p = ud;
    weir_agent *a = weir_host_api()->call_agent(call);
    json_int_t step = json_integer_value(json_object_get(args, "step"));
    p->steps++;
    if (step == 2) {
        json_t *ev;
        for (size_t seq = 0; (ev = weir__agent_event_ref(a, seq)) != NULL; seq++) {
            const json_t *data = json_object_get(ev, "data");
            const char *type = json_string_value(json_object_get(ev, "type"));
            if (json_integer_value(json_object_get(data, "step")) == 1 && type &&
                !strcmp(type, "step/start"))
                p->start_seq = seq;
            else if (json_integer_value(json_object_get(data, "step")) == 1 && type &&
                     !strcmp(type, "assistant/message"))
                p->asst_seq = seq;
            json_decref(ev);
        }
        p->peeked = weir__agent_event_peek(a, p->start_seq);
        /* held by the test only so that a release would show (a new
         * object cannot take a live one's address) */
        json_incref((json_t *)(uintptr_t)p->peeked);
        p->ref = weir__agent_event_ref(a, p->asst_seq);
        p->copy = json_deep_copy(p->ref);
    } else if (step == 4 && p->ref) {
        p->peek_same = weir__agent_event_peek(a, p->start_seq) == p->peeked;
        json_t *now = weir__agent_event_ref(a, p->asst_seq);
        p->ref_released = now && now != p->ref;
        p->ref_equal = json_equal(now, p->copy) && json_equal(p->ref, p->copy);
        json_decref(now);
    }
    return weir_host_api()->next(call);
}

/* A long turn holds the lines of its older steps, not their JSON: each
 * step's end releases the envelopes of the step before (agent_event_ref
 * then reads them back: the same JSON, another object, while a reference
 * held keeps its own), except what agent_event_peek lent, which stays the
 * same object until the turn ends (ABI 1.5's promise). */
static void a_long_turn_releases_older_steps_but_keeps_what_was_peeked(void **state) {
    (void)state;
    long_turn_probe p = {0};
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &p;
    weir_agent_hook h = {"agent/pre-step", probe_long_turn, &o};
    dh d;
    /* context_setup_hooks's turn: echo, then "done"; here three more echoes first */
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":100000,\"max_output\":100}},"
                     "\"replies\":[%s%s%s%s{\"text\":\"done\"}]}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                     "{\"name\":\"echo\"}]}}]",
                     "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{\"v\":1}}]},",
                     "{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"echo\",\"arguments\":{\"v\":2}}]},",
                     "{\"tool_calls\":[{\"id\":\"c3\",\"name\":\"echo\",\"arguments\":{\"v\":3}}]},",
                     "{\"tool_calls\":[{\"id\":\"c4\",\"name\":\"echo\",\"arguments\":{\"v\":4}}]},");
    dh_setup(&d, rows, NULL);
    free(rows);
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, NULL);
    run_text(&d, "call the tool four times");
    assert_int_equal(p.steps, 5);
    assert_non_null(p.ref);
    assert_non_null(p.peeked);
    assert_true(p.start_seq > 0 && p.asst_seq > p.start_seq);
    assert_true(p.peek_same);
    assert_true(p.ref_released);
    assert_true(p.ref_equal);
    json_decref(p.ref);
    json_decref(p.copy);
    json_decref((json_t *)(uintptr_t)p.peeked);
    dh_teardown(&d);
}

/* agent_complete_stream runs the agent's llm/stream chain around the
 * provider (listeners see the purpose), drops tool calls, and reports a
 * failing listener as the chain's error. */
static void agent_complete_stream_runs_the_llm_stream_chain(void **state) {
    (void)state;
    char seen[64] = "";
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = seen;
    weir_agent_hook h = {"llm/stream", probe_stream, &o};
    dh d;
    context_setup_hooks(&d,
                        "{\"text\":\"streamed\",\"tool_calls\":[{\"id\":\"t9\",\"name\":"
                        "\"echo\",\"arguments\":{}}],\"usage\":{\"input_tokens\":5,"
                        "\"output_tokens\":1}}",
                        false, &h, 1);
    json_t *req = parse("{\"provider\":\"scripted\",\"model\":\"demo\",\"tool_choice\":\"none\","
                        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                        "\"text\":\"probe\"}]}]}");
    json_t *ctx = parse("{\"turn\":7,\"step\":1,\"purpose\":\"probe\"}");
    json_t *result = NULL;
    weir_error err;
    weir_error_clear(&err);
    int before = dh_count(&d, "drvtest/request");
    assert_int_equal(weir__agent_complete_stream(d.agent, req, ctx, NULL, &result, &err), WEIR_OK);
    assert_string_equal(seen, "probe/7");
    json_t *want = parse("{\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":"
                         "\"text\",\"text\":\"streamed\"}]},\"finish\":\"tool-calls\","
                         "\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}");
    assert_true(json_equal(result, want)); /* the tool call is dropped */
    json_decref(want);
    json_decref(result);
    assert_int_equal(dh_count(&d, "drvtest/request"), before + 1); /* the recorder saw it */
    assert_int_equal(dh_count(&d, "tool/call"), 1);

    json_object_set_new(ctx, "purpose", json_string("replay"));
    assert_int_equal(weir__agent_complete_stream(d.agent, req, ctx, NULL, &result, &err), WEIR_OK);
    /* the text blocks alone, in stream order, each its text only */
    want = parse("{\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                 "\"text\":\"REPLAYED\"},{\"type\":\"text\",\"text\":\" twice\"}]},"
                 "\"finish\":\"stop\",\"usage\":{\"input_tokens\":2}}");
    assert_true(json_equal(result, want));
    json_decref(want);
    json_decref(result);

    json_object_set_new(ctx, "purpose", json_string("fail"));
    assert_int_equal(weir__agent_complete_stream(d.agent, req, ctx, NULL, &result, &err),
                     WEIR_E_HOOK_FAILED);
    assert_null(result);
    assert_string_equal(err.hook, "llm/stream");
    assert_non_null(strstr(err.text, "probe refused"));
    /* no context: the last turn, step 0, purpose "maintenance" */
    assert_int_equal(weir__agent_complete_stream(d.agent, req, NULL, NULL, &result, &err),
                     WEIR_E_PROVIDER); /* the script is spent */
    assert_string_equal(seen, "maintenance/1");
    json_decref(ctx);
    json_decref(req);
    dh_teardown(&d);
}

static void agent_context_survives_allocation_failures(void **state) {
    (void)state;
    dh d;
    context_setup(&d, "{\"text\":\"the summary\"}", true);
    /* a second handle on the same session without the harness's recorder,
     * whose own allocations must not fail */
    char *id = strdup(weir_agent_id(d.agent));
    char *path = strdup(dh_log(&d));
    dh_close(&d);
    weir_agent *agent = NULL;
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = id;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_open(d.host, &o, &agent, &err), WEIR_OK);
    json_t *req = parse("{\"provider\":\"scripted\",\"model\":\"demo\",\"messages\":[]}");
    json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}}", "turn", 1, "step", 2, "message",
                             "role", "user", "content", "type", "text", "text", "S");
    json_t *surface = weir__agent_surface(agent);
    size_t u = (size_t)json_integer_value(json_object_get(json_array_get(surface, 0), "seq"));
    size_t r = (size_t)json_integer_value(json_object_get(json_array_get(surface, 2), "seq"));
    json_decref(surface);
    bool replaced = false, completed = false;
    /* the scans read back what the open released (about 600 allocations
     * before the replace's turn comes) */
    for (long n = 1; n < 2000 && !(replaced && completed); n++) {
        weir_error_clear(&err);
        json_t *result = NULL;
        weir__alloc_fail_after(n);
        json_t *s = weir__agent_surface(agent);
        json_t *e = weir__agent_last_event(agent, "tool/result");
        int crc = completed ? WEIR_OK : weir__agent_complete(agent, req, NULL, &result, &err);
        int rrc = replaced ? WEIR_OK
                           : weir__agent_surface_replace(agent, "user/message", data, u, r, NULL,
                                                         NULL, &err);
        weir__alloc_fail_after(-1);
        assert_true(crc == WEIR_OK || crc == WEIR_E_NOMEM || crc == WEIR_E_PROVIDER);
        assert_true(rrc == WEIR_OK || rrc == WEIR_E_NOMEM || rrc == WEIR_E_IO);
        if (!completed && crc == WEIR_OK) {
            completed = true;
            assert_non_null(result);
        }
        if (!replaced && rrc == WEIR_OK)
            replaced = true;
        assert_int_equal(weir__agent_replace_generation(agent), replaced ? 1 : 0);
        json_decref(result);
        json_decref(s);
        json_decref(e);
    }
    assert_true(replaced);
    assert_true(completed);
    json_t *msgs = weir_agent_messages(agent);
    assert_int_equal(json_array_size(msgs), 2);
    weir_agent_close(agent);
    dh_check_log(path, msgs, false);
    json_decref(msgs);
    json_decref(req);
    json_decref(data);
    free(id);
    free(path);
    dh_teardown(&d);
}

/* One allocation fails at a time (memory is there again afterwards) during
 * a turn that compacts under pressure (the summary request, its replace):
 * the agent then runs another turn, and every turn of its log is closed and
 * the log passes the check (so the session opens again). */
static void pressure_compaction_survives_one_failed_allocation(void **state) {
    (void)state;
    char *big = repeat('a', 400);
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":1000,\"max_output\":100}},"
                     "\"loop\":true,\"replies\":[{\"text\":\"%s\",\"usage\":{\"input_tokens\":850,"
                     "\"output_tokens\":10}}]}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
                     "{\"keep_recent_tokens\":1}}]",
                     big);
    free(big);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    long n, used = 0;
    int compacted = 0;
    for (n = 1; n < 200000; n++) {
        char id[32];
        snprintf(id, sizeof id, "once%ld", n);
        weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
        o.session_id = id;
        weir_agent *a = NULL;
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_OK);
        assert_int_equal(weir_agent_send_text(a, "first", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
        assert_int_equal(weir_agent_run_until_idle(a, &err), WEIR_OK);
        weir__alloc_fail_only(n);
        if (weir_agent_send_text(a, "second", WEIR_SEND_FOLLOWUP, NULL) == WEIR_OK)
            (void)weir_agent_run_until_idle(a, NULL);
        used = weir__alloc_fail_after(-1);
        weir_error_clear(&err);
        if (weir_agent_send_text(a, "third", WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
            weir_agent_run_until_idle(a, &err) != WEIR_OK)
            fail_msg("n=%ld: the agent does not run after the failure: %s", n, err.text);
        char *path = strdup(weir_agent_log_path(a));
        weir_agent_close(a);
        dh_check_log(path, NULL, false); /* so the next open takes it */
        char *text = wt_read_file(path, NULL);
        compacted += strstr(text, "\"compaction/end\"") != NULL;
        free(text);
        free(path);
        if (used < n)
            break;
    }
    assert_true(used < n);
    assert_true(compacted > 0);
    dh_teardown(&d);
}


/* ------------------------------------------------------------------------ */
/* Strategies, the cost rule and recall (issue #35)                          */
/* ------------------------------------------------------------------------ */

static void config_strategies_and_recall(void **state) {
    (void)state;
    cp_config cfg;
    config_ok(NULL, &cfg);
    assert_false(cfg.strategies_set); /* the provider's default */
    assert_true(cfg.recall_enabled);
    assert_int_equal(cfg.recall_max_chars, 8000);
    assert_int_equal(cfg.horizon_steps, 10);
    cp_strategy def[CP_MAX_STRATEGIES];
    assert_int_equal(cp_default_strategies(NULL, def), 2); /* no server compaction */
    assert_string_equal(cp_strategy_name(def[0]), "summary");
    assert_string_equal(cp_strategy_name(def[1]), "prune");
    /* OpenAI's costs more than the summary (bench_strategies): not a default */
    assert_int_equal(cp_default_strategies("openai-responses-compact", def), 2);
    assert_string_equal(cp_strategy_name(def[0]), "summary");
    assert_int_equal(cp_default_strategies("anthropic-compact-20260112", def), 3);
    assert_string_equal(cp_strategy_name(def[0]), "server");
    assert_string_equal(cp_strategy_name(def[1]), "summary");
    assert_string_equal(cp_strategy_name(def[2]), "prune");
    cp_config_clear(&cfg);

    config_ok("{\"strategies\":[\"prune\",\"summary\"],\"recall\":{\"enabled\":false,"
              "\"max_chars\":100},\"prune\":{\"horizon_steps\":3,\"cache_read_price\":0.5,"
              "\"cache_write_price\":1}}",
              &cfg);
    assert_true(cfg.strategies_set);
    assert_int_equal(cfg.nstrategies, 2);
    assert_int_equal(cfg.strategies[0], CP_STRATEGY_PRUNE);
    assert_int_equal(cfg.strategies[1], CP_STRATEGY_SUMMARY);
    assert_false(cfg.recall_enabled);
    assert_int_equal(cfg.recall_max_chars, 100);
    cp_cache_prices p = cp_prices_for(&cfg, "claude-sonnet-4-5"); /* the config wins */
    assert_true(p.read == 0.5 && p.write == 1.0);
    cp_config_clear(&cfg);

    assert_string_equal(config_error("{\"strategies\":[\"summary\",\"shrink\"]}"),
                        "config.strategies[1]: unknown strategy \"shrink\"; known strategies: "
                        "prune, server, summary");
    /* "server" is known: whether the route offers it is told at the first
     * compaction (test_compaction_server) */
    config_ok("{\"strategies\":[\"server\",\"summary\"]}", &cfg);
    assert_int_equal(cfg.strategies[0], CP_STRATEGY_SERVER);
    cp_config_clear(&cfg);
    assert_string_equal(config_error("{\"strategies\":[]}"),
                        "config.strategies: expected a non-empty array of strategy names (known: "
                        "prune, server, summary)");
    assert_string_equal(config_error("{\"strategies\":[\"prune\",\"prune\"]}"),
                        "config.strategies[1]: \"prune\" is listed twice");
    assert_string_equal(config_error("{\"recall\":{\"max_chars\":10}}"),
                        "config.recall.max_chars: expected an integer of at least 100");
    assert_string_equal(config_error("{\"prune\":{\"cache_read_price\":0.1}}"),
                        "config.prune: cache_read_price and cache_write_price must be set "
                        "together");

    /* through the host: the deployment fails, naming the plugin and the field */
    static const char *const bad[][2] = {
        {"[\"summary\",\"summary\"]", "config.strategies[1]: \"summary\" is listed twice"},
        {"[\"summary\",\"shrink\"]", "config.strategies[1]: unknown strategy \"shrink\"; known "
                                     "strategies: prune, server, summary"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *config = json_pack(
            "{s:{s:s, s:s}, s:[s, s], s:[{s:s, s:s, s:{s:[]}}, {s:s, s:s, s:{s:o}}]}", "agent",
            "provider", "scripted", "model", "demo", "plugin_path",
            getenv("WEIR_TEST_PLUGIN_DIR"), getenv("WEIR_TEST_DRIVER_PLUGIN_DIR"), "plugins",
            "id", "scripted", "plugin", "provider-scripted", "config", "replies", "id", "compact",
            "plugin", "compaction-basic", "config", "strategies", parse(bad[i][0]));
        assert_non_null(config);
        weir_host *host = NULL;
        weir_error err;
        weir_error_clear(&err);
        int hrc = weir_host_create(config, &host, &err);
        if (hrc != WEIR_E_PLUGIN_INIT) /* the loader's status for a config init refuses */
            fail_msg("host: %s: %s", weir_status_name(hrc), err.text);
        assert_null(host);
        assert_non_null(strstr(err.text, "plugin 'compaction-basic'"));
        assert_non_null(strstr(err.text, bad[i][1]));
        json_decref(config);
    }
}

/* The worked example of docs/compaction.md, "The cost rule". */
static void the_cost_rule_weighs_savings_against_the_invalidated_cache(void **state) {
    (void)state;
    cp_cache_prices anthropic = cp_prices_for(NULL, "claude-sonnet-4-5");
    assert_true(anthropic.read == 0.1 && anthropic.write == 1.25);
    cp_cache_prices openai = cp_prices_for(NULL, "gpt-5.1");
    assert_true(openai.read == 0.1 && openai.write == 1.0);
    cp_cache_prices old = cp_prices_for(NULL, "gpt-4o");
    assert_true(old.read == 0.5 && old.write == 1.0);
    double gain = 0, cost = 0;
    /* 1,400 tokens saved over 10 steps against 20,000 tokens after it: keep */
    assert_false(cp_prune_worth_it(1400, 20000, 10, anthropic, &gain, &cost));
    assert_true(gain > 1399.9 && gain < 1400.1);  /* 1400 x 10 x 0.1 */
    assert_true(cost > 22999.9 && cost < 23000.1); /* 20000 x (1.25 - 0.1) */
    /* the same result near the end, 1,000 tokens after it: prune */
    assert_true(cp_prune_worth_it(1400, 1000, 10, anthropic, &gain, &cost));
    assert_true(cost > 1149.9 && cost < 1150.1);
    /* nothing after it is cached (a checkpoint rewrote it): always worth it */
    assert_true(cp_prune_worth_it(1, 0, 1, anthropic, NULL, NULL));
    assert_false(cp_prune_worth_it(0, 0, 10, anthropic, NULL, NULL));
}

static void recall_cuts_at_its_bound_and_reads_on(void **state) {
    (void)state;
    char *text = fmt("%s\xC3\xA9%s", "abc", "defgh"); /* 9 code points, a 2-byte one in them */
    char *all = cp_recall_cut(text, 0, 100);
    assert_string_equal(all, text);
    free(all);
    char *head = cp_recall_cut(text, 0, 4);
    assert_string_equal(head, "abc\xC3\xA9\n[\xE2\x80\xA6 recall cut here: 5 of 9 characters "
                              "left; ask again with offset 4 for more]");
    free(head);
    char *rest = cp_recall_cut(text, 4, 100);
    assert_string_equal(rest, "defgh");
    free(rest);
    char *past = cp_recall_cut(text, 9, 100);
    assert_string_equal(past, "[recall: nothing left: the text has 9 characters]");
    free(past);
    free(text);
    /* the index lists tool results and user messages, not what `skip` marks */
    json_t *surface = parse("[" SYS "," USER(1, "u") "," CALL(2, "c1") "," RESULT(3, "c1", "r") ","
                            USER(4, "pinned") "," ASSIST(5, "a") "]");
    bool skip[] = {false, false, false, true, false};
    char *index = cp_recall_index(surface, 1, 5, skip);
    assert_string_equal(index, "## Recall ids\nThe recall tool returns the original text of these "
                               "messages and tool results, which this checkpoint replaced:\n"
                               "- seq:1: user message\n- seq:3: tool result of call c1\n");
    free(index);
    json_decref(surface);
}

/* The text of the first tool_result block of a tool/result envelope. */
static const char *result_text(const json_t *ev) {
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"), 0);
    return json_string_value(
        json_object_get(json_array_get(json_object_get(block, "content"), 0), "text"));
}

/* The tool/result envelope of call `id` (the original, not a replace). */
static const json_t *result_of(const dh *d, const char *id) {
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const json_t *block = json_array_get(
            json_object_get(json_object_get(json_object_get(e, "data"), "message"), "content"),
            0);
        const char *call = json_string_value(json_object_get(block, "call_id"));
        bool original = !json_is_object(json_object_get(e, "surface_op")); /* not a replace */
        if (type && !strcmp(type, "tool/result") && original && call &&
            !strcmp(call, id))
            return e;
    }
    return NULL;
}


/* Issue #35: the chain decides.  ["summary"] alone summarizes and never
 * prunes, even an oversized result of the kept tail (the scenario of
 * pruning_comes_with_the_summary, where the default chain prunes it): the
 * pressure stays, and compaction/end says what ran. */
static void a_summary_only_chain_never_prunes(void **state) {
    (void)state;
    char *big = repeat('x', 6000), *u1 = repeat('u', 1200);
    char *tools = fmt("{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                      "{\"name\":\"big\",\"reply\":\"HEAD%sTAIL\"}]}}",
                      big);
    free(big);
    dh d;
    setup(&d,
          "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}],"
          "\"usage\":{\"input_tokens\":300,\"output_tokens\":10}},"
          "{\"text\":\"SUMMARY-S\"},"
          "{\"text\":\"ok\",\"expect\":{\"message_contains\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxTAIL\"}}",
          "{\"strategies\":[\"summary\"],\"max_attempts\":1,\"prune\":{\"max_result_chars\":1000,"
          "\"head_chars\":100,\"tail_chars\":50}}",
          tools);
    free(tools);
    dh_open(&d, "summary-only");
    run_text(&d, u1);
    free(u1);
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "compaction/summary"), 1);
    assert_int_equal(dh_count(&d, "compaction/prune"), 0);
    assert_int_equal(dh_count(&d, "compaction/prune-decision"), 0);
    /* the oversized result in the kept tail keeps the pressure up: without
     * prune in the chain nothing else can take it */
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(end, "error")),
                           "still above the threshold"));
    assert_string_equal(json_string_value(json_object_get(end, "strategy")), "summary");
    json_t *chain = json_pack("[s]", "summary");
    assert_true(json_equal(json_object_get(end, "strategies"), chain));
    json_decref(chain);
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 0);
    dh_teardown(&d);
}

/* Issue #35: with prune first in the chain, the cost rule prunes the
 * oversized result at the end of the history (nothing after it is cached)
 * and keeps the one in the middle (pruning it would make the provider write
 * the 3,750-token message after it again); each decision is logged with its
 * numbers, and since the prune relieved the pressure no summary is asked
 * for (the script has no reply for one). */
static void prune_first_keeps_what_the_cache_makes_dear(void **state) {
    (void)state;
    char *big = repeat('x', 6000), *u2 = repeat('u', 15000);
    char *tools = fmt("{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
                      "{\"name\":\"big\",\"reply\":\"%s\"}]}}",
                      big);
    free(big);
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":10000}},\"replies\":["
                     "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"big\",\"arguments\":{}}],"
                     "\"usage\":{\"input_tokens\":300,\"output_tokens\":10}},"
                     "{\"text\":\"read it\",\"usage\":{\"input_tokens\":1900,\"output_tokens\":10}},"
                     "{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"big\",\"arguments\":{}}],"
                     "\"usage\":{\"input_tokens\":7000,\"output_tokens\":10}},"
                     "{\"text\":\"done\",\"expect\":{\"message_contains\":\"characters pruned\"}}"
                     "]}},%s,"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":{"
                     "\"strategies\":[\"prune\",\"summary\"]}}]",
                     tools);
    free(tools);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, "prune-first");
    run_text(&d, "run it");
    run_text(&d, u2);
    free(u2);
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    assert_int_equal(dh_count(&d, "compaction/prune-decision"), 2);
    const json_t *c1 = result_of(&d, "c1"), *c2 = result_of(&d, "c2");
    const json_t *keep = dh_event_data(&d, "compaction/prune-decision", 0);
    const json_t *prune = dh_event_data(&d, "compaction/prune-decision", 1);
    assert_true(json_equal(json_object_get(keep, "seq"), json_object_get(c1, "seq")));
    assert_string_equal(json_string_value(json_object_get(keep, "decision")), "keep");
    assert_string_equal(json_string_value(json_object_get(keep, "rule")), "cost");
    assert_true(json_integer_value(json_object_get(keep, "invalidated_tokens")) > 3750);
    assert_true(json_real_value(json_object_get(keep, "cost")) >
                json_real_value(json_object_get(keep, "gain")));
    assert_int_equal(json_integer_value(json_object_get(keep, "horizon")), 10);
    assert_true(json_real_value(json_object_get(keep, "cache_write_price")) == 1.25);
    assert_true(json_equal(json_object_get(prune, "seq"), json_object_get(c2, "seq")));
    assert_string_equal(json_string_value(json_object_get(prune, "decision")), "prune");
    assert_int_equal(json_integer_value(json_object_get(prune, "invalidated_tokens")), 0);
    assert_true(json_integer_value(json_object_get(prune, "saved_tokens")) > 900);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_true(json_is_true(json_object_get(end, "ok")));
    assert_string_equal(json_string_value(json_object_get(end, "strategy")), "prune");
    assert_int_equal(json_integer_value(json_object_get(end, "pruned")), 1);
    json_t *shadowed = json_pack("[O]", json_object_get(c2, "seq"));
    assert_true(json_equal(json_object_get(end, "shadowed"), shadowed));
    json_decref(shadowed);
    /* the cache from the pruned result on: the result itself (nothing follows it) */
    assert_int_equal(json_integer_value(json_object_get(end, "cache_invalidated_tokens")),
                     json_integer_value(json_object_get(
                         dh_event_data(&d, "compaction/prune", 0), "shadowed_tokens")));
    dh_teardown(&d);
}


/* recall before the session's first compaction is a tool error the model
 * sees (the turn goes on); with recall.enabled false there is no such tool
 * and no id list in a checkpoint. */
static void recall_before_any_compaction_is_a_tool_error(void **state) {
    (void)state;
    dh d;
    setup(&d,
          "{\"tool_calls\":[{\"id\":\"r1\",\"name\":\"recall\",\"arguments\":{\"id\":\"seq:1\"}}]},"
          "{\"text\":\"nothing to recall\"}",
          "{}", NULL);
    dh_open(&d, "recall-early");
    run_text(&d, "what did I say?");
    assert_string_equal(end_kind(&d, 0), "completed");
    const json_t *r1 = result_of(&d, "r1");
    assert_non_null(r1);
    const json_t *b1 = json_array_get(
        json_object_get(json_object_get(json_object_get(r1, "data"), "message"), "content"), 0);
    assert_true(json_is_true(json_object_get(b1, "is_error")));
    assert_non_null(strstr(result_text(r1), "nothing was compacted in this session yet"));
    assert_int_equal(dh_count(&d, "compaction/recall"), 0);
    /* listed from the first request on: the prefix never changes for it */
    char *first_hdr = dumps(json_object_get(dh_find(&d, "request/header", 0), "data"));
    assert_non_null(strstr(first_hdr, "\"name\":\"recall\""));
    free(first_hdr);
    dh_teardown(&d);

    setup(&d,
          "{\"tool_calls\":[{\"id\":\"r1\",\"name\":\"recall\",\"arguments\":{\"id\":\"seq:1\"}}]},"
          "{\"text\":\"no such tool\"}",
          "{\"recall\":{\"enabled\":false}}", NULL);
    dh_open(&d, "recall-off");
    run_text(&d, "what did I say?");
    assert_string_equal(end_kind(&d, 0), "completed");
    r1 = result_of(&d, "r1");
    assert_non_null(r1);
    assert_null(strstr(result_text(r1), "nothing was compacted"));
    const json_t *hdr = dh_find(&d, "request/header", 0);
    char *hdr_text = dumps(json_object_get(hdr, "data"));
    assert_null(strstr(hdr_text, "\"recall\""));
    free(hdr_text);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_defaults_and_validation),
        cmocka_unit_test(token_estimates_count_four_characters_a_token),
        cmocka_unit_test(measure_uses_the_usage_baseline_until_a_replace_lands_behind_it),
        cmocka_unit_test(pruning_keeps_head_marker_and_tail),
        cmocka_unit_test(pruning_never_splits_utf8),
        cmocka_unit_test(pruning_a_tool_message_converges_in_one_pass),
        cmocka_unit_test(range_is_head_anchored_after_the_system_node),
        cmocka_unit_test(range_never_splits_a_tool_call_from_its_result),
        cmocka_unit_test(range_moves_past_far_results_and_reused_ids),
        cmocka_unit_test(nothing_compactable_declines),
        cmocka_unit_test(checkpoint_shapes),
        cmocka_unit_test(config_pinned_and_breaker_keys),
        cmocka_unit_test(pinned_messages_by_pattern_or_source),
        cmocka_unit_test(meter_matches_a_full_measurement),
        cmocka_unit_test(instruction_lists_the_sections),
        cmocka_unit_test(pressure_compacts_between_turns_with_a_summary),
        cmocka_unit_test(manual_compaction_between_turns),
        cmocka_unit_test(manual_compaction_declines),
        cmocka_unit_test(pressure_summaries_are_bounded_per_trigger),
        cmocka_unit_test(nothing_happens_below_the_threshold),
        cmocka_unit_test(pruning_comes_with_the_summary),
        cmocka_unit_test(pruning_alone_when_no_summary_can_help),
        cmocka_unit_test(no_pruning_between_compactions),
        cmocka_unit_test(thinking_sessions_compact_at_a_turn_boundary),
        cmocka_unit_test(thinking_sessions_compact_mid_turn_before_an_overflow),
        cmocka_unit_test(summary_request_drops_the_continuations_the_last_request_dropped),
        cmocka_unit_test(overflow_recovery_retries_after_a_summary),
        cmocka_unit_test(overflow_with_nothing_compactable_keeps_the_original_error),
        cmocka_unit_test(overflow_recovery_is_bounded_per_step),
        cmocka_unit_test(summarizer_failure_leaves_the_surface_unchanged),
        cmocka_unit_test(a_non_shrinking_summary_is_rejected),
        cmocka_unit_test(summary_request_replays_the_last_request_plus_one_instruction),
        cmocka_unit_test(summary_request_bytes_on_the_wire_extend_the_last_request),
        cmocka_unit_test(pinned_messages_survive_three_compactions),
        cmocka_unit_test(breaker_trips_at_the_cap_and_resets_next_turn),
        cmocka_unit_test(breaker_trips_on_low_savings_and_resets_next_turn),
        cmocka_unit_test(an_unknown_window_warns_once_per_agent),
        cmocka_unit_test(overflow_retries_only_when_the_replace_generation_advanced),
        cmocka_unit_test(capacity_is_re_resolved_after_a_provider_switch),
        cmocka_unit_test(cancellation_reaches_capacity_resolution),
        cmocka_unit_test(a_cancel_during_the_summary_call_replaces_nothing),
        cmocka_unit_test(a_cancel_before_the_start_starts_no_compaction),
        cmocka_unit_test(overflow_and_transient_retry_budgets_stay_independent),
        cmocka_unit_test(a_failure_after_a_durable_prune_still_retries),
        cmocka_unit_test(a_meter_change_before_summarization_is_rejected),
        cmocka_unit_test(agent_context_reads_the_surface_and_events),
        cmocka_unit_test(a_long_turn_releases_older_steps_but_keeps_what_was_peeked),
        cmocka_unit_test(agent_context_replace_goes_through_the_log_validation),
        cmocka_unit_test(agent_complete_collects_text_and_reports_failures),
        cmocka_unit_test(agent_complete_stream_runs_the_llm_stream_chain),
        cmocka_unit_test(agent_context_survives_allocation_failures),
        cmocka_unit_test(pressure_compaction_survives_one_failed_allocation),
        cmocka_unit_test(config_strategies_and_recall),
        cmocka_unit_test(the_cost_rule_weighs_savings_against_the_invalidated_cache),
        cmocka_unit_test(recall_cuts_at_its_bound_and_reads_on),
        cmocka_unit_test(a_summary_only_chain_never_prunes),
        cmocka_unit_test(prune_first_keeps_what_the_cache_makes_dear),
        cmocka_unit_test(recall_before_any_compaction_is_a_tool_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
