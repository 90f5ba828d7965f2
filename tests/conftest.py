"""Shared test setup: spinning OpenMP threads starve each other on small shared machines."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
