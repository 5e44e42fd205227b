/*
 * cli/new_plugin.c - `weir new-plugin NAME [DIR]`: a copy of the plugin
 * template (sdk/template, installed as <datadir>/weir/template) with the
 * name filled in, ready to build against this weir (docs/sdk.md).
 *
 * The template names its plugin "myplugin".  In the copy, the plugin name
 * NAME replaces it where a plugin name goes (the descriptor's .name, the
 * file weir-NAME.so and its CMake target, messages and the README's
 * deployment), and NAME's C identifier (a '-' becomes '_') everywhere else:
 * file names, types, functions, the CMake project and option.
 *
 * `--kind compaction|retry|guard` lays the files of template/kinds/KIND/
 * over the template's (a file of the same name replaces the template's):
 * a working skeleton of that kind of policy and its test.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define TEMPLATE_NAME "myplugin"
#define MAX_FILES 32

static const char help_text[] =
    "usage: weir new-plugin [--kind KIND] NAME [DIR]\n"
    "\n"
    "Write a new plugin project to DIR (default ./NAME): weir's plugin template\n"
    "with the name filled in.  It builds weir-NAME.so and a test-kit test against\n"
    "this weir's installed SDK:\n"
    "\n"
    "  cmake -S DIR -B DIR/build -DCMAKE_PREFIX_PATH=<weir prefix>\n"
    "  cmake --build DIR/build && ctest --test-dir DIR/build\n"
    "\n"
    "Without --kind the plugin caps max_tokens on agent/request.  --kind writes a\n"
    "working skeleton of one kind of policy instead, with its test:\n"
    "  compaction  stubs old tool results when the context window fills\n"
    "              (agent/pre-step: weir_agent_route, weir_messages_tokens)\n"
    "  retry       retries failed model requests, honouring Retry-After, with a\n"
    "              token bucket per host (agent/request-error)\n"
    "  guard       denies tool calls whose arguments match a pattern and redacts\n"
    "              e-mail addresses at admission (tools/pre-execute, agent/admit)\n"
    "\n"
    "NAME is the plugin's name: [a-z][a-z0-9_-]*, at most 48 characters.  DIR must\n"
    "not exist, or be an empty directory.  The template is looked up in\n"
    "$WEIR_TEMPLATE_DIR, then next to the weir executable (../share/weir/template),\n"
    "then in the installed data directory.\n\n" WEIR_CLI_HELP_ENV_BASE
    "  WEIR_TEMPLATE_DIR   the template's folder (looked up first)\n";

static const char *const kinds[] = {"compaction", "retry", "guard"};

static bool valid_kind(const char *kind) {
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(kind, kinds[i]))
            return true;
    return false;
}

static bool valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 48 || name[0] < 'a' || name[0] > 'z')
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return false;
    return true;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A template directory: it holds the template's plugin source. */
