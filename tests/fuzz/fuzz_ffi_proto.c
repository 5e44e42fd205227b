/*
 * tests/fuzz/fuzz_ffi_proto.c - libFuzzer target for the tools-ffi C
 * prototype parser.  Any input must parse or fail with a
 * "column N: ..." message where N points inside the text (or just past it).
 * A parse must give what tools-ffi relies on when it sizes out-parameters
 * by name: unique parameter names, no void or 'char *' (owned) parameter, and
 * no out-parameter that is a string.  Seeds: corpus/fuzz_ffi_proto/.
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
        for (size_t i = 0; i < p.nparams; i++) {
            const wf_param *q = &p.params[i];
            if (q->name[0] == '\0' || q->column < 1 || (size_t)q->column > len ||
                memchr(q->name, '\0', WF_MAX_NAME) == NULL)
                abort();
            if (q->type == WF_VOID || q->type == WF_STRING_OWNED ||
                (q->out && q->type == WF_STRING))
                abort();
            for (size_t k = 0; k < i; k++)
                if (strcmp(p.params[k].name, q->name) == 0)
                    abort();
        }
    } else {
        int column = 0;
        if (sscanf(msg, "column %d: ", &column) != 1 || column < 1 || (size_t)column > len + 1)
            abort();
    }
    free(text);
    return 0;
}
