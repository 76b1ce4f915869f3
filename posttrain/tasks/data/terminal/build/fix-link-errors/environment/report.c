#include <stdio.h>
#include "inventory.h"

double stock_value(const struct item *items, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) total += items[i].qty * items[i].price;
    return total;
}

void print_report(const struct item *items, int n) {
    for (int i = 0; i < n; i++)
        printf("%-10s %5d %9.2f\n", items[i].name, items[i].qty, items[i].qty * items[i].price);
    printf("items: %d\n", items_loaded);
    printf("total: %.2f\n", stock_value(items, n));
}
