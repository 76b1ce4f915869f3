#!/bin/bash
cd repo
git rebase -q main feature
