#!/bin/bash
cat > wordfreq.c <<'C'
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char word[128];
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
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->word, y->word);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    FILE *f = fopen(argv[1], "r");
    if (!f) return 1;
    char word[128];
    int len = 0, c;
    while ((c = fgetc(f)) != EOF || len > 0) {
        if (c != EOF && isalpha(c) && isascii(c)) {
            if (len < 127) word[len++] = (char)tolower(c);
            continue;
        }
        if (len > 0) {
            word[len] = '\0';
            add(word);
            len = 0;
        }
        if (c == EOF) break;
    }
    qsort(table, n_entries, sizeof table[0], by_count);
    for (int i = 0; i < n_entries; i++) printf("%d %s\n", table[i].count, table[i].word);
    return 0;
}
C
make -B wordfreq
