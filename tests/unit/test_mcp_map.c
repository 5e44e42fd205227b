/*
 * tests/unit/test_mcp_map.c - the pure parts of tools-mcp: the JSON-RPC
 * frame reader and writer (plugins/tools-mcp/mcp_frame.c) and the translations
 * (mcp_map.c: tool names, CallToolResult mapping, ${VAR}, log levels).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_frame.h"
#include "mcp_map.h"

/* ------------------------------------------------------------------------ */
/* Frames                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct seen {
    char text[4096];
    int n;
} seen;

static int collect(void *ud, mcp_frame_kind kind, json_t *msg, const char *text, size_t len) {
    seen *s = ud;
    size_t at = strlen(s->text);
    if (kind == MCP_FRAME_MESSAGE) {
        char *d = json_dumps(msg, JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(s->text + at, sizeof s->text - at, "M%s;", d);
        free(d);
    } else if (kind == MCP_FRAME_GARBAGE) {
        snprintf(s->text + at, sizeof s->text - at, "G%.*s;", (int)len, text);
    } else {
        snprintf(s->text + at, sizeof s->text - at, "L%zu;", len);
    }
    s->n++;
    return 0;
}

static void feed_all(mcp_frame_reader *r, const char *in, size_t step, seen *s) {
    size_t n = strlen(in);
    for (size_t at = 0; at < n; at += step) {
        size_t k = n - at < step ? n - at : step;
        assert_int_equal(mcp_frame_feed(r, in + at, k, collect, s), 0);
    }
}

static void frames_split_anywhere(void **state) {
    (void)state;
    const char *in = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                     "\n"
                     "{\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n"
                     "not json\n"
                     "[1,2]\n"
                     "{\"id\":2,\"result\":{\"text\":\"a\\nb\"}}\n"
                     "{\"partial\":";
    const char *want = "M{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}};"
                       "M{\"method\":\"notifications/progress\",\"params\":{\"progress\":1}};"
                       "Gnot json;G[1,2];"
                       "M{\"id\":2,\"result\":{\"text\":\"a\\nb\"}};";
    for (size_t step = 1; step <= strlen(in); step++) {
        mcp_frame_reader r;
        mcp_frame_init(&r, 0);
        seen s = {{0}, 0};
        feed_all(&r, in, step, &s);
        assert_string_equal(s.text, want);
        assert_int_equal(mcp_frame_pending(&r), strlen("{\"partial\":"));
        mcp_frame_clear(&r);
    }
}

static void frames_too_long_are_dropped_whole(void **state) {
    (void)state;
    for (size_t step = 1; step < 40; step++) {
        mcp_frame_reader r;
        mcp_frame_init(&r, 16);
        seen s = {{0}, 0};
        feed_all(&r, "{\"id\":1,\"result\":{\"x\":\"long\"}}\n{\"id\":2}\n"
                     "{\"a\":\"0123456789\"}\n{}\n", step, &s);
        assert_string_equal(s.text, "L30;M{\"id\":2};L18;M{};");
        assert_true(r.cap <= 17);
        mcp_frame_clear(&r);
    }
}

/* The writer's side: compact text a reader takes back as the same value,
 * one line with the newline; NULL for what cannot be JSON text. */
static void frame_text_round_trips(void **state) {
    (void)state;
    json_t *msg = json_pack("{s:s,s:i,s:s,s:{s:s,s:[i,s,n,b]}}", "jsonrpc", "2.0", "id", 7,
                            "method", "tools/call", "params", "name", "caf\xc3\xa9 \"q\"\n",
                            "arguments", 1, "x", true);
    assert_non_null(msg);
    char *want = json_dumps(msg, JSON_COMPACT);
    char *text = mcp_frame_text(msg, false);
    assert_string_equal(text, want);
    char *line = mcp_frame_text(msg, true);
    assert_int_equal(strlen(line), strlen(want) + 1);
    assert_memory_equal(line, want, strlen(want));
    assert_int_equal(line[strlen(want)], '\n');
    mcp_frame_reader r;
    mcp_frame_init(&r, 0);
    seen s = {{0}, 0};
    feed_all(&r, line, strlen(line), &s);
    char *sorted = json_dumps(msg, JSON_COMPACT | JSON_SORT_KEYS);
    char back[512];
    snprintf(back, sizeof back, "M%s;", sorted);
    assert_string_equal(s.text, back);
    free(sorted);
    mcp_frame_clear(&r);
    free(line);
    free(text);
    free(want);
    json_decref(msg);
    /* any value; nothing for NULL or a string that is not UTF-8 */
    json_t *n = json_integer(42);
    text = mcp_frame_text(n, false);
    assert_string_equal(text, "42");
    free(text);
    json_decref(n);
    json_t *bad = json_stringn_nocheck("\xff", 1);
    assert_null(mcp_frame_text(bad, true));
    json_decref(bad);
    assert_null(mcp_frame_text(NULL, false));
}

