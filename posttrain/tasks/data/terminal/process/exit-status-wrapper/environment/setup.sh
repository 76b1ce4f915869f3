#!/bin/bash
printf '#!/bin/bash\n# nightly job: fails when given a bad mode\n[ "$1" = bad ] && exit 5\nexit 0\n' > job.sh
chmod +x job.sh
