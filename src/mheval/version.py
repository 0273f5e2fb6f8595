"""mheval's version, on the lowest floor: the package root exports it, and the run identity and the
report's footer read it from here (pyproject.toml carries the same string)."""

__version__ = "0.1.0"
