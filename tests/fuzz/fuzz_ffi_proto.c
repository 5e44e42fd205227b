/*
 * tests/fuzz/fuzz_ffi_proto.c - libFuzzer target for the tools-ffi C
 * prototype parser.  Any input must parse or fail with a
 * "column N: ..." message where N points inside the text (or just past it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/tools-ffi/ffi_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t len = strlen(text);
    wf_proto p;
    char msg[256];
    if (wf_proto_parse(text, &p, msg, sizeof msg) == 0) {
        if (p.nparams > WF_MAX_PARAMS || p.name[0] == '\0')
            abort();
        for (size_t i = 0; i < p.nparams; i++)
            if (p.params[i].name[0] == '\0' || p.params[i].column < 1 ||
                (size_t)p.params[i].column > len)
                abort();
    } else {
        int column = 0;
        if (sscanf(msg, "column %d: ", &column) != 1 || column < 1 || (size_t)column > len + 1)
            abort();
    }
    free(text);
    return 0;
}
