"""The pipeline's stages on Ray actor pools; the only package that imports `ray` (inside functions,
never at import, so `backend: local` needs no Ray installed)."""
