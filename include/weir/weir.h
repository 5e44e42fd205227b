/*
 * weir/weir.h - umbrella header for embedders: includes the others.
 * Plugin code includes weir/plugin.h only.
 */
#ifndef WEIR_WEIR_H
#define WEIR_WEIR_H

#include "weir/version.h"
#include "weir/errors.h"
#include "weir/host.h"
#include "weir/generation.h"

#endif /* WEIR_WEIR_H */
