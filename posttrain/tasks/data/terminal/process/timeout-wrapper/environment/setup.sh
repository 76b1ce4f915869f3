#!/bin/bash
printf '#!/bin/bash\necho "fetched 3 records"\n' > fetch.sh
chmod +x fetch.sh
