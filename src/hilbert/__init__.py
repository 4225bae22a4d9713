"""hilbert: a fleet of coding agents that is kept honest."""

__version__ = "0.1.0"
