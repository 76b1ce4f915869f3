#ifndef INVENTORY_H
#define INVENTORY_H

struct item {
    char name[64];
    int qty;
    double price;
};

int items_loaded;

int load_items(const char *path, struct item *out, int max);
double stock_value(const struct item *items, int n);
void print_report(const struct item *items, int n);

#endif
