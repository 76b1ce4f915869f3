#!/bin/bash
set -e
mkdir -p photos/2023 photos/2024/summer photos/inbox
w() { printf '%s\n' "$2" > "$1"; }
w photos/2023/a.jpg "sunset over lake"
w photos/2024/summer/lake.jpg "sunset over lake"
w photos/inbox/IMG_001.jpg "sunset over lake"
w photos/2023/b.jpg "city skyline"
w photos/inbox/IMG_002.jpg "city skyline"
w photos/2024/dog.jpg "dog in park"
w "photos/inbox/dog copy.jpg" "dog in park"
w photos/2024/cat.jpg "cat on sofa"
w photos/inbox/IMG_003.jpg "forest path"
w photos/inbox/IMG_004.jpg "forest path "
w photos/Zebra.jpg "zebra"
w photos/inbox/zebra.jpg "zebra"
