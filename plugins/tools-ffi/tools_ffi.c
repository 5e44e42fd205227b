/*
 * plugins/tools-ffi/tools_ffi.c - expose C functions from shared libraries
 * as tools through libffi (docs/tools.md).
 *
 * Config: {"tools":[{"library","symbol","prototype","description"?,"name"?,
 *                    "out"?:[{"name","count":N|"<argument>","max"?:M}],
 *                    "returns_owned"?:{"free":"free"|"none"|"<symbol>"},
 *                    "parallel"?:bool, "idempotent"?:bool, "background"?:bool,
 *                    "inline"?:bool, "idempotency_key"?:"<const char * parameter>"}]}
 * Every listed function is dlopen'd, dlsym'd and prepared (ffi_prep_cif) once
 * at init; nothing else in the library is callable.  The JSON Schema of each
 * tool comes from its prototype.  Calls may run on any worker thread: the
 * per-tool state is read-only after init.
 *
 * Every pointer parameter is an out-parameter whose size the row declares
 * ("out"; a bare name declares none and is refused); each call passes a
 * fresh zeroed heap buffer of exactly that many elements (a 'char' buffer
 * gets one spare NUL byte after them).  A count that names an argument is
 * checked against its "max" before the call.
 *
 * "idempotency_key" names a 'const char *' parameter that receives the
 * call's idempotency key (weir_tool_exec_idempotency_key) instead of an
 * argument: it is not in the schema.  "idempotent" registers the tool
 * WEIR_TOOL_IDEMPOTENT (docs/tools.md, "Tools across a crash"), and
 * "background" WEIR_TOOL_BACKGROUND: a call returns a receipt at once and
 * the function runs as a job of the agent (docs/tools.md, "Background
 * tools"); it cannot see the job's signal, so a cancelled job's function
 * still runs to its end (its result is dropped).  "inline" registers it
 * WEIR_TOOL_INLINE: the step's own thread calls the function instead of a
 * tool-pool worker, for one that returns at once (arithmetic, a lookup).
 */
#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <ffi.h>

#include "weir/plugin.h"

#include "ffi_proto.h"

#define PLUGIN_NAME "tools-ffi"

/* The largest out-parameter buffer (count or max times the element size): 1 MiB. */
#define OUT_MAX_BYTES ((size_t)1 << 20)

/* How many elements one out-parameter holds (the row's "out", docs/tools.md). */
typedef struct out_size {
    size_t count; /* the constant count, or the maximum when arg >= 0 */
    int arg;      /* the parameter whose argument is the count; -1: constant */
    bool single;  /* one value, returned as a scalar (count 1; not char) */
} out_size;

typedef struct ffi_tool {
    char *name;
    char *library;
    char *symbol;
    char *description;
    wf_proto proto;
    void *lib;                  /* dlopen handle (one reference per tool) */
    void *fn;
    void (*free_fn)(void *);    /* frees a 'char *' return; NULL = never */
    bool parallel;
    bool idempotent;            /* WEIR_TOOL_IDEMPOTENT */
    bool background;            /* WEIR_TOOL_BACKGROUND */
    bool inline_call;           /* WEIR_TOOL_INLINE */
    int key_param;              /* the parameter the key goes to; -1: none */
    ffi_cif cif;
    ffi_type *atypes[WF_MAX_PARAMS];
    out_size outs[WF_MAX_PARAMS]; /* by parameter index; set for out-parameters */
    json_t *schema;
} ffi_tool;

typedef struct state {
    ffi_tool *tools;
    size_t n;
} state;

static const char config_schema[] =
    "{\"type\":\"object\",\"required\":[\"tools\"],\"additionalProperties\":false,"
    "\"properties\":{\"tools\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"required\":[\"library\",\"symbol\",\"prototype\"],\"additionalProperties\":false,"
    "\"properties\":{\"library\":{\"type\":\"string\",\"minLength\":1},"
    "\"symbol\":{\"type\":\"string\",\"minLength\":1},"
    "\"prototype\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"name\":{\"type\":\"string\",\"minLength\":1},"
    /* A bare name passes the schema only so that init can refuse it naming the tool. */
    "\"out\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":1,"
    "\"description\":\"a bare name has no size: refused at init\"},"
    "{\"type\":\"object\",\"required\":[\"name\",\"count\"],\"additionalProperties\":false,"
    "\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1},"
    "\"count\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":1},"
    "{\"type\":\"string\",\"minLength\":1}]},"
    "\"max\":{\"type\":\"integer\",\"minimum\":1}}}]}},"
    "\"returns_owned\":{\"type\":\"object\",\"required\":[\"free\"],"
    "\"additionalProperties\":false,\"properties\":{\"free\":{\"type\":\"string\","
    "\"minLength\":1}}},"
    "\"parallel\":{\"type\":\"boolean\"},"
    "\"idempotent\":{\"type\":\"boolean\"},"
    "\"background\":{\"type\":\"boolean\"},"
    "\"inline\":{\"type\":\"boolean\"},"
    "\"idempotency_key\":{\"type\":\"string\",\"minLength\":1}}}}}}";

