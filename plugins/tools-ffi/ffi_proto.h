/*
 * plugins/tools-ffi/ffi_proto.h - a parser for the C prototypes tools-ffi
 * accepts (docs/tools.md).  Pure: no allocation, no global state; safe on
 * hostile input and from any thread.
 *
 *   prototype := type name '(' [ 'void' | param { ',' param } ] ')' [';']
 *   param     := type name            scalar in, or 'const char *' string in
 *              | type '*' name        out-parameter: T (or char) written by the
 *                                     callee; how many elements the config says
 *   type      := C integer specifiers in any order (signed, unsigned, char,
 *                short, int, long, long long), bool/_Bool, float, double,
 *                size_t, ssize_t, [u]int{8,16,32,64}_t, optional 'const';
 *                returns may also be 'void', 'char *' (owned string) or
 *                'const char *' (borrowed string).
 */
#ifndef WEIR_FFI_PROTO_H
#define WEIR_FFI_PROTO_H

#include <stdbool.h>
#include <stddef.h>

#define WF_MAX_PARAMS 16
#define WF_MAX_NAME 64

typedef enum wf_type {
    WF_VOID = 0,
    WF_BOOL,
    WF_CHAR,
    WF_SCHAR,
    WF_UCHAR,
    WF_SHORT,
    WF_USHORT,
    WF_INT,
    WF_UINT,
    WF_LONG,
    WF_ULONG,
    WF_LLONG,
    WF_ULLONG,
    WF_SIZE,
    WF_SSIZE,
    WF_I8,
    WF_I16,
    WF_I32,
    WF_I64,
    WF_U8,
    WF_U16,
    WF_U32,
    WF_U64,
    WF_FLOAT,
    WF_DOUBLE,
    WF_STRING,     /* const char * */
    WF_STRING_OWNED /* char * (returns only) */
} wf_type;

typedef struct wf_param {
    wf_type type;
    bool out;                 /* T *name: an out-parameter (one or more T; 'char *': WF_CHAR) */
    char name[WF_MAX_NAME];
    int column;               /* 1-based column of the name */
} wf_param;

typedef struct wf_proto {
    wf_type ret;
    char name[WF_MAX_NAME];
    size_t nparams;
    wf_param params[WF_MAX_PARAMS];
} wf_proto;

/*
 * Parse `text` into `out`.  0 on success; -1 with `msg` set to
 * "column N: <what was expected>" (N is 1-based) otherwise.
 */
int wf_proto_parse(const char *text, wf_proto *out, char *msg, size_t msg_size);

/* The C spelling of a type ("unsigned long", "const char *"). Static. */
const char *wf_type_name(wf_type t);

/* true for the integer types (bool and char excluded). */
bool wf_type_is_integer(wf_type t);

#endif
