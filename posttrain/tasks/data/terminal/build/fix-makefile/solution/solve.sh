#!/bin/bash
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall

stats: stats.o
	$(CC) $(CFLAGS) -o stats stats.o -lm

stats.o: stats.c
	$(CC) $(CFLAGS) -c stats.c

clean:
	rm -f stats stats.o
MK
