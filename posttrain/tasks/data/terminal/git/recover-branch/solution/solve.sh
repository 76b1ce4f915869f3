#!/bin/bash
cd repo
sha=$(git log -g --format='%H %s' HEAD | awk '$0 ~ / Experiment: faster parser$/ {print $1; exit}')
git branch experiment "$sha"
