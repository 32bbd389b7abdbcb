"""mp-engine: runs micro-projects delivered through a git repository (MP-1.3)."""

__version__ = "0.2.0"
