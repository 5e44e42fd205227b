/*
 * plugins/tools-ffi/ffi_proto.c - the C prototype parser (see ffi_proto.h).
 */
#include "ffi_proto.h"

#include <stdio.h>
#include <string.h>

typedef enum tok_kind { T_END, T_IDENT, T_STAR, T_LPAREN, T_RPAREN, T_COMMA, T_SEMI, T_BAD } tok_kind;

typedef struct tok {
    tok_kind kind;
    const char *start;
    size_t len;
    int column; /* 1-based */
} tok;

typedef struct parser {
    const char *text;
    size_t pos;
    tok cur;
    char *msg;
    size_t msg_size;
    bool failed;
} parser;

static bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_alnum(char c) { return is_alpha(c) || (c >= '0' && c <= '9'); }

static void advance(parser *p) {
    const char *s = p->text;
    while (s[p->pos] == ' ' || s[p->pos] == '\t' || s[p->pos] == '\n' || s[p->pos] == '\r')
        p->pos++;
    tok t = {T_END, s + p->pos, 0, (int)p->pos + 1};
    char c = s[p->pos];
    if (c == '\0') {
        p->cur = t;
        return;
    }
    if (is_alpha(c)) {
        size_t n = 0;
        while (is_alnum(s[p->pos + n]))
            n++;
        t.kind = T_IDENT;
        t.len = n;
    } else {
        t.len = 1;
        t.kind = c == '*' ? T_STAR
               : c == '(' ? T_LPAREN
               : c == ')' ? T_RPAREN
               : c == ',' ? T_COMMA
               : c == ';' ? T_SEMI
                          : T_BAD;
    }
    p->pos += t.len;
    p->cur = t;
}

static int fail_at(parser *p, int column, const char *what) {
    if (!p->failed && p->msg && p->msg_size)
        snprintf(p->msg, p->msg_size, "column %d: %s", column, what);
    p->failed = true;
    return -1;
}

/* "expected X" at the current token, naming an unexpected character. */
static int expected(parser *p, const char *what) {
    char buf[160];
    if (p->cur.kind == T_BAD) {
        unsigned char c = (unsigned char)p->cur.start[0];
        if (c >= 0x20 && c < 0x7f)
            snprintf(buf, sizeof buf, "%s, found '%c'", what, c);
        else
            snprintf(buf, sizeof buf, "%s, found byte 0x%02x", what, c);
    } else if (p->cur.kind == T_END) {
        snprintf(buf, sizeof buf, "%s, found the end of the text", what);
    } else {
        snprintf(buf, sizeof buf, "%s", what);
    }
    return fail_at(p, p->cur.column, buf);
}

static bool tok_is(const tok *t, const char *word) {
    return t->kind == T_IDENT && strlen(word) == t->len && memcmp(t->start, word, t->len) == 0;
}

typedef struct named {
    const char *word;
    wf_type type;
} named;

static const named NAMED[] = {
    {"void", WF_VOID},     {"bool", WF_BOOL},     {"_Bool", WF_BOOL},
    {"float", WF_FLOAT},   {"double", WF_DOUBLE}, {"size_t", WF_SIZE},
    {"ssize_t", WF_SSIZE}, {"int8_t", WF_I8},     {"int16_t", WF_I16},
    {"int32_t", WF_I32},   {"int64_t", WF_I64},   {"uint8_t", WF_U8},
    {"uint16_t", WF_U16},  {"uint32_t", WF_U32},  {"uint64_t", WF_U64},
};

static const char *const SPECIFIERS[] = {"const", "signed", "unsigned", "char",
                                         "short", "int",    "long"};

/* Any word that may not be used as a name. */
static bool is_keyword(const tok *t) {
    if (t->kind != T_IDENT)
        return false;
    for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++)
        if (tok_is(t, NAMED[i].word))
            return true;
    for (size_t i = 0; i < sizeof SPECIFIERS / sizeof SPECIFIERS[0]; i++)
        if (tok_is(t, SPECIFIERS[i]))
            return true;
    static const char *const other[] = {"struct", "union",  "enum",     "volatile",
                                        "static", "extern", "register", "restrict",
                                        "return", "typedef", "inline"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (tok_is(t, other[i]))
            return true;
    return false;
}

