/*
 * core/base/common.h - internal helpers shared by every core file: allocation
 * (with a test hook that fails the Nth allocation), error filling, and
 * small JSON utilities.  Never installed.
 */
#ifndef WEIR_CORE_COMMON_H
#define WEIR_CORE_COMMON_H

#ifndef WEIR_NO_API_MACROS
#define WEIR_NO_API_MACROS
#endif

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"

/* --- allocation (core/base/alloc.c) ---------------------------------------- */
/* All core allocations go through these.  They return NULL on failure. */
void *weir__malloc(size_t n);
void *weir__calloc(size_t count, size_t n);
void *weir__realloc(void *p, size_t n);
void weir__free(void *p);
char *weir__strdup(const char *s);
char *weir__strndup(const char *s, size_t n);
char *weir__asprintf(const char *fmt, ...) WEIR_PRINTF(1, 2);
char *weir__vasprintf(const char *fmt, va_list ap) WEIR_PRINTF(1, 0);

/*
 * Test hook: make the Nth allocation from now (1-based) and every later one
 * fail; n < 0 turns failure injection off.  jansson's allocations count
 * too (weir's allocator for jansson is installed while it is on).
 * Returns the number of allocations counted since the last call.
 */
WEIR_API long weir__alloc_fail_after(long n);
/* The same, but only the Nth allocation fails: a transient failure, after
 * which the code goes on (and may write) with memory again.  A jansson
 * allocation fails only inside weir's own parses (weir__json_loadb), which
 * then fail as if out of memory: jansson's parser is not safe against one
 * failed allocation (core/base/alloc.c). */
WEIR_API long weir__alloc_fail_only(long n);

/* --- errors (core/base/errors.c) ------------------------------------------- */
/*
 * Fill `err` (may be NULL) and return `code`.  `plugin` and `hook` may be
 * NULL.  Typical use:  return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "...");
 */
int weir__err(weir_error *err, int code, const char *plugin, const char *hook,
              const char *fmt, ...) WEIR_PRINTF(5, 6);
int weir__verr(weir_error *err, int code, const char *plugin, const char *hook,
               const char *fmt, va_list ap) WEIR_PRINTF(5, 0);

/* --- warnings (core/base/text_escape.c) ------------------------------------ */
/*
 * Print one line to stderr: the formatted message with every control
 * character escaped (weir_text_escape; no newline in `fmt`), then "\n", in
 * one write.  The core's warnings and the plugin log go through it.  Any
 * thread; a message past 2 KiB is cut.
 */
void weir__warn(const char *fmt, ...) WEIR_PRINTF(1, 2);

/*
 * (core/base/json_write.c) The length of the valid UTF-8 sequence at `s` (at
 * most `n` bytes read),
 * its code point in *cp; 0 when it is not one (ASCII, overlong, a
 * surrogate, past U+10FFFF, cut short).  A NUL-terminated string may pass
 * n = 4: a NUL is never a continuation byte.
 */
size_t weir__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* --- time and ids (core/base/util.c) --------------------------------------- */
int64_t weir__now_ms(void);            /* wall clock, epoch ms */
uint64_t weir__mono_us(void);          /* monotonic microseconds */
/*
 * The host clock of api->clock_ms: monotonic milliseconds, or, after
 * weir__clock_fake(), a virtual clock for tests that moves only through
 * weir__clock_advance() and weir__signal_sleep() (which then advances it by
 * the sleep and returns at once).  weir__clock_real() goes back to the real
 * clock.  Process-wide, thread-safe (atomics); set the mode only while no
 * agent runs.
 */
uint64_t weir__clock_ms(void);
void weir__clock_fake(uint64_t start_ms);
void weir__clock_advance(uint64_t ms);
void weir__clock_real(void);
bool weir__clock_is_fake(void);
/* Write a random id ("prefix-<hex>") into buf; returns buf. */
char *weir__random_id(char *buf, size_t size, const char *prefix);

/* --- JSON helpers (core/base/util.c) --------------------------------------- */
/* json_loadb, but NULL with json_error_code(jerr) == json_error_out_of_memory
 * whenever an allocation failed while it parsed: jansson can return a value
 * that lost bytes then, or call the text invalid (core/base/alloc.c).  Use it for
 * every parse whose result weir acts on. */
json_t *weir__json_loadb(const char *buf, size_t len, size_t flags, json_error_t *jerr);
/* weir__json_loadb of a NUL-terminated text (json_loads). */
json_t *weir__json_loads(const char *text, size_t flags, json_error_t *jerr);
/* Around a jansson parse weir makes itself (json_loadf, ...): false from
 * _end when an allocation failed in between, and what it parsed must not
 * be believed.  Always true when the host gave jansson allocators of its
 * own (core/base/alloc.c). */
unsigned long weir__json_parse_begin(void);
bool weir__json_parse_end(unsigned long mark);
/* Compact, key-order-preserving serialization used for the log and for the
 * derive == request comparison.  New malloc'd string (free with free()),
 * or NULL. */
char *weir__json_dump(const json_t *v);
/* The same bytes as json_dump_callback(v, cb, ud, JSON_COMPACT |
 * JSON_PRESERVE_ORDER | JSON_ENCODE_ANY), handed to `cb` in chunks of up to
 * 4 KiB (core/base/json_write.c).  0, or -1 when `cb` failed, a string is not
 * valid UTF-8, a real is not finite, or memory ran out (`cb` may then have
 * received part of the text). */
int weir__json_write(const json_t *v, json_dump_callback_t cb, void *ud);
/* Whether every object and array in `v` (v included) is held by one
 * reference only (the caller's): no other holder can add, remove or
 * replace a member, so a value handed over can be kept without a copy.
 * Scalars (strings, numbers, true/false/null) may be shared: the core and
 * its plugins never change one in place once it is part of a value they
 * pass on (json_string_set and friends run only on values still private to
 * their builder: config expansion, a provider's scrub before it emits).
 * False for NULL and past a nesting depth of 64 (copy then). */
bool weir__json_sole(const json_t *v);
/* New reference: a copy of `v`'s objects and arrays that shares its scalars
 * (never changed in place, as above), so weir__json_sole holds for it while
 * `v` lives; NULL for NULL or out of memory.  Cheaper than json_deep_copy,
 * which copies every string too. */
json_t *weir__json_copy_tree(const json_t *v);
/* Structural equality (json_equal) that treats NULL == NULL. */
bool weir__json_equal(const json_t *a, const json_t *b);
/* Borrowed string member or `dflt`. */
const char *weir__json_str(const json_t *obj, const char *key, const char *dflt);
/* Integer member or `dflt`. */
json_int_t weir__json_int(const json_t *obj, const char *key, json_int_t dflt);

#endif /* WEIR_CORE_COMMON_H */
