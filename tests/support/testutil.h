/*
 * tests/support/testutil.h - helpers shared by the cmocka tests: paths from
 * the environment ctest sets, temp dirs, and file reading.
 */
#ifndef WEIR_TESTUTIL_H
#define WEIR_TESTUTIL_H

#include <stddef.h>

/* $name or abort the test with a message (ctest sets them). Borrowed. */
const char *wt_env(const char *name);
/* A fresh temp dir (malloc'd path), removed by wt_rmtree. */
char *wt_tmpdir(const char *tag);
void wt_rmtree(const char *path);
/* Whole file as a NUL-terminated malloc'd string, or NULL. */
char *wt_read_file(const char *path, size_t *len);
/* Write `text` to path; 0 on success. */
int wt_write_file(const char *path, const char *text);

#endif
