#!/bin/bash
python3 -m venv .venv
.venv/bin/pip install -q --no-index --find-links wheels reportcli
