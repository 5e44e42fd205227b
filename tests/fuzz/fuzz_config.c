/*
 * tests/fuzz/fuzz_config.c - libFuzzer target for deployment config
 * composition (core/format/config.c): validation, ${VAR} expansion, overlay merge
 * and weir_config_compose on a file.
 *
 * The input is one config file.  It is parsed as JSON and, when that
 * succeeds, validated; expansion runs on a copy; a valid input is merged as
 * an overlay into a fixed valid base.  Independently the raw bytes are
 * written to a temp file and composed after the base file, which covers the
 * file reader's error paths (line/column, encoding).  Oracles: no crash,
 * leak or UB; every failure is E_CONFIG (or E_IO for the file) with a
 * non-empty message; a successful compose returns an object that passes
 * weir__config_validate again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "weir/host.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base_json[] =
    "{\"agent\": {\"provider\": \"openai\", \"model\": \"gpt-4o-mini\", \"max_tokens\": 4096},"
    " \"session\": {\"dir\": \"/tmp/weir-fuzz-sessions\", \"fsync\": \"step\"},"
    " \"plugin_path\": [\"/opt/weir/plugins\"],"
    " \"plugins\": ["
    "  {\"id\": \"openai\", \"plugin\": \"provider-openai\","
    "   \"config\": {\"base_url\": \"http://127.0.0.1:1/v1\", \"api_key\": \"${FUZZ_SET}\"}},"
    "  {\"id\": \"prompt\", \"plugin\": \"system-prompt\", \"config\": {\"text\": \"hi\"}},"
    "  {\"id\": \"math\", \"plugin\": \"tools-ffi\", \"config\": {\"tools\": []}}]}";

static char dir_path[64];
static char base_path[256];
static char input_path[256];

static void cleanup(void) {
    unlink(base_path);
    unlink(input_path);
    rmdir(dir_path);
}

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(dir_path, sizeof dir_path, "/tmp/weir-fuzz-config.XXXXXX");
    if (!mkdtemp(dir_path))
        abort();
    atexit(cleanup);
    snprintf(base_path, sizeof base_path, "%s/base.json", dir_path);
    snprintf(input_path, sizeof input_path, "%s/input.json", dir_path);
    write_file(base_path, base_json, strlen(base_json));
    /* variables the inputs can refer to: set, empty, unset */
    setenv("FUZZ_SET", "value", 1);
    setenv("FUZZ_EMPTY", "", 1);
    setenv("FUZZ_DOLLAR", "${FUZZ_SET}$$", 1);
    unsetenv("FUZZ_UNSET");
    return 0;
}

/* A failure must carry the expected code and name what went wrong. */
static void check_failure(int rc, const weir_error *err, int alt) {
    if (rc == WEIR_OK)
        return;
    if (rc != WEIR_E_CONFIG && rc != alt)
        abort();
    if (err->text[0] == '\0')
        abort();
}

static void direct(const uint8_t *data, size_t size) {
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!doc)
        return;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir__config_validate(doc, "input.json", &err);
    check_failure(rc, &err, WEIR_E_CONFIG);

    json_t *copy = json_deep_copy(doc);
    if (!copy)
        abort();
    weir_error_clear(&err);
    check_failure(weir__config_expand(copy, "input.json", &err), &err, WEIR_E_CONFIG);
    json_decref(copy);

    if (rc == WEIR_OK && json_is_object(doc)) {
        json_t *base = json_loads(base_json, 0, NULL);
        if (!base)
            abort();
        weir_error_clear(&err);
        check_failure(weir__config_merge(base, doc, "input.json", &err), &err, WEIR_E_CONFIG);
        json_decref(base);
    }
    json_decref(doc);
}

static void compose(const uint8_t *data, size_t size) {
    write_file(input_path, data, size);
    const char *files[] = {base_path, input_path};
    json_t *out = NULL;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_config_compose(files, 2, &out, &err);
    check_failure(rc, &err, WEIR_E_IO);
    if (rc == WEIR_OK) {
        if (!json_is_object(out))
            abort();
        weir_error_clear(&err);
        if (weir__config_validate(out, NULL, &err) != WEIR_OK) {
            fprintf(stderr, "composed config fails validation: %s\n", err.text);
            abort();
        }
    }
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    direct(data, size);
    compose(data, size);
    return 0;
}
