/*
 * core/runtime/loader.c - finding, opening and checking plugin files
 * (docs/plugins.md).  A plugin is opened with dlopen(RTLD_NOW|RTLD_LOCAL); its
 * one entry symbol returns a descriptor whose header is checked before any
 * other field is read.  Every error names the file and, once known, the
 * plugin.  Until the header has passed, the plugin is named after its file
 * ("weir-x.so" -> 'x'), because the rest of the descriptor cannot be trusted.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host_int.h"

struct weir__dl {
    void *handle;
};

/* The plugin name implied by a file path: basename minus "weir-" and ".so". */
static void name_from_path(const char *path, char *buf, size_t size) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "weir-", 5) == 0)
        base += 5;
    size_t len = strlen(base);
    if (len > 3 && strcmp(base + len - 3, ".so") == 0)
        len -= 3;
    snprintf(buf, size, "%.*s", (int)len, base);
}

static bool valid_name(const char *name) {
    if (!name || !*name)
        return false;
    for (const char *p = name; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-'))
            return false;
    }
    return true;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Header and metadata checks; `fname` is the file-derived name. */
static int check_desc(const weir_plugin_desc *d, const char *path, const char *fname,
                      weir_error *err) {
    if (d->abi_major != WEIR_ABI_MAJOR)
        return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                         "plugin '%s' (%s) was built for ABI %u.%u; this host provides "
                         "ABI %d.%d",
                         fname, path, d->abi_major, d->abi_minor, WEIR_ABI_MAJOR,
                         WEIR_ABI_MINOR);
    if (d->abi_minor > WEIR_ABI_MINOR)
        return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                         "plugin '%s' (%s) needs ABI %u.%u; this host provides ABI %d.%d",
                         fname, path, d->abi_major, d->abi_minor, WEIR_ABI_MAJOR,
                         WEIR_ABI_MINOR);
    if (d->struct_size < WEIR_PLUGIN_DESC_V1_SIZE)
        return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                         "plugin '%s' (%s): descriptor size %u is smaller than 1.0's %u",
                         fname, path, d->struct_size, WEIR_PLUGIN_DESC_V1_SIZE);
    if (d->flags != 0)
        return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                         "plugin '%s' (%s): unknown descriptor flags 0x%x (must be 0)",
                         fname, path, d->flags);
    for (size_t i = 0; i < sizeof d->reserved / sizeof d->reserved[0]; i++) {
        if (d->reserved[i])
            return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                             "plugin '%s' (%s): descriptor reserved[%zu] must be NULL",
                             fname, path, i);
    }
    if (!valid_name(d->name))
        return weir__err(err, WEIR_E_PLUGIN_ABI, fname, NULL,
                         "plugin '%s' (%s): descriptor name '%s' is not [a-z0-9_-]+",
                         fname, path, d->name ? d->name : "(null)");
    if (!d->version || !*d->version)
        return weir__err(err, WEIR_E_PLUGIN_ABI, d->name, NULL,
                         "plugin '%s' (%s): descriptor has no version", d->name, path);
    if (!d->init)
        return weir__err(err, WEIR_E_PLUGIN_ABI, d->name, NULL,
                         "plugin '%s' (%s): descriptor has no init function", d->name,
                         path);
    return WEIR_OK;
}

static void close_handle(void *handle) {
#ifndef WEIR_SANITIZED
    dlclose(handle);
#else
    (void)handle; /* keep leak stacks readable under LSan */
#endif
}

