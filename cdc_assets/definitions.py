"""Dagster code location: `defs` for the task in $CDC_ASSETS_CONFIG (default ./cdc_assets.yaml)."""
from __future__ import annotations

import os
from pathlib import Path

from cdc_assets.config import CONFIG_ENV, load_config
from cdc_assets.defs.build import build_definitions

_path = str(Path(os.environ.get(CONFIG_ENV, "cdc_assets.yaml")).resolve())
defs = build_definitions(load_config(_path), _path)
