#include <stdio.h>
#include "inventory.h"

int load_items(const char *path, struct item *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < max && fscanf(f, "%63s %d %lf", out[n].name, &out[n].qty, &out[n].price) == 3) n++;
    fclose(f);
    items_loaded = n;
    return n;
}
