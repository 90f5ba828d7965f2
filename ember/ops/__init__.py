"""The operator library: computes and per-target schedules."""
