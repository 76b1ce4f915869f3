#!/bin/bash
jq -r '.[] | select(.active == true) | .email' users.json > active.txt
