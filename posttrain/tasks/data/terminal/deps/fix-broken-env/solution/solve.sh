#!/bin/bash
.venv/bin/pip install -q --no-index --find-links wheels 'reportgen==1.2'