/* A parsed type before it is classified as return or parameter. */
typedef struct ptype {
    wf_type base;
    bool is_const;
    int stars;
    int column;      /* first token */
    int star_column; /* first '*' */
} ptype;

static int parse_type(parser *p, ptype *out) {
    int n_const = 0, n_signed = 0, n_unsigned = 0, n_char = 0, n_short = 0, n_int = 0,
        n_long = 0, n_named = 0;
    wf_type named_type = WF_VOID;
    memset(out, 0, sizeof *out);
    out->column = p->cur.column;
    for (;;) {
        const tok *t = &p->cur;
        if (t->kind != T_IDENT)
            break;
        bool hit = true;
        if (tok_is(t, "const"))
            n_const++;
        else if (tok_is(t, "signed"))
            n_signed++;
        else if (tok_is(t, "unsigned"))
            n_unsigned++;
        else if (tok_is(t, "char"))
            n_char++;
        else if (tok_is(t, "short"))
            n_short++;
        else if (tok_is(t, "int"))
            n_int++;
        else if (tok_is(t, "long"))
            n_long++;
        else {
            hit = false;
            for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++) {
                if (tok_is(t, NAMED[i].word)) {
                    n_named++;
                    named_type = NAMED[i].type;
                    hit = true;
                    break;
                }
            }
        }
        if (!hit)
            break;
        advance(p);
    }
    int n_spec = n_signed + n_unsigned + n_char + n_short + n_int + n_long;
    if (n_spec + n_named == 0) {
        if (p->cur.kind == T_IDENT && !is_keyword(&p->cur)) {
            char buf[WF_MAX_NAME + 40];
            snprintf(buf, sizeof buf, "unknown type '%.*s'",
                     (int)(p->cur.len < WF_MAX_NAME ? p->cur.len : WF_MAX_NAME),
                     p->cur.start);
            return fail_at(p, p->cur.column, buf);
        }
        return expected(p, "expected a type");
    }
    if (n_named > 1 || (n_named && n_spec) || n_signed > 1 || n_unsigned > 1 ||
        (n_signed && n_unsigned) || n_char > 1 || n_short > 1 || n_int > 1 || n_long > 2 ||
        (n_char && (n_short || n_int || n_long)) || (n_short && n_long))
        return fail_at(p, out->column, "invalid combination of type specifiers");
    out->is_const = n_const > 0;
    if (n_named)
        out->base = named_type;
    else if (n_char)
        out->base = n_signed ? WF_SCHAR : n_unsigned ? WF_UCHAR : WF_CHAR;
    else if (n_short)
        out->base = n_unsigned ? WF_USHORT : WF_SHORT;
    else if (n_long == 2)
        out->base = n_unsigned ? WF_ULLONG : WF_LLONG;
    else if (n_long == 1)
        out->base = n_unsigned ? WF_ULONG : WF_LONG;
    else
        out->base = n_unsigned ? WF_UINT : WF_INT;
    while (p->cur.kind == T_STAR) {
        if (out->stars == 0)
            out->star_column = p->cur.column;
        out->stars++;
        advance(p);
    }
    if (out->stars > 1)
        return fail_at(p, out->star_column, "pointers to pointers are not supported");
    if (p->cur.kind == T_IDENT && tok_is(&p->cur, "const"))
        return fail_at(p, p->cur.column, "'const' after '*' is not supported");
    return 0;
}

static int parse_name(parser *p, char *dst, int *column, const char *what) {
    if (p->cur.kind != T_IDENT || is_keyword(&p->cur))
        return expected(p, what);
    if (p->cur.len >= WF_MAX_NAME)
        return fail_at(p, p->cur.column, "name is longer than 63 characters");
    memcpy(dst, p->cur.start, p->cur.len);
    dst[p->cur.len] = '\0';
    if (column)
        *column = p->cur.column;
    advance(p);
    return 0;
}

static int classify_return(parser *p, const ptype *t, wf_type *ret) {
    if (t->stars == 0) {
        *ret = t->base;
        return 0;
    }
    if (t->base == WF_CHAR) {
        *ret = t->is_const ? WF_STRING : WF_STRING_OWNED;
        return 0;
    }
    return fail_at(p, t->star_column,
                   "only 'char *' and 'const char *' pointer returns are supported");
}

