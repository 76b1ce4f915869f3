#!/bin/bash
cd repo
git checkout -q main
git merge -q --no-edit feature || true
printf '[server]\nhost = 0.0.0.0\nport = 9090\ntimeout = 60\nlog_level = debug\nworkers = 4\n' > settings.ini
git add settings.ini
git commit -q --no-edit
