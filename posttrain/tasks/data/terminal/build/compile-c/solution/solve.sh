#!/bin/bash
gcc -O2 -o greet greet.c
