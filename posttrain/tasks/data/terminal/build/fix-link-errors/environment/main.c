#include <stdio.h>
#include "inventory.h"

int main(void) {
    struct item items[256];
    int n = load_items("items.txt", items, 256);
    if (n < 0) {
        fprintf(stderr, "cannot read items.txt\n");
        return 1;
    }
    print_report(items, n);
    return 0;
}
