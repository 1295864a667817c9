"""Prefect flows (deployment entrypoints), the CLI and the serve entry point. Flows only wire stages."""

import os

# No outbound traffic from Prefect (set before prefect is imported: every flow module and the CLI come through this
# package). The ephemeral API's 20 s start-up limit is too short on a busy 2-core machine (a fresh SQLite database
# is migrated first): 120 s.
for _key, _value in (("DO_NOT_TRACK", "1"), ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
                     ("PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT", "false"),
                     ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")):
    os.environ.setdefault(_key, _value)

from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent  # noqa: E402

# Once for every flow module (each is imported through this package): no orphaned ephemeral Prefect API server if
# a local run's process is killed. A worker talks to a server of its own (PREFECT_API_URL): nothing to guard there.
ephemeral_server_dies_with_parent()
