#!/bin/bash
set -e
mkdir -p photos
for n in beach mountain "city night" party-2023; do printf 'image %s\n' "$n" > "photos/$n.jpeg"; done
printf 'image old\n' > photos/snow.jpeg.old
printf 'image png\n' > photos/logo.png
printf 'image cat\n' > photos/cat.jpg
