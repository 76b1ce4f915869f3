#!/bin/bash
python3 -m venv .venv
.venv/bin/pip install -q --index-url "file://$(pwd)/index/simple" metrics
