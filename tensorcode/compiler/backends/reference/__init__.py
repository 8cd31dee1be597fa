"""The reference backend: the NumPy interpreter every other backend is tested against.
Reached through ``backends.get("reference")``.
"""
