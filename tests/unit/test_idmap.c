/*
 * tests/unit/test_idmap.c - the string hash index (core/base/idmap.c): lookups,
 * replacement, removal (entries after a removed one must stay findable,
 * also across the end of the slot array), growth, and allocation failure.
 * Checked against a plain array of the same keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "idmap.h"

enum { NKEYS = 5000 };

static char keys[NKEYS][16];

static void make_keys(void) {
    for (int i = 0; i < NKEYS; i++)
        snprintf(keys[i], sizeof keys[i], "k%d", i);
}

/* Every key i is in the map with num i exactly when present[i]. */
static void check_all(const weir__idmap *m, const bool *present) {
    size_t n = 0;
    for (int i = 0; i < NKEYS; i++) {
        const weir__idmap_slot *s = weir__idmap_get(m, keys[i]);
        if (present[i]) {
            assert_non_null(s);
            assert_int_equal(s->num, (size_t)i);
            assert_ptr_equal(s->ptr, keys[i]);
            n++;
        } else {
            assert_null(s);
        }
    }
    assert_int_equal(m->n, n);
}

static void test_put_get_replace(void **state) {
    (void)state;
    make_keys();
    weir__idmap m = WEIR__IDMAP_INIT;
    assert_null(weir__idmap_get(&m, "k0"));
    assert_false(weir__idmap_del(&m, "k0"));
    static bool present[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        assert_int_equal(weir__idmap_put(&m, keys[i], keys[i], (size_t)i), WEIR_OK);
        present[i] = true;
    }
    check_all(&m, present);
    assert_true(m.cap >= 2 * m.n);
    /* a second put replaces the values and keeps one entry; another pointer to
     * an equal string finds it */
    char same[16];
    snprintf(same, sizeof same, "k%d", 42);
    assert_int_equal(weir__idmap_put(&m, same, NULL, 7), WEIR_OK);
    assert_int_equal(m.n, NKEYS);
    const weir__idmap_slot *s = weir__idmap_get(&m, "k42");
    assert_non_null(s);
    assert_ptr_equal(s->key, keys[42]);
    assert_int_equal(s->num, 7);
    assert_int_equal(weir__idmap_put(&m, keys[42], keys[42], 42), WEIR_OK);
    assert_null(weir__idmap_get(&m, ""));
    assert_int_equal(weir__idmap_put(&m, NULL, NULL, 0), WEIR_E_INVAL);
    weir__idmap_free(&m);
    assert_int_equal(m.n, 0);
    assert_null(weir__idmap_get(&m, "k1"));
    weir__idmap_free(NULL);
}

static void test_delete_keeps_the_others(void **state) {
    (void)state;
    make_keys();
    static bool present[NKEYS];
    weir__idmap m = WEIR__IDMAP_INIT;
    for (int i = 0; i < NKEYS; i++) {
        assert_int_equal(weir__idmap_put(&m, keys[i], keys[i], (size_t)i), WEIR_OK);
        present[i] = true;
    }
    /* remove in a scrambled order, checking everything now and then */
    unsigned x = 12345;
    for (int round = 0; round < 3 * NKEYS; round++) {
        x = x * 1103515245u + 12345u;
        int i = (int)((x >> 8) % NKEYS);
        if (present[i]) {
            assert_true(weir__idmap_del(&m, keys[i]));
            present[i] = false;
        } else {
            assert_false(weir__idmap_del(&m, keys[i]));
            if (round % 3 == 0) { /* and put some back */
                assert_int_equal(weir__idmap_put(&m, keys[i], keys[i], (size_t)i), WEIR_OK);
                present[i] = true;
            }
        }
        if (round % 997 == 0)
            check_all(&m, present);
    }
    check_all(&m, present);
    for (int i = 0; i < NKEYS; i++)
        if (present[i])
            assert_true(weir__idmap_del(&m, keys[i]));
    assert_int_equal(m.n, 0);
    weir__idmap_free(&m);
}

static void test_alloc_failure(void **state) {
    (void)state;
    make_keys();
    static bool present[NKEYS];
    for (long n = 1; n < 64; n++) {
        weir__idmap m = WEIR__IDMAP_INIT;
        memset(present, 0, sizeof present);
        weir__alloc_fail_after(n);
        int i = 0;
        for (; i < 200; i++) {
            if (weir__idmap_put(&m, keys[i], keys[i], (size_t)i) != WEIR_OK)
                break; /* the map is as it was */
            present[i] = true;
        }
        weir__alloc_fail_after(-1);
        check_all(&m, present);
        weir__idmap_free(&m);
        if (i == 200)
            return;
    }
    fail_msg("200 puts never succeeded");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_replace),
        cmocka_unit_test(test_delete_keeps_the_others),
        cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
