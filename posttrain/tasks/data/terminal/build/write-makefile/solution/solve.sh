#!/bin/bash
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall
OBJS = build/main.o build/shapes.o

area: $(OBJS)
	$(CC) -o $@ $(OBJS)

build/%.o: src/%.c src/shapes.h
	@mkdir -p build
	$(CC) $(CFLAGS) -c $< -o $@

clean:
	rm -rf area build

.PHONY: clean
MK
