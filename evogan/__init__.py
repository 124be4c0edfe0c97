"""evogan: evolutionary and meta-optimisation of calorimeter fast-simulation networks."""

__version__ = "0.1.0"
__all__ = ["__version__"]