static bool is_template(const char *dir) {
    char probe[PATH_MAX];
    struct stat st;
    return snprintf(probe, sizeof probe, "%s/" TEMPLATE_NAME ".c", dir) < (int)sizeof probe &&
           stat(probe, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory of the running executable (malloc'd), or NULL. */
static char *exe_dir(void) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    return strdup(buf);
}

/* The template directory (malloc'd) and, when it sits in an installed
 * prefix next to this executable, that prefix (*prefix, malloc'd, else NULL). */
static char *find_template(char **prefix) {
    *prefix = NULL;
    const char *env = getenv("WEIR_TEMPLATE_DIR");
    if (env && *env)
        return is_template(env) ? strdup(env) : NULL;
    char *bin = exe_dir();
    char path[PATH_MAX];
    if (bin && snprintf(path, sizeof path, "%s/%s/weir/template", bin, WEIR_CLI_BIN_TO_DATA) <
                   (int)sizeof path &&
        is_template(path)) {
        char cfg[PATH_MAX], *real = NULL;
        if (snprintf(cfg, sizeof cfg, "%s/%s/cmake/weir/weirConfig.cmake", bin,
                     WEIR_CLI_BIN_TO_LIB) < (int)sizeof cfg &&
            access(cfg, R_OK) == 0 && snprintf(cfg, sizeof cfg, "%s/%s", bin,
                                               WEIR_CLI_BIN_TO_PREFIX) < (int)sizeof cfg)
            real = realpath(cfg, NULL);
        *prefix = real;
        free(bin);
        return strdup(path);
    }
    free(bin);
    return is_template(WEIR_CLI_TEMPLATE_INSTALL_DIR) ? strdup(WEIR_CLI_TEMPLATE_INSTALL_DIR)
                                                      : NULL;
}

/* `s` with every `from` replaced by `to` (malloc'd; frees `s`), or NULL. */
static char *replace_all(char *s, const char *from, const char *to) {
    if (!s)
        return NULL;
    size_t flen = strlen(from), tlen = strlen(to), count = 0;
    for (const char *p = strstr(s, from); p; p = strstr(p + flen, from))
        count++;
    if (!count)
        return s;
    size_t len = strlen(s);
    char *out = malloc(len + count * tlen - count * flen + 1);
    if (!out) {
        free(s);
        return NULL;
    }
    char *o = out;
    const char *p = s;
    for (const char *hit = strstr(p, from); hit; hit = strstr(p, from)) {
        memcpy(o, p, (size_t)(hit - p));
        o += hit - p;
        memcpy(o, to, tlen);
        o += tlen;
        p = hit + flen;
    }
    strcpy(o, p);
    free(s);
    return out;
}

/* The template text with the name filled in (malloc'd; frees `text`). */
static char *fill(char *text, const char *name, const char *ident, const char *upper) {
    char quoted[64], squoted[64], file[64], target[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    snprintf(squoted, sizeof squoted, "'%s'", name);
    snprintf(file, sizeof file, "weir-%s", name);
    snprintf(target, sizeof target, "weir_add_plugin(%s", name);
    text = replace_all(text, "weir-" TEMPLATE_NAME, file);
    text = replace_all(text, "weir_add_plugin(" TEMPLATE_NAME, target);
    text = replace_all(text, "\"" TEMPLATE_NAME "\"", quoted);
    text = replace_all(text, "'" TEMPLATE_NAME "'", squoted);
    text = replace_all(text, "MYPLUGIN", upper);
    return replace_all(text, TEMPLATE_NAME, ident);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (buf && (bad || memchr(buf, '\0', len))) {
        free(buf);
        return NULL;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Write `text` to the new file `path` (0644, never over an existing one). */
static int write_new(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            close(fd);
            errno = e;
            return -1;
        }
        off += (size_t)n;
    }
    return close(fd);
}

/* DIR for the project: created, or an existing empty directory. */
static int prepare_dir(const char *dir, bool *created) {
    *created = false;
    if (mkdir(dir, 0755) == 0) {
        *created = true;
        return WEIR_EXIT_OK;
    }
    if (errno == EEXIST && is_dir(dir)) {
        DIR *d = opendir(dir);
        struct dirent *e;
        bool empty = d != NULL;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                empty = false;
        if (d)
            closedir(d);
        if (empty)
            return WEIR_EXIT_OK;
        fprintf(stderr, "weir new-plugin: %s exists and is not empty\n", dir);
        return WEIR_EXIT_USAGE;
    }
    fprintf(stderr, "weir new-plugin: cannot create %s: %s\n", dir,
            errno == EEXIST ? "a file of that name exists" : strerror(errno));
    return errno == EEXIST ? WEIR_EXIT_USAGE : WEIR_EXIT_IO;
}

/* Read the regular files of `dir`, filled in, into names/texts (*n of them
 * so far); a file named as one already read replaces its text. */
static int read_template(const char *dir, const char *name, const char *ident, const char *upper,
                         char **names, char **texts, size_t *n) {
    int rc = WEIR_EXIT_OK;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && rc == WEIR_EXIT_OK && (e = readdir(d))) {
        char src[PATH_MAX];
        if (e->d_name[0] == '.' ||
            snprintf(src, sizeof src, "%s/%s", dir, e->d_name) >= (int)sizeof src)
            continue;
        struct stat st;
        if (stat(src, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        char *text = fill(read_all(src), name, ident, upper);
        char *file = replace_all(strdup(e->d_name), TEMPLATE_NAME, ident);
        if (!text || !file) {
            fprintf(stderr, "weir new-plugin: cannot read %s\n", src);
            free(text);
            free(file);
            rc = WEIR_EXIT_IO;
            break;
        }
        size_t at = 0;
        while (at < *n && strcmp(names[at], file) != 0)
            at++;
        if (at == MAX_FILES) {
            free(text);
            free(file);
            rc = WEIR_EXIT_IO;
            break;
        }
        if (at < *n) { /* the kind's version of a template file */
            free(names[at]);
            free(texts[at]);
        } else {
            (*n)++;
        }
        names[at] = file;
        texts[at] = text;
    }
    if (d)
        closedir(d);
    else {
        fprintf(stderr, "weir new-plugin: cannot read %s: %s\n", dir, strerror(errno));
        rc = WEIR_EXIT_IO;
    }
    return rc;
}

int weir_cmd_new_plugin(int argc, char **argv) {
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"kind", required_argument, NULL, 'k'}, {0}};
    int ch;
    const char *kind = NULL;
    while ((ch = getopt_long(argc, argv, "hk:", longopts, NULL)) != -1) {
        if (ch == 'h') {
            fputs(help_text, stdout);
            return WEIR_EXIT_OK;
        }
        if (ch == 'k') {
            kind = optarg;
            continue;
        }
        return WEIR_EXIT_USAGE;
    }
    if (argc - optind < 1 || argc - optind > 2) {
        fprintf(stderr, "usage: weir new-plugin [--kind KIND] NAME [DIR]\n");
        return WEIR_EXIT_USAGE;
    }
    if (kind && !valid_kind(kind)) {
        fprintf(stderr, "weir new-plugin: unknown kind '%s' (compaction, retry or guard)\n", kind);
        return WEIR_EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (!valid_name(name)) {
        fprintf(stderr,
                "weir new-plugin: '%s' is not a plugin name ([a-z][a-z0-9_-]*, at most 48 "
                "characters)\n",
                name);
        return WEIR_EXIT_USAGE;
    }
    const char *dir = argc - optind == 2 ? argv[optind + 1] : name;
    char ident[64], upper[64];
    snprintf(ident, sizeof ident, "%s", name);
    for (char *p = ident; *p; p++)
        *p = *p == '-' ? '_' : *p;
    size_t len = strlen(ident);
    for (size_t i = 0; i <= len; i++)
        upper[i] = ident[i] >= 'a' && ident[i] <= 'z' ? (char)(ident[i] - 'a' + 'A') : ident[i];

    char *prefix = NULL;
    char *tmpl = find_template(&prefix);
    if (!tmpl) {
        fprintf(stderr, "weir new-plugin: the plugin template was not found (set "
                        "WEIR_TEMPLATE_DIR to weir's sdk/template)\n");
        free(prefix);
        return WEIR_EXIT_IO;
    }
    /* read everything first: nothing is written from a broken template */
    char *names[MAX_FILES], *texts[MAX_FILES];
    size_t n = 0;
    int rc = read_template(tmpl, name, ident, upper, names, texts, &n);
    if (rc == WEIR_EXIT_OK && n == 0)
        rc = WEIR_EXIT_IO;
    if (rc == WEIR_EXIT_OK && kind) {
        char dir_kind[PATH_MAX];
        if (snprintf(dir_kind, sizeof dir_kind, "%s/kinds/%s", tmpl, kind) >= (int)sizeof dir_kind)
            rc = WEIR_EXIT_IO;
        else
            rc = read_template(dir_kind, name, ident, upper, names, texts, &n);
    }
    bool created = false;
    size_t tried = 0; /* files this run may have created */
    if (rc == WEIR_EXIT_OK)
        rc = prepare_dir(dir, &created);
    while (rc == WEIR_EXIT_OK && tried < n) {
        char dst[PATH_MAX];
        const char *file = names[tried++];
        if (snprintf(dst, sizeof dst, "%s/%s", dir, file) >= (int)sizeof dst ||
            write_new(dst, texts[tried - 1]) != 0) {
            fprintf(stderr, "weir new-plugin: cannot write %s/%s: %s\n", dir, file,
                    strerror(errno));
            rc = WEIR_EXIT_IO;
        }
    }
    if (rc != WEIR_EXIT_OK) { /* take back what this run wrote */
        for (size_t i = 0; i < tried; i++) {
            char dst[PATH_MAX];
            if (snprintf(dst, sizeof dst, "%s/%s", dir, names[i]) < (int)sizeof dst)
                unlink(dst);
        }
        if (created)
            rmdir(dir);
    } else {
        printf("weir new-plugin: wrote %s: plugin '%s' (weir-%s.so%s%s), %zu files\n"
               "next:\n"
               "  cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=%s\n"
               "  cmake --build %s/build && ctest --test-dir %s/build --output-on-failure\n",
               dir, name, name, kind ? ", a " : "", kind ? kind : "", n, dir, dir,
               prefix ? prefix : "<weir prefix>", dir, dir);
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        free(texts[i]);
    }
    free(tmpl);
    free(prefix);
    return rc;
}
