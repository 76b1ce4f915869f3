#!/bin/bash
cd photos || exit 1
got=$(ls -1 | sort)
expected=$(printf '%s\n' beach.jpg cat.jpg 'city night.jpg' logo.png mountain.jpg party-2023.jpg snow.jpeg.old | sort)
[ "$got" = "$expected" ] || { echo "wrong files:"; echo "$got"; exit 1; }
for n in beach mountain "city night" party-2023; do
  [ "$(cat "$n.jpg")" = "image $n" ] || { echo "content of $n.jpg changed"; exit 1; }
done
[ "$(cat snow.jpeg.old)" = "image old" ] || exit 1
