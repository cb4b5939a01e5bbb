"""Fakes of vendor libraries (pynvml, cupy) that behave like the real modules."""
