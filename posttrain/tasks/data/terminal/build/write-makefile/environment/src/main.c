#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shapes.h"

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "rect") == 0)
        printf("%.2f\n", rect_area(atof(argv[2]), atof(argv[3])));
    else if (argc == 3 && strcmp(argv[1], "circle") == 0)
        printf("%.2f\n", circle_area(atof(argv[2])));
    else
        return 2;
    return 0;
}
