/*
 * weir/export.h - symbol visibility for libweir.
 *
 * libweir is built with hidden visibility; only WEIR_API declarations are
 * exported.  Plugins export exactly one symbol (WEIR_PLUGIN_EXPORT).
 */
#ifndef WEIR_EXPORT_H
#define WEIR_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define WEIR_API __attribute__((visibility("default")))
#define WEIR_PLUGIN_EXPORT __attribute__((visibility("default")))
#define WEIR_HIDDEN __attribute__((visibility("hidden")))
#define WEIR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define WEIR_WUR __attribute__((warn_unused_result))
#else
#define WEIR_API
#define WEIR_PLUGIN_EXPORT
#define WEIR_HIDDEN
#define WEIR_PRINTF(fmt, args)
#define WEIR_WUR
#endif

#endif /* WEIR_EXPORT_H */
