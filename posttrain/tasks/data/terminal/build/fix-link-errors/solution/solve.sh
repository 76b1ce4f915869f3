#!/bin/bash
sed -i 's/^int items_loaded;$/extern int items_loaded;/' inventory.h
sed -i 's/^#include "inventory.h"$/#include "inventory.h"\n\nint items_loaded;/' load.c
sed -i 's/^OBJS = main.o load.o$/OBJS = main.o load.o report.o/' Makefile
make clean && make
