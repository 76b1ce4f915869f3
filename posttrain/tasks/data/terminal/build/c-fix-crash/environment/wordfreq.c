#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char word[16];
    int count;
};

static struct entry table[10000];
static int n_entries;

static void add(const char *w) {
    for (int i = 0; i < n_entries; i++)
        if (strcmp(table[i].word, w) == 0) {
            table[i].count++;
            return;
        }
    strcpy(table[n_entries].word, w);
    table[n_entries].count = 1;
    n_entries++;
}

static int by_count(const void *a, const void *b) {
    const struct entry *x = a, *y = b;
    return x->count - y->count;
}

int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "r");
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *tok = strtok(line, " \t\n.,;:!?\"()-");
        do {
            for (char *p = tok; *p; p++) *p = tolower((unsigned char)*p);
            add(tok);
        } while ((tok = strtok(NULL, " \t\n.,;:!?\"()-")));
    }
    qsort(table, n_entries, sizeof table[0], by_count);
    for (int i = 0; i < n_entries; i++) printf("%d %s\n", table[i].count, table[i].word);
    return 0;
}
