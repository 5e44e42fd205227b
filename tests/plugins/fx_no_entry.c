/* fx_no_entry.c - a shared object without weir_plugin_describe. */
__attribute__((visibility("default"))) int fx_no_entry_answer(void);
__attribute__((visibility("default"))) int fx_no_entry_answer(void) { return 42; }
