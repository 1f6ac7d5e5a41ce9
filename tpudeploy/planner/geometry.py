"""Model geometry: the config's own ModelGeometry type, and Gemma 4 E2B as the default."""

from __future__ import annotations

from tpudeploy.config import LayerType, ModelGeometry
from tpudeploy.facts import GIB

# The build log's model (tpudeploy.facts.GEMMA_4_E2B_GEOMETRY): the type's own defaults.
GEMMA_4_E2B = ModelGeometry()

__all__ = ["GEMMA_4_E2B", "GIB", "LayerType", "ModelGeometry"]
