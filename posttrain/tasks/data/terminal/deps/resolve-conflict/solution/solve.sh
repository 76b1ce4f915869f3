#!/bin/bash
sed -i 's/^beta==2.0$/beta==1.5/' requirements.txt
python3 -m venv .venv
.venv/bin/pip install -q --no-index --find-links wheels -r requirements.txt
