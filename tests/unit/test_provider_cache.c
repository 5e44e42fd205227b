/*
 * tests/unit/test_provider_cache.c - the providers' request cache
 * (plugins/provider-common/provider_cache.c) on its own: owner tags, the
 * release of a disposed agent's entries (issue #15: a closed agent releases
 * everything it held, its cache entries included) with the table still
 * answering every other key byte for byte after the backward-shift
 * deletions, and the table shrinking once closed agents left it mostly
 * empty.  The translation through the cache is covered by
 * test_provider_openai / test_provider_anthropic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "provider_cache.h"

/* Owner identities: only their addresses matter. */
static const char owner_a = 'a', owner_b = 'b', agent_a = 'A', agent_b = 'B';

#define N 600

static void text_of(int i, char *buf, size_t size) {
    snprintf(buf, size, "{\"role\":\"user\",\"content\":\"message %d\"}", i);
}

/* Whether `key` is cached with the text of message i. */
static bool cached_as(pc_cache *c, const json_t *key, int i) {
    char want[96];
    text_of(i, want, sizeof want);
    pc_buf out = {0};
    int rc = pc_cache_get(c, key, PC_CACHE_MESSAGE, &out);
    bool same = rc == 1 && out.len == strlen(want) && memcmp(out.p, want, out.len) == 0;
    free(out.p);
    return same;
}

/* Keys i % 3 == 0 tagged a, 1 tagged b, 2 untagged. */
static void fill(pc_cache *c, json_t **keys) {
    char text[96];
    for (int i = 0; i < N; i++) {
        keys[i] = json_object();
        assert_non_null(keys[i]);
        pc_cache_set_owner(i % 3 == 0 ? (const void *)&owner_a
                           : i % 3 == 1 ? (const void *)&owner_b
                                        : NULL);
        text_of(i, text, sizeof text);
        assert_int_equal(pc_cache_put(c, keys[i], PC_CACHE_MESSAGE, text, strlen(text)), 0);
    }
    pc_cache_set_owner(NULL);
}

static void release_drops_only_the_agents_entries(void **state) {
    (void)state;
    pc_cache *c = pc_cache_new(16384, 1 << 24);
    assert_non_null(c);
    assert_int_equal(pc_cache_bind_agent(c, &agent_a, &owner_a), 0);
    assert_int_equal(pc_cache_bind_agent(c, &agent_b, &owner_b), 0);
    json_t *keys[N];
    fill(c, keys);
    assert_int_equal(pc_cache_get_stats(c).entries, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(keys[i]->refcount, 2); /* the test's and the cache's */

    pc_cache_release_agent(c, &agent_a); /* agent/disposed */
    pc_cache_stats st = pc_cache_get_stats(c);
    assert_int_equal(st.released, N / 3);
    assert_int_equal(st.entries, N - N / 3);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) {
            assert_int_equal(keys[i]->refcount, 1); /* the cache let go at once */
            assert_false(cached_as(c, keys[i], i));
        } else {
            assert_int_equal(keys[i]->refcount, 2);
            assert_true(cached_as(c, keys[i], i)); /* every probe run still intact */
        }
    }
    /* a second release of the same agent finds no binding: nothing more */
    pc_cache_release_agent(c, &agent_a);
    assert_int_equal(pc_cache_get_stats(c).released, N / 3);

    /* b's entries go with b; the untagged ones only with a sweep once dead */
    pc_cache_release_agent(c, &agent_b);
    st = pc_cache_get_stats(c);
    assert_int_equal(st.entries, N / 3);
    for (int i = 2; i < N; i += 3)
        assert_true(cached_as(c, keys[i], i));
    for (int i = 0; i < N; i++)
        json_decref(keys[i]);
    pc_cache_sweep(c);
    assert_int_equal(pc_cache_get_stats(c).entries, 0);
    pc_cache_free(c);
}

/* An agent that was never bound (its agent/created listener ran out of
 * memory, or another listener failed first) is released by the sweep that
 * its release asks for; a rebind replaces the owner. */
static void unbound_agent_goes_with_the_sweep(void **state) {
    (void)state;
    pc_cache *c = pc_cache_new(16384, 1 << 24);
    assert_non_null(c);
    json_t *keys[N];
    fill(c, keys);
    pc_cache_release_agent(c, &agent_a);
    assert_int_equal(pc_cache_get_stats(c).entries, N); /* no binding: only the flag */
    for (int i = 0; i < N; i += 3)
        json_decref(keys[i]); /* the history goes with the agent */
    json_t *next = json_object();
    assert_int_equal(pc_cache_put(c, next, PC_CACHE_MESSAGE, "{}", 2), 0);
    pc_cache_stats st = pc_cache_get_stats(c);
    assert_int_equal(st.swept, N / 3); /* the put swept them */
    assert_int_equal(st.entries, N - N / 3 + 1);

    assert_int_equal(pc_cache_bind_agent(c, &agent_b, &owner_a), 0);
    assert_int_equal(pc_cache_bind_agent(c, &agent_b, &owner_b), 0); /* replaces */
    pc_cache_release_agent(c, &agent_b);
    assert_int_equal(pc_cache_get_stats(c).released, N / 3); /* owner b's */
    for (int i = 0; i < N; i++)
        if (i % 3 == 2)
            assert_true(cached_as(c, keys[i], i));
    for (int i = 0; i < N; i++)
        if (i % 3 != 0)
            json_decref(keys[i]);
    json_decref(next);
    pc_cache_free(c);
}