static int set_err(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int set_err(weir_error *err, int code, const char *fmt, ...) {
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    err->code = (weir_status)code;
    snprintf(err->plugin, sizeof err->plugin, "%s", PLUGIN_NAME);
    err->hook[0] = '\0';
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

_Static_assert(sizeof(long long) == 8, "long long must be 64 bits");
_Static_assert(sizeof(bool) == 1, "bool must be one byte");

static ffi_type *ffi_of(wf_type t) {
    switch (t) {
    case WF_VOID: return &ffi_type_void;
    case WF_BOOL: return &ffi_type_uint8;
    case WF_CHAR: return CHAR_MIN < 0 ? &ffi_type_schar : &ffi_type_uchar;
    case WF_SCHAR: return &ffi_type_schar;
    case WF_UCHAR: return &ffi_type_uchar;
    case WF_SHORT: return &ffi_type_sshort;
    case WF_USHORT: return &ffi_type_ushort;
    case WF_INT: return &ffi_type_sint;
    case WF_UINT: return &ffi_type_uint;
    case WF_LONG: return &ffi_type_slong;
    case WF_ULONG: return &ffi_type_ulong;
    case WF_LLONG: return &ffi_type_sint64;
    case WF_ULLONG: return &ffi_type_uint64;
    case WF_SIZE: return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32;
    case WF_SSIZE: return sizeof(ssize_t) == 8 ? &ffi_type_sint64 : &ffi_type_sint32;
    case WF_I8: return &ffi_type_sint8;
    case WF_I16: return &ffi_type_sint16;
    case WF_I32: return &ffi_type_sint32;
    case WF_I64: return &ffi_type_sint64;
    case WF_U8: return &ffi_type_uint8;
    case WF_U16: return &ffi_type_uint16;
    case WF_U32: return &ffi_type_uint32;
    case WF_U64: return &ffi_type_uint64;
    case WF_FLOAT: return &ffi_type_float;
    case WF_DOUBLE: return &ffi_type_double;
    case WF_STRING:
    case WF_STRING_OWNED: return &ffi_type_pointer;
    }
    return &ffi_type_void;
}

/* The C range of an integer type. */
static void int_range(wf_type t, long long *min, unsigned long long *max) {
    switch (t) {
    case WF_SCHAR: *min = SCHAR_MIN; *max = SCHAR_MAX; return;
    case WF_UCHAR: *min = 0; *max = UCHAR_MAX; return;
    case WF_SHORT: *min = SHRT_MIN; *max = SHRT_MAX; return;
    case WF_USHORT: *min = 0; *max = USHRT_MAX; return;
    case WF_INT: *min = INT_MIN; *max = INT_MAX; return;
    case WF_UINT: *min = 0; *max = UINT_MAX; return;
    case WF_LONG: *min = LONG_MIN; *max = (unsigned long long)LONG_MAX; return;
    case WF_ULONG: *min = 0; *max = ULONG_MAX; return;
    case WF_LLONG: *min = LLONG_MIN; *max = LLONG_MAX; return;
    case WF_ULLONG: *min = 0; *max = ULLONG_MAX; return;
    case WF_SIZE: *min = 0; *max = SIZE_MAX; return;
    case WF_SSIZE: *min = sizeof(ssize_t) == 8 ? LLONG_MIN : INT_MIN;
                   *max = sizeof(ssize_t) == 8 ? LLONG_MAX : INT_MAX; return;
    case WF_I8: *min = INT8_MIN; *max = INT8_MAX; return;
    case WF_I16: *min = INT16_MIN; *max = INT16_MAX; return;
    case WF_I32: *min = INT32_MIN; *max = INT32_MAX; return;
    case WF_I64: *min = INT64_MIN; *max = INT64_MAX; return;
    case WF_U8: *min = 0; *max = UINT8_MAX; return;
    case WF_U16: *min = 0; *max = UINT16_MAX; return;
    case WF_U32: *min = 0; *max = UINT32_MAX; return;
    case WF_U64: *min = 0; *max = UINT64_MAX; return;
    default: *min = 0; *max = 0; return;
    }
}

static bool is_signed_int(wf_type t) {
    long long min;
    unsigned long long max;
    int_range(t, &min, &max);
    return min < 0;
}

/* The JSON Schema of one parameter (new reference). */
static json_t *param_schema(wf_type t) {
    if (t == WF_BOOL)
        return json_pack("{s:s}", "type", "boolean");
    if (t == WF_CHAR)
        return json_pack("{s:s, s:i, s:i}", "type", "string", "minLength", 1, "maxLength", 1);
    if (t == WF_FLOAT || t == WF_DOUBLE)
        return json_pack("{s:s}", "type", "number");
    if (t == WF_STRING)
        return json_pack("{s:s}", "type", "string");
    long long min;
    unsigned long long max;
    int_range(t, &min, &max);
    /* JSON integers stop at LLONG_MAX (jansson's json_int_t). */
    json_int_t jmax = max > (unsigned long long)LLONG_MAX ? LLONG_MAX : (json_int_t)max;
    return json_pack("{s:s, s:I, s:I}", "type", "integer", "minimum", (json_int_t)min,
                     "maximum", jmax);
}

/* One argument or out-parameter value. */
typedef union val {
    bool b;
    char c;
    signed char sc;
    unsigned char uc;
    short s;
    unsigned short us;
    int i;
    unsigned int u;
    long l;
    unsigned long ul;
    long long ll;
    unsigned long long ull;
    size_t z;
    ssize_t sz;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
    const char *str;
    void *ptr;
} val;

/* Store an in-range integer as type t (signed value in sv, unsigned in uv). */
static void store_int(wf_type t, long long sv, unsigned long long uv, val *v) {
    switch (t) {
    case WF_SCHAR: v->sc = (signed char)sv; break;
    case WF_UCHAR: v->uc = (unsigned char)uv; break;
    case WF_SHORT: v->s = (short)sv; break;
    case WF_USHORT: v->us = (unsigned short)uv; break;
    case WF_INT: v->i = (int)sv; break;
    case WF_UINT: v->u = (unsigned int)uv; break;
    case WF_LONG: v->l = (long)sv; break;
    case WF_ULONG: v->ul = (unsigned long)uv; break;
    case WF_LLONG: v->ll = sv; break;
    case WF_ULLONG: v->ull = uv; break;
    case WF_SIZE: v->z = (size_t)uv; break;
    case WF_SSIZE: v->sz = (ssize_t)sv; break;
    case WF_I8: v->i8 = (int8_t)sv; break;
    case WF_I16: v->i16 = (int16_t)sv; break;
    case WF_I32: v->i32 = (int32_t)sv; break;
    case WF_I64: v->i64 = sv; break;
    case WF_U8: v->u8 = (uint8_t)uv; break;
    case WF_U16: v->u16 = (uint16_t)uv; break;
    case WF_U32: v->u32 = (uint32_t)uv; break;
    case WF_U64: v->u64 = uv; break;
    default: break;
    }
}

/* Read an integer of type t from v. */
static void load_int(wf_type t, const val *v, long long *sv, unsigned long long *uv) {
    *sv = 0;
    *uv = 0;
    switch (t) {
    case WF_SCHAR: *sv = v->sc; break;
    case WF_UCHAR: *uv = v->uc; break;
    case WF_SHORT: *sv = v->s; break;
    case WF_USHORT: *uv = v->us; break;
    case WF_INT: *sv = v->i; break;
    case WF_UINT: *uv = v->u; break;
    case WF_LONG: *sv = v->l; break;
    case WF_ULONG: *uv = v->ul; break;
    case WF_LLONG: *sv = v->ll; break;
    case WF_ULLONG: *uv = v->ull; break;
    case WF_SIZE: *uv = v->z; break;
    case WF_SSIZE: *sv = v->sz; break;
    case WF_I8: *sv = v->i8; break;
    case WF_I16: *sv = v->i16; break;
    case WF_I32: *sv = v->i32; break;
    case WF_I64: *sv = v->i64; break;
    case WF_U8: *uv = v->u8; break;
    case WF_U16: *uv = v->u16; break;
    case WF_U32: *uv = v->u32; break;
    case WF_U64: *uv = v->u64; break;
    default: break;
    }
}

/* ------------------------------------------------------------------------ */
/* Rendering results as JSON text                                            */
/* ------------------------------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* A JSON string literal for `s` (bytes >= 0x80 that are not valid UTF-8 become '?'). */
static void buf_json_string(buf *b, const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    char *fixed = NULL;
    if (!j) {
        fixed = malloc(n + 1);
        if (!fixed) {
            b->oom = true;
            return;
        }
        for (size_t i = 0; i < n; i++)
            fixed[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
        fixed[n] = '\0';
        j = json_stringn(fixed, n);
    }
    char *text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    free(fixed);
    if (!text) {
        b->oom = true;
        return;
    }
    buf_str(b, text);
    free(text);
}

static void buf_double(buf *b, double d, bool is_float) {
    if (isnan(d)) {
        buf_str(b, "\"NaN\"");
        return;
    }
    if (isinf(d)) {
        buf_str(b, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    char tmp[64];
    /* The shortest %g precision that reads back to the same value. */
    for (int prec = is_float ? 6 : 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (is_float ? (float)strtod(tmp, NULL) == (float)d : strtod(tmp, NULL) == d)
            break;
    }
    buf_str(b, tmp);
}

/* Append the JSON text of a value of type t. */
static void buf_value(buf *b, wf_type t, const val *v) {
    char tmp[64];
    if (wf_type_is_integer(t)) {
        long long sv;
        unsigned long long uv;
        load_int(t, v, &sv, &uv);
        if (is_signed_int(t))
            snprintf(tmp, sizeof tmp, "%lld", sv);
        else
            snprintf(tmp, sizeof tmp, "%llu", uv);
        buf_str(b, tmp);
        return;
    }
    switch (t) {
    case WF_VOID: buf_str(b, "null"); break;
    case WF_BOOL: buf_str(b, v->b ? "true" : "false"); break;
    case WF_CHAR:
        if ((unsigned char)v->c < 0x80)
            buf_json_string(b, &v->c, 1);
        else {
            snprintf(tmp, sizeof tmp, "%u", (unsigned)(unsigned char)v->c);
            buf_str(b, tmp);
        }
        break;
    case WF_FLOAT: buf_double(b, v->f, true); break;
    case WF_DOUBLE: buf_double(b, v->d, false); break;
    case WF_STRING:
    case WF_STRING_OWNED:
        if (v->str)
            buf_json_string(b, v->str, strlen(v->str));
        else
            buf_str(b, "null");
        break;
    default: buf_str(b, "null"); break;
    }
}

/* ------------------------------------------------------------------------ */
/* Calling                                                                   */
/* ------------------------------------------------------------------------ */

/* Convert argument `j` for parameter `p` into `v`; false after exec_fail. */
static bool convert(weir_tool_exec *exec, const wf_param *p, const json_t *j, val *v) {
    const char *tn = wf_type_name(p->type);
    if (!j) {
        weir_tool_exec_fail(exec, "INVALID_ARGUMENTS", "argument '%s' is missing", p->name);
        return false;
    }
    if (wf_type_is_integer(p->type)) {
        if (!json_is_integer(j)) {
            weir_tool_exec_fail(exec, "INVALID_ARGUMENTS", "argument '%s': expected an integer",
                                p->name);
            return false;
        }
        long long x = json_integer_value(j), min;
        unsigned long long max;
        int_range(p->type, &min, &max);
        if (x < min || (x > 0 && (unsigned long long)x > max)) {
            if (min < 0)
                weir_tool_exec_fail(exec, "OUT_OF_RANGE",
                                    "argument '%s': %lld is out of range for %s [%lld, %llu]",
                                    p->name, x, tn, min, max);
            else
                weir_tool_exec_fail(exec, "OUT_OF_RANGE",
                                    "argument '%s': %lld is out of range for %s [0, %llu]",
                                    p->name, x, tn, max);
            return false;
        }
        store_int(p->type, x, (unsigned long long)x, v);
        return true;
    }
    switch (p->type) {
    case WF_BOOL:
        if (!json_is_boolean(j))
            break;
        v->b = json_is_true(j);
        return true;
    case WF_CHAR:
        if (!json_is_string(j) || json_string_length(j) != 1 ||
            (unsigned char)json_string_value(j)[0] >= 0x80)
            break;
        v->c = json_string_value(j)[0];
        return true;
    case WF_FLOAT:
    case WF_DOUBLE: {
        if (!json_is_number(j))
            break;
        double d = json_number_value(j);
        if (p->type == WF_FLOAT && fabs(d) > FLT_MAX) {
            weir_tool_exec_fail(exec, "OUT_OF_RANGE",
                                "argument '%s': %g is out of range for float", p->name, d);
            return false;
        }
        if (p->type == WF_FLOAT)
            v->f = (float)d;
        else
            v->d = d;
        return true;
    }
    case WF_STRING:
        if (!json_is_string(j))
            break;
        if (strlen(json_string_value(j)) != json_string_length(j)) {
            weir_tool_exec_fail(exec, "INVALID_ARGUMENTS",
                                "argument '%s': strings may not contain NUL characters",
                                p->name);
            return false;
        }
        v->str = json_string_value(j);
        return true;
    default:
        break;
    }
    weir_tool_exec_fail(exec, "INVALID_ARGUMENTS", "argument '%s': expected %s", p->name,
                        p->type == WF_BOOL   ? "a boolean"
                        : p->type == WF_CHAR ? "a single ASCII character"
                        : p->type == WF_STRING ? "a string"
                                               : "a number");
    return false;
}

/* Read the return value libffi stored in rv (integers are widened to ffi_arg). */
static void read_return(wf_type t, const void *rv, val *out) {
    memset(out, 0, sizeof *out);
    if (t == WF_VOID)
        return;
    if (t == WF_FLOAT || t == WF_DOUBLE || t == WF_STRING || t == WF_STRING_OWNED) {
        memcpy(out, rv, t == WF_FLOAT ? sizeof(float) : t == WF_DOUBLE ? sizeof(double)
                                                                       : sizeof(void *));
        return;
    }
    size_t size = ffi_of(t)->size;
    if (size >= sizeof(ffi_arg)) {
        memcpy(out, rv, size);
        return;
    }
    /* Narrow integers come back as a full ffi_arg (sign- or zero-extended). */
    ffi_arg a;
    memcpy(&a, rv, sizeof a);
    if (t == WF_BOOL)
        out->b = a != 0;
    else if (t == WF_CHAR)
        out->c = (char)a;
    else
        store_int(t, (long long)(ffi_sarg)a, (unsigned long long)a, out);
}

/* Element k of an out buffer of type t, as a val. */
static void load_elem(wf_type t, const void *base, size_t k, val *v) {
    size_t size = ffi_of(t)->size;
    const unsigned char *p = (const unsigned char *)base + k * size;
    memset(v, 0, sizeof *v);
    if (t == WF_BOOL)
        v->b = p[0] != 0; /* a C bool may hold any byte; never load it as bool */
    else
        memcpy(v, p, size); /* every member of val starts at its first byte */
}

/* Append out-parameter `p`, which holds `count` elements at `base`. */
static void buf_out(buf *b, const wf_param *p, const out_size *os, const void *base,
                    size_t count) {
    if (p->type == WF_CHAR) { /* a string: up to the first NUL or count bytes */
        const char *s = base, *nul = memchr(s, '\0', count);
        buf_json_string(b, s, nul ? (size_t)(nul - s) : count);
        return;
    }
    val v;
    if (os->single) {
        load_elem(p->type, base, 0, &v);
        buf_value(b, p->type, &v);
        return;
    }
    buf_str(b, "[");
    for (size_t k = 0; k < count && !b->oom; k++) {
        if (k)
            buf_str(b, ",");
        load_elem(p->type, base, k, &v);
        buf_value(b, p->type, &v);
    }
    buf_str(b, "]");
}

/*
 * The number of elements of out-parameter i for this call: its constant
 * count, or the value of its count argument once that is within 0..max;
 * false after exec_fail.
 */
static bool out_count(weir_tool_exec *exec, const ffi_tool *t, size_t i, const val *vals,
                      size_t *count) {
    const out_size *os = &t->outs[i];
    if (os->arg < 0) {
        *count = os->count;
        return true;
    }
    const wf_param *cp = &t->proto.params[os->arg];
    long long sv;
    unsigned long long uv;
    load_int(cp->type, &vals[os->arg], &sv, &uv);
    bool is_signed = is_signed_int(cp->type);
    if (is_signed ? sv >= 0 && (unsigned long long)sv <= os->count : uv <= os->count) {
        *count = is_signed ? (size_t)sv : (size_t)uv;
        return true;
    }
    char value[32];
    if (is_signed)
        snprintf(value, sizeof value, "%lld", sv);
    else
        snprintf(value, sizeof value, "%llu", uv);
    weir_tool_exec_fail(exec, "OUT_OF_RANGE",
                        "argument '%s': %s is out of range for the size of out-parameter '%s' "
                        "[0, %zu]",
                        cp->name, value, t->proto.params[i].name, os->count);
    return false;
}

static void free_outs(void **bufs, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
}

static int execute(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    ffi_tool *t = ud;
    const wf_proto *pr = &t->proto;
    val vals[WF_MAX_PARAMS];
    size_t counts[WF_MAX_PARAMS] = {0};
    void *bufs[WF_MAX_PARAMS] = {NULL};
    void *avalues[WF_MAX_PARAMS];
    memset(vals, 0, sizeof vals);
    for (size_t i = 0; i < pr->nparams; i++) {
        const wf_param *p = &pr->params[i];
        avalues[i] = &vals[i];
        if ((int)i == t->key_param)
            vals[i].str = weir_tool_exec_idempotency_key(exec); /* valid during the call */
        else if (!p->out && !convert(exec, p, json_object_get(args, p->name), &vals[i]))
            return WEIR_E_INVAL;
    }
    /* Every size is checked before anything is allocated or called. */
    for (size_t i = 0; i < pr->nparams; i++)
        if (pr->params[i].out && !out_count(exec, t, i, vals, &counts[i]))
            return WEIR_E_INVAL;
    for (size_t i = 0; i < pr->nparams; i++) {
        const wf_param *p = &pr->params[i];
        if (!p->out)
            continue;
        /*
         * Zeroed, exactly counts[i] elements; a char buffer has a spare NUL
         * after them.  A count of 0 still passes a valid pointer (one element).
         */
        size_t n = counts[i] + (p->type == WF_CHAR);
        bufs[i] = calloc(n ? n : 1, ffi_of(p->type)->size);
        if (!bufs[i]) {
            free_outs(bufs, i);
            weir_tool_exec_fail(exec, "TOOL_ERROR", "out of memory");
            return WEIR_E_NOMEM;
        }
        vals[i].ptr = bufs[i];
    }
    union {
        ffi_arg a;
        double d;
        float f;
        void *p;
        uint64_t u64;
    } rv;
    memset(&rv, 0, sizeof rv);
    ffi_call(&t->cif, FFI_FN(t->fn), &rv, pr->nparams ? avalues : NULL);
    val ret;
    read_return(pr->ret, &rv, &ret);
    bool has_out = false;
    for (size_t i = 0; i < pr->nparams; i++)
        has_out |= pr->params[i].out;
    buf b = {0};
    if (!has_out) {
        buf_value(&b, pr->ret, &ret);
    } else {
        buf_str(&b, "{");
        bool first = true;
        if (pr->ret != WF_VOID) {
            buf_str(&b, "\"return\":");
            buf_value(&b, pr->ret, &ret);
            first = false;
        }
        for (size_t i = 0; i < pr->nparams; i++) {
            if (!pr->params[i].out)
                continue;
            buf_str(&b, first ? "\"" : ",\"");
            buf_str(&b, pr->params[i].name);
            buf_str(&b, "\":");
            buf_out(&b, &pr->params[i], &t->outs[i], bufs[i], counts[i]);
            first = false;
        }
        buf_str(&b, "}");
    }
    free_outs(bufs, pr->nparams);
    if (pr->ret == WF_STRING_OWNED && ret.ptr && t->free_fn)
        t->free_fn(ret.ptr);
    if (b.oom || !b.p) {
        free(b.p);
        weir_tool_exec_fail(exec, "TOOL_ERROR", "out of memory");
        return WEIR_E_NOMEM;
    }
    *result = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", b.p);
    free(b.p);
    if (!*result) {
        weir_tool_exec_fail(exec, "TOOL_ERROR", "out of memory");
        return WEIR_E_NOMEM;
    }
    return WEIR_OK;
}

static int parallel_safe(const json_t *args, void *ud) {
    (void)args;
    const ffi_tool *t = ud;
    return t->parallel ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Init                                                                      */
/* ------------------------------------------------------------------------ */

static void state_free(state *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        ffi_tool *t = &s->tools[i];
        free(t->name);
        free(t->library);
        free(t->symbol);
        free(t->description);
        json_decref(t->schema);
#ifndef WEIR_SANITIZED
        if (t->lib)
            dlclose(t->lib);
#endif
    }
    free(s->tools);
    free(s);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int find_param(const wf_proto *pr, const char *name) {
    for (size_t k = 0; k < pr->nparams; k++)
        if (strcmp(pr->params[k].name, name) == 0)
            return (int)k;
    return -1;
}

/*
 * An out-parameter without a declared size (`where` names the row and the
 * tool): not listed in "out", or listed by a bare name.  A prototype cannot
 * say how many elements the function writes, so there is no default.
 */
static int unsized(const char *where, const wf_param *p, bool bare, weir_error *err) {
    const char *n = p->name;
    return set_err(err, WEIR_E_PLUGIN_CONFIG,
                   "%s: out-parameter '%s' ('%s *%s') %s as {\"name\": \"%s\", \"count\": 1} "
                   "for one value, {\"name\": \"%s\", \"count\": N} for N values, or "
                   "{\"name\": \"%s\", \"count\": \"<argument>\", \"max\": N} for as many as "
                   "an integer argument says, at most N",
                   where, n, wf_type_name(p->type), n,
                   bare ? "has no size: a bare name in \"out\" is not accepted; declare it"
                        : "is not declared; declare it in \"out\"",
                   n, n, n);
}

/* Refuse a count or max above OUT_MAX_BYTES for elements of type `et`. */
static int check_limit(const char *where, const char *name, const char *key, json_int_t v,
                       wf_type et, weir_error *err) {
    size_t most = OUT_MAX_BYTES / ffi_of(et)->size;
    if ((unsigned long long)v <= most)
        return WEIR_OK;
    return set_err(err, WEIR_E_PLUGIN_CONFIG,
                   "%s: out-parameter '%s': %s %lld is more than %zu, the most '%s' elements "
                   "within the 1 MiB limit",
                   where, name, key, (long long)v, most, wf_type_name(et));
}

/*
 * Read the row's "out" into t->outs: every pointer parameter of the prototype
 * must be listed once, as an object with a size (a bare name is refused).
 */
static int check_out(ffi_tool *t, const char *where, const json_t *out, weir_error *err) {
    wf_proto *pr = &t->proto;
    bool listed[WF_MAX_PARAMS] = {false};
    size_t i;
    const json_t *o;
    json_array_foreach(out, i, o) {
        const char *name = json_is_string(o) ? json_string_value(o)
                                             : json_string_value(json_object_get(o, "name"));
        int k = find_param(pr, name);
        if (k < 0)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: out: '%s' is not a parameter of the prototype", where, name);
        const wf_param *p = &pr->params[k];
        if (!p->out)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: out: parameter '%s' is not a pointer ('%s *%s')", where, name,
                           wf_type_name(p->type), name);
        if (listed[k])
            return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: out: parameter '%s' is listed twice",
                           where, name);
        listed[k] = true;
        out_size *os = &t->outs[k];
        if (json_is_string(o)) /* a bare name: no size, whatever the type */
            return unsized(where, p, true, err);
        const json_t *count = json_object_get(o, "count"), *max = json_object_get(o, "max");
        int rc;
        if (json_is_integer(count)) {
            if (max)
                return set_err(err, WEIR_E_PLUGIN_CONFIG,
                               "%s: out-parameter '%s': \"max\" applies only to a count that "
                               "names an argument",
                               where, name);
            json_int_t c = json_integer_value(count); /* >= 1: the config schema */
            if ((rc = check_limit(where, name, "count", c, p->type, err)) != WEIR_OK)
                return rc;
            *os = (out_size){.count = (size_t)c, .arg = -1,
                             .single = c == 1 && p->type != WF_CHAR};
            continue;
        }
        const char *cname = json_string_value(count);
        int c = find_param(pr, cname);
        if (c < 0)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: out-parameter '%s': count '%s' is not a parameter of the "
                           "prototype",
                           where, name, cname);
        const wf_param *cp = &pr->params[c];
        if (cp->out || !wf_type_is_integer(cp->type))
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: out-parameter '%s': count '%s' must be an integer argument, "
                           "not %s '%s%s'",
                           where, name, cname, cp->out ? "the out-parameter" : "a",
                           wf_type_name(cp->type), cp->out ? " *" : "");
        if (!max)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: out-parameter '%s': count '%s' names an argument, so \"max\" "
                           "(the most elements the model may ask for) is required",
                           where, name, cname);
        json_int_t m = json_integer_value(max); /* >= 1: the config schema */
        if ((rc = check_limit(where, name, "max", m, p->type, err)) != WEIR_OK)
            return rc;
        *os = (out_size){.count = (size_t)m, .arg = c, .single = false};
    }
    for (size_t k = 0; k < pr->nparams; k++)
        if (pr->params[k].out && !listed[k])
            return unsized(where, &pr->params[k], false, err);
    return WEIR_OK;
}

/* A count argument's schema allows 0 .. the smallest "max" among the buffers it sizes. */
static int narrow_count_schemas(const ffi_tool *t, json_t *props) {
    const wf_proto *pr = &t->proto;
    for (size_t k = 0; k < pr->nparams; k++) {
        const out_size *os = &t->outs[k];
        if (!pr->params[k].out || os->arg < 0)
            continue;
        json_t *ps = json_object_get(props, pr->params[os->arg].name);
        json_int_t max = json_integer_value(json_object_get(ps, "maximum"));
        if ((unsigned long long)max > os->count)
            max = (json_int_t)os->count;
        if (json_object_set_new(ps, "minimum", json_integer(0)) != 0 ||
            json_object_set_new(ps, "maximum", json_integer(max)) != 0)
            return WEIR_E_NOMEM;
    }
    return WEIR_OK;
}

static int setup_tool(ffi_tool *t, const char *row_id, size_t index, const json_t *row,
                      weir_error *err) {
    const char *library = json_string_value(json_object_get(row, "library"));
    const char *symbol = json_string_value(json_object_get(row, "symbol"));
    const char *prototype = json_string_value(json_object_get(row, "prototype"));
    const char *name = json_string_value(json_object_get(row, "name"));
    const char *desc = json_string_value(json_object_get(row, "description"));
    const json_t *owned = json_object_get(row, "returns_owned");
    t->name = dup_str(name ? name : symbol);
    t->library = dup_str(library);
    t->symbol = dup_str(symbol);
    t->description = dup_str(desc ? desc : prototype);
    t->parallel = json_is_true(json_object_get(row, "parallel"));
    t->idempotent = json_is_true(json_object_get(row, "idempotent"));
    t->background = json_is_true(json_object_get(row, "background"));
    t->inline_call = json_is_true(json_object_get(row, "inline"));
    t->key_param = -1;
    if (!t->name || !t->library || !t->symbol || !t->description)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    /* Errors name the tool, the deployment row and the index of the tool's row. */
    char where[2 * WF_MAX_NAME + 256];
    snprintf(where, sizeof where, "tool '%.100s' (row '%.64s', tools[%zu])", t->name, row_id,
             index);
    char msg[200];
    if (wf_proto_parse(prototype, &t->proto, msg, sizeof msg) != 0)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: prototype: %s", where, msg);
    wf_proto *pr = &t->proto;
    if (strcmp(pr->name, symbol) != 0)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "%s: the prototype names '%s' but the symbol is '%s'", where, pr->name,
                       symbol);
    if (t->inline_call && t->background)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "%s: \"inline\" and \"background\" exclude each other (a background "
                       "job runs on the tool pool)",
                       where);
    int rc = check_out(t, where, json_object_get(row, "out"), err);
    if (rc != WEIR_OK)
        return rc;
    const char *key = json_string_value(json_object_get(row, "idempotency_key"));
    if (key) {
        int k = find_param(pr, key);
        if (k < 0)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: idempotency_key: '%s' is not a parameter of the prototype",
                           where, key);
        if (pr->params[k].out || pr->params[k].type != WF_STRING)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: idempotency_key: parameter '%s' must be 'const char *', not "
                           "'%s%s'",
                           where, key, wf_type_name(pr->params[k].type),
                           pr->params[k].out ? " *" : "");
        t->key_param = k;
    }
    const char *free_mode = json_string_value(json_object_get(owned, "free"));
    if (pr->ret == WF_STRING_OWNED && !free_mode)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "%s: a 'char *' return needs \"returns_owned\": {\"free\": \"free\" | "
                       "\"none\" | \"<symbol>\"}",
                       where);
    if (pr->ret != WF_STRING_OWNED && owned)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "%s: \"returns_owned\" applies only to a 'char *' return", where);
    t->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!t->lib)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: cannot open library '%s': %s", where,
                       library, dlerror());
    dlerror();
    t->fn = dlsym(t->lib, symbol);
    if (!t->fn)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: symbol '%s' not found in library '%s'",
                       where, symbol, library);
    if (free_mode && strcmp(free_mode, "free") == 0) {
        t->free_fn = free;
    } else if (free_mode && strcmp(free_mode, "none") != 0) {
        void *f = dlsym(t->lib, free_mode);
        if (!f)
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "%s: free function '%s' not found in library '%s'", where, free_mode,
                           library);
        memcpy(&t->free_fn, &f, sizeof f); /* object pointer -> function pointer */
    }
    json_t *props = json_object(), *required = json_array();
    t->schema = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props,
                          "required", required, "additionalProperties", 0);
    if (!t->schema)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < pr->nparams; i++) {
        const wf_param *p = &pr->params[i];
        t->atypes[i] = p->out ? &ffi_type_pointer : ffi_of(p->type);
        if (p->out || (int)i == t->key_param)
            continue;
        if (json_object_set_new(props, p->name, param_schema(p->type)) != 0 ||
            json_array_append_new(required, json_string(p->name)) != 0)
            return set_err(err, WEIR_E_NOMEM, "out of memory");
    }
    if (narrow_count_schemas(t, props) != WEIR_OK)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    ffi_status st = ffi_prep_cif(&t->cif, FFI_DEFAULT_ABI, (unsigned)pr->nparams,
                                 ffi_of(pr->ret), pr->nparams ? t->atypes : NULL);
    if (st != FFI_OK)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: ffi_prep_cif failed (status %d)",
                       where, (int)st);
    return WEIR_OK;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    json_t *schema = json_loads(config_schema, 0, NULL);
    if (!schema)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    char msg[512];
    int bad = weir_schema_validate(schema, config, msg, sizeof msg);
    json_decref(schema);
    if (bad)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "config: %s", msg);
    const json_t *rows = json_object_get(config, "tools");
    state *s = calloc(1, sizeof *s);
    if (s && json_array_size(rows))
        s->tools = calloc(json_array_size(rows), sizeof *s->tools);
    if (!s || (json_array_size(rows) && !s->tools)) {
        state_free(s);
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    }
    size_t i;
    const json_t *row;
    int rc = WEIR_OK;
    json_array_foreach(rows, i, row) {
        ffi_tool *t = &s->tools[s->n++];
        rc = setup_tool(t, weir_plugin_id(self), i, row, err);
        if (rc != WEIR_OK)
            break;
        weir_tool tool = {
            .struct_size = sizeof(weir_tool),
            .name = t->name,
            .description = t->description,
            .parameters = t->schema,
            .flags = (t->idempotent ? WEIR_TOOL_IDEMPOTENT : 0u) |
                     (t->background ? WEIR_TOOL_BACKGROUND : 0u) |
                     (t->inline_call ? WEIR_TOOL_INLINE : 0u),
            .execute = execute,
            .concurrency_safe = parallel_safe,
            .user_data = t,
        };
        rc = weir_tool_register(self, &tool);
        if (rc != WEIR_OK)
            break; /* err stays empty: the host reports the registry's reason */
    }
    if (rc != WEIR_OK) {
        state_free(s);
        return rc;
    }
    weir_plugin_set_data(self, s);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { state_free(weir_plugin_data(self)); }

static const weir_plugin_desc descriptor = {
    WEIR_PLUGIN_HEADER,
    .name = PLUGIN_NAME,
    .version = "0.1.0",
    .description = "C functions from shared libraries as tools (libffi)",
    .config_schema = config_schema,
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(descriptor)
