#!/bin/bash
sha256sum --quiet -c "$(dirname "$0")/expected.sha256" || { echo "some files are not as expected"; exit 1; }
[ "$(find docs -type f | wc -l)" = 6 ] || { echo "files were added or removed under docs/"; exit 1; }
