"""`spark-submit jobs/<stage>.py` shims over `jobrec_core.entrypoints` (the wheel installs no
top-level package of its own)."""