static void frames_duplicate_keys_are_garbage(void **state) {
    (void)state;
    mcp_frame_reader r;
    mcp_frame_init(&r, 0);
    seen s = {{0}, 0};
    feed_all(&r, "{\"id\":1,\"id\":2}\n", 100, &s);
    assert_string_equal(s.text, "G{\"id\":1,\"id\":2};");
    mcp_frame_clear(&r);
}

/* A \u0000 in a string is still a message (issue #31, 8): a NUL in one tool
 * name must not turn a whole tools/list answer into garbage.  In an object
 * key jansson cannot take it: that line stays garbage. */
static void frames_with_nul_are_messages(void **state) {
    (void)state;
    mcp_frame_reader r;
    mcp_frame_init(&r, 0);
    seen s = {{0}, 0};
    feed_all(&r, "{\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\\u0000b\"},{\"name\":\"c\"}]}}\n",
             7, &s);
    assert_string_equal(s.text, "M{\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\\u0000b\"},"
                                "{\"name\":\"c\"}]}};");
    memset(&s, 0, sizeof s);
    feed_all(&r, "{\"a\\u0000b\":1}\n", 100, &s);
    assert_int_equal(s.text[0], 'G');
    mcp_frame_clear(&r);
}

/* ------------------------------------------------------------------------ */
/* Secrets                                                                   */
/* ------------------------------------------------------------------------ */

/* Which env and header names hold secrets (issue #31, 2). */
static void secret_names(void **state) {
    (void)state;
    static const char *const env_secret[] = {"GITHUB_TOKEN", "api_key", "OPENAI_API_KEY",
                                             "Client_Secret", "DB_PASSWORD", "MYSQL_PASSWD",
                                             "GOOGLE_APPLICATION_CREDENTIALS", "KEY", NULL};
    static const char *const env_plain[] = {"DATA_DIR", "DEBUG", "PORT", "USER", "HOME", "PATH",
                                            "LOG_LEVEL", "GIT_AUTHOR_NAME", "", NULL};
    for (size_t i = 0; env_secret[i]; i++)
        if (!mcp_env_name_secret(env_secret[i]))
            fail_msg("env %s should be a secret", env_secret[i]);
    for (size_t i = 0; env_plain[i]; i++)
        if (mcp_env_name_secret(env_plain[i]))
            fail_msg("env %s should not be a secret", env_plain[i]);
    static const char *const hdr_secret[] = {"Authorization", "proxy-authorization", "Cookie",
                                             "X-Api-Key", "X-Auth-Token", "X-Goog-Api-Key",
                                             "X-Client-Secret", "X-Password", "x-amz-security-token",
                                             NULL};
    static const char *const hdr_plain[] = {"X-Tenant", "Accept-Language", "User-Agent",
                                            "X-Request-Id", "Content-Type", NULL};
    for (size_t i = 0; hdr_secret[i]; i++)
        if (!mcp_header_name_secret(hdr_secret[i]))
            fail_msg("header %s should be a secret", hdr_secret[i]);
    for (size_t i = 0; hdr_plain[i]; i++)
        if (mcp_header_name_secret(hdr_plain[i]))
            fail_msg("header %s should not be a secret", hdr_plain[i]);
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static void tool_names(void **state) {
    (void)state;
    char out[256], why[96];
    assert_true(mcp_tool_name("everything", "get-sum", out, sizeof out, why, sizeof why));
    assert_string_equal(out, "mcp__everything__get-sum");
    assert_true(mcp_tool_name("fs", "list_directory", out, sizeof out, why, sizeof why));
    assert_string_equal(out, "mcp__fs__list_directory");
    assert_false(mcp_tool_name("fs", "admin.tools.list", out, sizeof out, why, sizeof why));
    assert_string_equal(why, "has characters outside [A-Za-z0-9_-]");
    assert_false(mcp_tool_name("fs", "a tool", out, sizeof out, why, sizeof why));
    char long_name[80];
    memset(long_name, 'a', 59);
    long_name[59] = '\0'; /* mcp__fs__ + 59 = 68 */
    assert_false(mcp_tool_name("fs", long_name, out, sizeof out, why, sizeof why));
    assert_string_equal(why, "is longer than 64 characters");
    long_name[55] = '\0'; /* 64 exactly */
    assert_true(mcp_tool_name("fs", long_name, out, sizeof out, why, sizeof why));
    assert_true(mcp_name_ok("a-b_C9", 32));
    assert_false(mcp_name_ok("", 32));
    assert_false(mcp_name_ok("a.b", 32));
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

static char *map_text(const char *res_text, size_t max) {
    json_t *res = json_loads(res_text, 0, NULL);
    assert_non_null(res);
    char why[200];
    json_t *out = mcp_map_result(res, max, why, sizeof why);
    json_decref(res);
    if (!out)
        return strdup(why);
    char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(out);
    return s;
}

#define EXPECT_MAP(res, max, want)                 \
    do {                                           \
        char *got_ = map_text(res, max);           \
        if (strcmp(got_, want) != 0) {             \
            fprintf(stderr, "got  %s\nwant %s\n", got_, want); \
            free(got_);                            \
            fail();                                \
        }                                          \
        free(got_);                                \
    } while (0)

static void results_map(void **state) {
    (void)state;
    EXPECT_MAP("{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"image\",\"data\":\"iVBO\",\"mimeType\":\"image/png\"}]}",
               0, "{\"content\":[{\"type\":\"image\",\"media_type\":\"image/png\",\"data\":\"iVBO\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"resource_link\",\"uri\":\"demo://r/2\",\"name\":\"R 2\","
               "\"mimeType\":\"text/plain\"}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"Resource link: demo://r/2 (name: R 2; "
               "mimeType: text/plain)\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"demo://r/1\","
               "\"mimeType\":\"text/plain\",\"text\":\"Resource 1\"}}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"Resource demo://r/1 (text/plain):\\n"
               "Resource 1\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///b\","
               "\"blob\":\"AAEC\"}}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"Resource file:///b: binary content "
               "(4 bytes of base64) not shown\"}]}");
    /* structuredContent only when no text came */
    EXPECT_MAP("{\"content\":[],\"structuredContent\":{\"t\":21}}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":21}\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":21}\"}],"
               "\"structuredContent\":{\"t\":21}}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":21}\"}]}");
    EXPECT_MAP("{\"structuredContent\":{\"t\":1}}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":1}\"}]}");
    /* isError kept */
    EXPECT_MAP("{\"content\":[{\"type\":\"text\",\"text\":\"nope\"}],\"isError\":true}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"nope\"}],\"is_error\":true}");
    EXPECT_MAP("{\"content\":[]}", 0, "{\"content\":[{\"type\":\"text\",\"text\":\"(no content)\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"hologram\",\"x\":1}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"type\\\":\\\"hologram\\\",\\\"x\\\":1}\"}]}");
    EXPECT_MAP("{\"content\":[{\"type\":\"audio\",\"data\":\"UklG\",\"mimeType\":\"audio/wav\"}]}", 0,
               "{\"content\":[{\"type\":\"text\",\"text\":\"[audio content (audio/wav, 4 bytes of "
               "base64) not shown]\"}]}");
    EXPECT_MAP("{\"content\":3}", 0, "the result has no content array");
    EXPECT_MAP("{\"isError\":true}", 0, "the result has no content array");
}

