"""The PodGroup API: pydantic models (the source of truth), quantities, and CRD generation."""
