"""The package version (read by pyproject.toml at build time and by ``anglekit --version``)."""

__version__ = "0.1.0"
