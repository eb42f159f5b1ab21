"""Stage 2: the jobs index built through the ES-Hadoop connector behind an alias."""
