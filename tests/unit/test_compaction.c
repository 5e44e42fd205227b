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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_context.h"
#include "compaction_policy.h"
#include "driver_harness.h"
#include "harness_check.h"
#include "schema.h"
#include "cancel.h"

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
    assert_int_equal(cfg.summary_max_tokens, 4096);
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
    assert_string_equal(first_text(msgs, 0), want_text);
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
    setup(&d, replies, "{\"keep_recent_tokens\":1,\"max_attempts\":1}", NULL);
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
    assert_int_equal(json_integer_value(json_object_get(end, "tokens_after")), 1073);
    assert_string_equal(json_string_value(json_object_get(end, "error")),
                        "still above the threshold (1073 >= 800 tokens) after 1 summary attempt");
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

static void pruning_alone_relieves_pressure(void **state) {
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
          "{\"prune\":{\"max_result_chars\":1000,\"head_chars\":100,\"tail_chars\":50}}", tools);
    free(tools);
    dh_open(&d, "prune");
    run_text(&d, "run the tool");
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "compaction/start"), 1);
    assert_int_equal(dh_count(&d, "compaction/prune"), 1);
    assert_int_equal(dh_count(&d, "compaction/summary"), 0);
    assert_int_equal(dh_count(&d, "tool/result"), 2);
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
    /* the compaction ran between the tool step and the next step */
    char *types = dh_types(&d, true);
    assert_non_null(strstr(types, "tool/result,step/end,compaction/start,compaction/prune,"
                                  "tool/result,compaction/end,step/start"));
    free(types);
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
/* The agent context API (core/agent_context.c)                             */
/* ------------------------------------------------------------------------ */

/* One completed turn with a tool call: system? no; U, A(call), R, A. */
static void context_setup(dh *d, const char *more_replies, bool loop) {
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
    dh_open(d, NULL);
    run_text(d, "call the tool");
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
    for (long n = 1; n < 400 && !(replaced && completed); n++) {
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
        cmocka_unit_test(nothing_compactable_declines),
        cmocka_unit_test(checkpoint_shapes),
        cmocka_unit_test(instruction_lists_the_sections),
        cmocka_unit_test(pressure_compacts_between_turns_with_a_summary),
        cmocka_unit_test(manual_compaction_between_turns),
        cmocka_unit_test(manual_compaction_declines),
        cmocka_unit_test(pressure_summaries_are_bounded_per_trigger),
        cmocka_unit_test(nothing_happens_below_the_threshold),
        cmocka_unit_test(pruning_alone_relieves_pressure),
        cmocka_unit_test(overflow_recovery_retries_after_a_summary),
        cmocka_unit_test(overflow_with_nothing_compactable_keeps_the_original_error),
        cmocka_unit_test(overflow_recovery_is_bounded_per_step),
        cmocka_unit_test(summarizer_failure_leaves_the_surface_unchanged),
        cmocka_unit_test(a_non_shrinking_summary_is_rejected),
        cmocka_unit_test(agent_context_reads_the_surface_and_events),
        cmocka_unit_test(agent_context_replace_goes_through_the_log_validation),
        cmocka_unit_test(agent_complete_collects_text_and_reports_failures),
        cmocka_unit_test(agent_context_survives_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