int weir__dl_open(const char *path, weir__dl **out, const weir_plugin_desc **desc,
                  weir_error *err) {
    if (!path || !*path || !out || !desc)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir__dl_open: invalid argument");
    *out = NULL;
    *desc = NULL;
    char fname[64];
    name_from_path(path, fname, sizeof fname);
    if (!is_file(path))
        return weir__err(err, WEIR_E_PLUGIN_OPEN, fname, NULL, "plugin file not found: %s",
                         path);
    weir__dl *dl = weir__calloc(1, sizeof *dl);
    if (!dl)
        return weir__err(err, WEIR_E_NOMEM, fname, NULL, "out of memory loading %s", path);
    dlerror();
    dl->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl->handle) {
        const char *why = dlerror();
        weir__free(dl);
        return weir__err(err, WEIR_E_PLUGIN_OPEN, fname, NULL, "cannot load %s: %s", path,
                         why ? why : "unknown dlopen error");
    }
    weir_plugin_describe_fn describe;
    void *sym = dlsym(dl->handle, WEIR_PLUGIN_ENTRY_SYMBOL);
    /* POSIX blesses this conversion for dlsym results. */
    memcpy(&describe, &sym, sizeof describe);
    if (!describe) {
        weir__dl_close(dl);
        return weir__err(err, WEIR_E_PLUGIN_ENTRY, fname, NULL,
                         "no entry point " WEIR_PLUGIN_ENTRY_SYMBOL " in %s (a plugin "
                         "defines it with WEIR_PLUGIN_DEFINE(descriptor))",
                         path);
    }
    const weir_plugin_desc *d = describe();
    if (!d) {
        weir__dl_close(dl);
        return weir__err(err, WEIR_E_PLUGIN_ENTRY, fname, NULL,
                         WEIR_PLUGIN_ENTRY_SYMBOL " in %s returned NULL", path);
    }
    int rc = check_desc(d, path, fname, err);
    if (rc != WEIR_OK) {
        weir__dl_close(dl);
        return rc;
    }
    *out = dl;
    *desc = d;
    return WEIR_OK;
}

void weir__dl_close(weir__dl *dl) {
    if (!dl)
        return;
    if (dl->handle)
        close_handle(dl->handle);
    weir__free(dl);
}

/* --- search path ------------------------------------------------------- */

/* Append each non-empty ':'-separated entry of `list` to `dirs`, skipping
 * entries already present. */
static int add_dirs(json_t *dirs, const char *list) {
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            bool dup = false;
            size_t i;
            json_t *d;
            json_array_foreach(dirs, i, d) {
                if (strlen(json_string_value(d)) == len &&
                    strncmp(json_string_value(d), p, len) == 0)
                    dup = true;
            }
            if (!dup && json_array_append_new(dirs, json_stringn(p, len)) != 0)
                return WEIR_E_NOMEM;
        }
        p = end ? end + 1 : NULL;
    }
    return WEIR_OK;
}

/* "<dir of the object holding this code>/weir/plugins" into dirs. */
static int add_self_dir(json_t *dirs) {
    Dl_info info;
    void *fn;
    int (*self)(json_t **, weir_error *) = weir_plugin_dirs;
    memcpy(&fn, &self, sizeof fn);
    if (!dladdr(fn, &info) || !info.dli_fname || !*info.dli_fname)
        return WEIR_OK;
    char *real = realpath(info.dli_fname, NULL);
    const char *file = real ? real : info.dli_fname;
    const char *slash = strrchr(file, '/');
    char *dir = slash ? weir__asprintf("%.*s/%s", (int)(slash - file), file,
                                       WEIR_PLUGIN_REL_DIR)
                      : weir__asprintf("./%s", WEIR_PLUGIN_REL_DIR);
    free(real);
    if (!dir)
        return WEIR_E_NOMEM;
    int rc = add_dirs(dirs, dir);
    weir__free(dir);
    return rc;
}

int weir_plugin_dirs(json_t **dirs, weir_error *err) {
    if (!dirs)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_plugin_dirs: dirs is NULL");
    *dirs = NULL;
    json_t *a = json_array();
    if (!a)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory listing plugin dirs");
    int rc = add_dirs(a, getenv("WEIR_PLUGIN_PATH"));
    if (rc == WEIR_OK)
        rc = add_self_dir(a);
    if (rc == WEIR_OK)
        rc = add_dirs(a, WEIR_PLUGIN_INSTALL_DIR);
    if (rc != WEIR_OK) {
        json_decref(a);
        return weir__err(err, rc, NULL, NULL, "out of memory listing plugin dirs");
    }
    *dirs = a;
    return WEIR_OK;
}