static void results_are_capped_on_utf8_boundaries(void **state) {
    (void)state;
    /* "é" is 2 bytes: a cap of 3 keeps "aé", never half of it */
    EXPECT_MAP("{\"content\":[{\"type\":\"text\",\"text\":\"a\xc3\xa9\xc3\xa9\"},"
               "{\"type\":\"text\",\"text\":\"dropped\"}]}", 4,
               "{\"content\":[{\"type\":\"text\",\"text\":\"a\xc3\xa9\"},{\"type\":\"text\",\"text\":"
               "\"[the result was cut: 12 bytes of text, of which the first 4 are shown]\"}]}");
}

/* ------------------------------------------------------------------------ */
/* ${VAR} and levels                                                         */
/* ------------------------------------------------------------------------ */

static void expand_vars(void **state) {
    (void)state;
    setenv("MCPT_A", "alpha", 1);
    setenv("MCPT_EMPTY", "", 1);
    unsetenv("MCPT_UNSET");
    char unset[128] = "";
    char *s = mcp_expand("${MCPT_A}/x ${MCPT_UNSET:-dflt} ${MCPT_EMPTY:-e} [${MCPT_EMPTY}] "
                         "${MCPT_UNSET} $HOME ${ not} ${", unset, sizeof unset);
    assert_string_equal(s, "alpha/x dflt e [] ${MCPT_UNSET} $HOME ${ not} ${");
    assert_string_equal(unset, "MCPT_UNSET");
    free(s);
}

static void log_levels(void **state) {
    (void)state;
    assert_int_equal(mcp_log_level("debug"), 3);
    assert_int_equal(mcp_log_level("info"), 2);
    assert_int_equal(mcp_log_level("notice"), 2);
    assert_int_equal(mcp_log_level("warning"), 1);
    assert_int_equal(mcp_log_level("error"), 0);
    assert_int_equal(mcp_log_level("critical"), 0);
    assert_int_equal(mcp_log_level("alert"), 0);
    assert_int_equal(mcp_log_level("emergency"), 0);
    assert_int_equal(mcp_log_level("weird"), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_split_anywhere),
        cmocka_unit_test(frames_too_long_are_dropped_whole),
        cmocka_unit_test(frame_text_round_trips),
        cmocka_unit_test(frames_duplicate_keys_are_garbage),
        cmocka_unit_test(frames_with_nul_are_messages),
        cmocka_unit_test(secret_names),
        cmocka_unit_test(tool_names),
        cmocka_unit_test(results_map),
        cmocka_unit_test(results_are_capped_on_utf8_boundaries),
        cmocka_unit_test(expand_vars),
        cmocka_unit_test(log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
