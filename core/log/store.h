/*
 * core/log/store.h - the session stores as the log uses them (weir/store.h,
 * docs/stores.md): the built-in file and memory stores.  Owner:
 * core/log/store_file.c, core/log/store_memory.c; the registry of the
 * stores plugin rows register is the host's (core/runtime/host_int.h).
 */
#ifndef WEIR_CORE_STORE_H
#define WEIR_CORE_STORE_H

#include "common.h"
#include "weir/store.h"


/* A store and its self pointer, as the log uses it. */
typedef struct weir__store_ref {
    const weir_store *vt; /* borrowed: static, or the registry's copy */
    void *self;
} weir__store_ref;

/* The built-in JSONL file store (the default) and the memory store. */
weir__store_ref weir__store_file(void);
weir__store_ref weir__store_memory(void);

/* ---- find_last and read_ranges of the built-in stores (core/log/store_file.c) ---- */

/*
 * Whether `type` (borrowed) is one find_last can look for in the lines'
 * text: 1 to 128 bytes of printable ASCII without '"' or '\\' (the event
 * types weir writes; such a type is written as is, never escaped).
 */
bool weir__store_type_ok(const char *type);
/*
 * Whether the `n` bytes at `p` (a line's start; `n` may stop short of its
 * end) begin with the envelope prefix weir writes,
 * {"seq":<digits>,"time":<digits>,"type":"TYPE" (TYPE: the `tlen` bytes
 * of `type`; the time may be negative): then *seq is the prefix's seq.
 * Reads at most WEIR__STORE_PREFIX_MAX + tlen bytes.
 */
#define WEIR__STORE_PREFIX_MAX 66
bool weir__store_line_type(const char *p, size_t n, const char *type, size_t tlen,
                           uint64_t *seq);
/*
 * Whether the `n` ranges `ranges` (2*n integers: first, last, ...) are as
 * read_ranges takes them: ascending, disjoint, first <= last each.
 * `ranges` may be NULL when `n` is 0.
 */
bool weir__store_ranges_ok(const uint64_t *ranges, size_t n);
/*
 * The bytes the file store's last find_last or read_ranges on `handle` (a
 * file store handle, borrowed) read from its file; for tests and benches
 * (a read of one old seq reads about one index stride, not the file).
 * Not thread-safe against calls on the same handle.
 */
size_t weir__store_file_bytes_read(const void *handle);
/* The lines between two entries of the file store's sparse line index. */
#define WEIR__STORE_INDEX_STRIDE 256

/* ---- held input the log could not record (core/log/store_file.c) ---- */

/*
 * The hold marker of the file store's log at `path` (borrowed): an empty
 * file `<path>.held`, created (`set`) when the shutdown could not log the
 * inbox's removal (a full disk: an empty file needs no data block), so
 * that the next open holds the input left queued (docs/generations.md),
 * and removed once that open logged the hold.  E_IO naming the file.
 */
int weir__store_file_mark_held(const char *path, bool set, weir_error *err);
/* Whether the hold marker of the log at `path` exists. */
bool weir__store_file_held(const char *path);

#endif