/* "a, b, c" of the searched dirs (malloc'd), or NULL. */
static char *join_dirs(const json_t *dirs) {
    size_t len = 1, i;
    json_t *d;
    json_array_foreach(dirs, i, d) len += strlen(json_string_value(d)) + 2;
    char *s = weir__malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    json_array_foreach(dirs, i, d) {
        if (i)
            strcat(s, ", ");
        strcat(s, json_string_value(d));
    }
    return s;
}

int weir__plugin_resolve(const char *plugin, const json_t *plugin_path, char **out,
                         weir_error *err) {
    if (!plugin || !*plugin || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "plugin name or path is empty");
    *out = NULL;
    if (strchr(plugin, '/')) {
        *out = weir__strdup(plugin);
        return *out ? WEIR_OK : weir__err(err, WEIR_E_NOMEM, plugin, NULL, "out of memory");
    }
    if (!valid_name(plugin))
        return weir__err(err, WEIR_E_CONFIG, plugin, NULL,
                         "plugin name '%s' is not [a-z0-9_-]+ (use a path with '/' for a "
                         "file)",
                         plugin);
    json_t *dirs = json_array();
    json_t *defaults = NULL;
    int rc = dirs ? WEIR_OK : WEIR_E_NOMEM;
    if (rc == WEIR_OK && plugin_path) {
        if (!json_is_array(plugin_path)) {
            json_decref(dirs);
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                             "plugin_path must be an array of directories");
        }
        size_t i;
        json_t *d;
        json_array_foreach(plugin_path, i, d) {
            if (rc == WEIR_OK && json_is_string(d))
                rc = add_dirs(dirs, json_string_value(d));
        }
    }
    if (rc == WEIR_OK)
        rc = weir_plugin_dirs(&defaults, NULL);
    if (rc == WEIR_OK) {
        size_t i;
        json_t *d;
        json_array_foreach(defaults, i, d) {
            if (rc == WEIR_OK)
                rc = add_dirs(dirs, json_string_value(d));
        }
    }
    json_decref(defaults);
    if (rc != WEIR_OK) {
        json_decref(dirs);
        return weir__err(err, WEIR_E_NOMEM, plugin, NULL, "out of memory resolving plugin");
    }
    size_t i;
    json_t *d;
    json_array_foreach(dirs, i, d) {
        char *path = weir__asprintf("%s/weir-%s.so", json_string_value(d), plugin);
        if (!path) {
            json_decref(dirs);
            return weir__err(err, WEIR_E_NOMEM, plugin, NULL, "out of memory");
        }
        if (is_file(path)) {
            json_decref(dirs);
            *out = path;
            return WEIR_OK;
        }
        weir__free(path);
    }
    char *searched = join_dirs(dirs);
    json_decref(dirs);
    if (!searched)
        return weir__err(err, WEIR_E_NOMEM, plugin, NULL, "out of memory");
    rc = weir__err(err, WEIR_E_PLUGIN_OPEN, plugin, NULL,
                   "plugin '%s' not found (searched: %s)", plugin,
                   *searched ? searched : "no directories");
    weir__free(searched);
    return rc;
}

int weir_plugin_probe(const char *path, json_t **info, weir_error *err) {
    if (!path || !info)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_plugin_probe: invalid argument");
    *info = NULL;
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    int rc = weir__dl_open(path, &dl, &d, err);
    if (rc != WEIR_OK)
        return rc;
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", d->abi_major, d->abi_minor);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", d->name, "version",
                          d->version, "abi", abi, "description",
                          d->description ? d->description : "", "path", path);
    weir__dl_close(dl);
    if (!o)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory probing %s", path);
    *info = o;
    return WEIR_OK;
}
