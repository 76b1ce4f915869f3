#!/bin/bash
sed -i 's/^        for line in f$/        for line in f:/' report.py
