"""Every model the harness knows, from each source module, by name."""

from __future__ import annotations

from . import transformers_models, ultralytics_models
from .spec import Spec

SPECS: list[Spec] = [*ultralytics_models.SPECS, *transformers_models.SPECS]
BY_NAME: dict[str, Spec] = {s.name: s for s in SPECS}