static int classify_param(parser *p, const ptype *t, wf_param *prm) {
    if (t->base == WF_VOID)
        return fail_at(p, t->column, "a parameter cannot be void");
    if (t->stars == 0) {
        prm->type = t->base;
        return 0;
    }
    if (t->base == WF_CHAR && t->is_const) {
        prm->type = WF_STRING;
        return 0;
    }
    /* 'char *' is an out buffer (a string); its size comes from the config. */
    if (t->is_const)
        return fail_at(p, t->column, "'const T *' parameters are not supported");
    prm->type = t->base;
    prm->out = true;
    return 0;
}

int wf_proto_parse(const char *text, wf_proto *out, char *msg, size_t msg_size) {
    parser p = {text ? text : "", 0, {T_END, NULL, 0, 1}, msg, msg_size, false};
    if (msg && msg_size)
        msg[0] = '\0';
    if (!out)
        return fail_at(&p, 1, "no output");
    memset(out, 0, sizeof *out);
    advance(&p);
    ptype rt;
    if (parse_type(&p, &rt) != 0 || classify_return(&p, &rt, &out->ret) != 0 ||
        parse_name(&p, out->name, NULL, "expected a function name") != 0)
        return -1;
    if (p.cur.kind != T_LPAREN)
        return expected(&p, "expected '('");
    advance(&p);
    if (tok_is(&p.cur, "void")) {
        /* "(void)" is an empty list; "(void *p)" and friends fall through. */
        parser save = p;
        advance(&p);
        if (p.cur.kind != T_RPAREN)
            p = save;
    }
    if (p.cur.kind != T_RPAREN) {
        for (;;) {
            if (out->nparams == WF_MAX_PARAMS)
                return fail_at(&p, p.cur.column, "more than 16 parameters");
            wf_param *prm = &out->params[out->nparams];
            ptype pt;
            if (parse_type(&p, &pt) != 0 || classify_param(&p, &pt, prm) != 0 ||
                parse_name(&p, prm->name, &prm->column, "expected a parameter name") != 0)
                return -1;
            for (size_t i = 0; i < out->nparams; i++) {
                if (strcmp(out->params[i].name, prm->name) == 0) {
                    char buf[WF_MAX_NAME + 40];
                    snprintf(buf, sizeof buf, "duplicate parameter name '%s'", prm->name);
                    return fail_at(&p, prm->column, buf);
                }
            }
            out->nparams++;
            if (p.cur.kind == T_COMMA) {
                advance(&p);
                continue;
            }
            if (p.cur.kind != T_RPAREN)
                return expected(&p, "expected ',' or ')'");
            break;
        }
    }
    advance(&p); /* ')' */
    if (p.cur.kind == T_SEMI)
        advance(&p);
    if (p.cur.kind != T_END)
        return expected(&p, "unexpected text after the parameter list");
    return 0;
}

const char *wf_type_name(wf_type t) {
    switch (t) {
    case WF_VOID: return "void";
    case WF_BOOL: return "bool";
    case WF_CHAR: return "char";
    case WF_SCHAR: return "signed char";
    case WF_UCHAR: return "unsigned char";
    case WF_SHORT: return "short";
    case WF_USHORT: return "unsigned short";
    case WF_INT: return "int";
    case WF_UINT: return "unsigned int";
    case WF_LONG: return "long";
    case WF_ULONG: return "unsigned long";
    case WF_LLONG: return "long long";
    case WF_ULLONG: return "unsigned long long";
    case WF_SIZE: return "size_t";
    case WF_SSIZE: return "ssize_t";
    case WF_I8: return "int8_t";
    case WF_I16: return "int16_t";
    case WF_I32: return "int32_t";
    case WF_I64: return "int64_t";
    case WF_U8: return "uint8_t";
    case WF_U16: return "uint16_t";
    case WF_U32: return "uint32_t";
    case WF_U64: return "uint64_t";
    case WF_FLOAT: return "float";
    case WF_DOUBLE: return "double";
    case WF_STRING: return "const char *";
    case WF_STRING_OWNED: return "char *";
    }
    return "?";
}

bool wf_type_is_integer(wf_type t) { return t >= WF_SCHAR && t <= WF_U64; }
