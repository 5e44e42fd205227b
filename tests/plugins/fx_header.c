/*
 * fx_header.c - fx-abi-major, fx-abi-minor, fx-bad-size: descriptors whose
 * header the loader must refuse.  CMake sets FX_NAME, FX_MAJOR, FX_MINOR and
 * FX_SIZE; init must never run.
 */
#include "fx_util.h"

static int header_init(weir_plugin *self, const weir_api *api, const json_t *config,
                       weir_error *err) {
    (void)self;
    (void)api;
    (void)config;
    (void)err;
    abort(); /* the loader must refuse this descriptor before init */
}

static const weir_plugin_desc desc = {
    FX_MAJOR, FX_MINOR, FX_SIZE, 0,
    .name = FX_NAME,
    .version = "1.0.0",
    .description = "descriptor header fixture",
    .init = header_init,
};

WEIR_PLUGIN_DEFINE(desc)
