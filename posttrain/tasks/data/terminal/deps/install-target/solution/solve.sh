#!/bin/bash
python3 -m pip install -q --no-index --find-links wheels --target vendor unitconv
