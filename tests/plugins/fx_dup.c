/*
 * fx_dup.c - fx-dup-a and fx-dup-b: two files declaring the same descriptor
 * name "fx-dup" (the loader must refuse the second).  FX_NAME is the file's.
 */
#include "fx_util.h"

static int dup_init(weir_plugin *self, const weir_api *api, const json_t *config,
                    weir_error *err) {
    (void)self;
    (void)api;
    (void)config;
    (void)err;
    return WEIR_OK;
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = "fx-dup",
    .version = "1.0.0",
    .description = "duplicate-name fixture (" FX_NAME ")",
    .init = dup_init,
};

WEIR_PLUGIN_DEFINE(desc)