/* Many agents open, then closed one by one: the table shrinks as they go
 * and the survivors still answer; NULL arguments are no-ops. */
static void table_shrinks_as_agents_close(void **state) {
    (void)state;
    enum { AGENTS = 200, EACH = 20 };
    pc_cache *c = pc_cache_new(16384, 1 << 24);
    assert_non_null(c);
    static char owners[AGENTS], agents[AGENTS];
    json_t *keys[AGENTS][EACH];
    char text[96];
    for (int a = 0; a < AGENTS; a++) {
        assert_int_equal(pc_cache_bind_agent(c, &agents[a], &owners[a]), 0);
        pc_cache_set_owner(&owners[a]);
        for (int k = 0; k < EACH; k++) {
            keys[a][k] = json_object();
            text_of(a * EACH + k, text, sizeof text);
            assert_int_equal(
                pc_cache_put(c, keys[a][k], PC_CACHE_MESSAGE, text, strlen(text)), 0);
        }
    }
    pc_cache_set_owner(NULL);
    assert_int_equal(pc_cache_get_stats(c).entries, AGENTS * EACH);
    for (int a = 0; a < AGENTS - 1; a++) {
        pc_cache_release_agent(c, &agents[a]);
        for (int k = 0; k < EACH; k++) {
            assert_int_equal(keys[a][k]->refcount, 1);
            json_decref(keys[a][k]);
        }
        for (int k = 0; k < EACH; k += 7) /* the last agent's entries still answer */
            assert_true(cached_as(c, keys[AGENTS - 1][k], (AGENTS - 1) * EACH + k));
    }
    pc_cache_stats st = pc_cache_get_stats(c);
    assert_int_equal(st.entries, EACH);
    assert_int_equal(st.released, (AGENTS - 1) * EACH);
    for (int k = 0; k < EACH; k++)
        assert_true(cached_as(c, keys[AGENTS - 1][k], (AGENTS - 1) * EACH + k));
    pc_cache_release_agent(c, &agents[AGENTS - 1]);
    for (int k = 0; k < EACH; k++)
        json_decref(keys[AGENTS - 1][k]);
    assert_int_equal(pc_cache_get_stats(c).entries, 0);

    pc_cache_release_agent(NULL, &agents[0]);
    pc_cache_release_agent(c, NULL);
    assert_int_equal(pc_cache_bind_agent(NULL, &agents[0], &owners[0]), 0);
    assert_int_equal(pc_cache_bind_agent(c, NULL, &owners[0]), 0);
    pc_cache_free(c);
}

/* A released agent's list may name keys that are gone, their addresses
 * reused by another agent's messages: those entries stay. */
static void stale_keys_of_a_release_drop_nothing_else(void **state) {
    (void)state;
    pc_cache *c = pc_cache_new(16384, 1 << 24);
    assert_non_null(c);
    assert_int_equal(pc_cache_bind_agent(c, &agent_a, &owner_a), 0);
    assert_int_equal(pc_cache_bind_agent(c, &agent_b, &owner_b), 0);
    json_t *keys[N];
    char text[96];
    pc_cache_set_owner(&owner_a);
    for (int i = 0; i < N; i++) {
        keys[i] = json_object();
        text_of(i, text, sizeof text);
        assert_int_equal(pc_cache_put(c, keys[i], PC_CACHE_MESSAGE, text, strlen(text)), 0);
        json_decref(keys[i]); /* at once: dead, swept by a later growth */
    }
    pc_cache_sweep(c);
    assert_int_equal(pc_cache_get_stats(c).entries, 0);
    pc_cache_set_owner(&owner_b);
    for (int i = 0; i < N; i++) { /* malloc hands the freed addresses out again */
        keys[i] = json_object();
        text_of(i, text, sizeof text);
        assert_int_equal(pc_cache_put(c, keys[i], PC_CACHE_MESSAGE, text, strlen(text)), 0);
    }
    pc_cache_set_owner(NULL);
    pc_cache_release_agent(c, &agent_a);
    assert_int_equal(pc_cache_get_stats(c).entries, N);
    for (int i = 0; i < N; i++)
        assert_true(cached_as(c, keys[i], i));
    pc_cache_release_agent(c, &agent_b);
    assert_int_equal(pc_cache_get_stats(c).entries, 0);
    for (int i = 0; i < N; i++)
        json_decref(keys[i]);
    pc_cache_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_drops_only_the_agents_entries),
        cmocka_unit_test(unbound_agent_goes_with_the_sweep),
        cmocka_unit_test(table_shrinks_as_agents_close),
        cmocka_unit_test(stale_keys_of_a_release_drop_nothing_else),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
