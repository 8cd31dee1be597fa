"""The package's version, in one place: the facade re-exports it, and the compiler puts
it in plan cache keys and saved plans without importing the facade."""

__version__ = "0.1.0"
