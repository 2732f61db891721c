"""Dagster code location: every task of $CDC_ASSETS_CONFIG (a task file or a folder of them; default
./cdc_assets.yaml), or an empty location that says how to configure one (see defs/code_location.py)."""
from __future__ import annotations

from cdc_assets.defs.code_location import from_environment

defs = from_environment()
