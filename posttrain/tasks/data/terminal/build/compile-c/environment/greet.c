#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("Hello, stranger!\n");
        return 0;
    }
    for (int i = 1; i < argc; i++)
        printf("Hello, %s! (%d of %d)\n", argv[i], i, argc - 1);
    return 0;
}
