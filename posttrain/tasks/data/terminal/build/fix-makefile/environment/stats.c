#include <math.h>
#include <stdio.h>

int main(void) {
    double x, sum = 0, sq = 0;
    int n = 0;
    while (scanf("%lf", &x) == 1) {
        sum += x;
        sq += x * x;
        n++;
    }
    if (n == 0) {
        printf("no data\n");
        return 1;
    }
    double mean = sum / n;
    printf("n=%d mean=%.3f sd=%.3f\n", n, mean, sqrt(sq / n - mean * mean));
    return 0;
}
