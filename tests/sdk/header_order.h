/* tests/sdk/header_order.h - the three header-order checks (header_order_a.c). */
#ifndef WEIR_TEST_HEADER_ORDER_H
#define WEIR_TEST_HEADER_ORDER_H
int header_order_a(void);
int header_order_b(void);
int header_order_c(void);
#endif
