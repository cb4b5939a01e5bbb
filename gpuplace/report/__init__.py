"""Renderers: turn plain data into rich renderables, plain text or JSON-ready dicts. No printing."""
