"""``python -m roofline.jobs STAGE LOG [ARGS...]``: every analysis rule's command.

The job goes through a warm server where one runs (:mod:`roofline.jobs.client`), else runs here.
"""

import sys

from roofline.jobs import client, runner

sys.exit(client.submit_or_run(sys.argv[1:], runner.STAGES, runner.main))
