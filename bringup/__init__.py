"""bringup: GPU cluster bring-up and acceptance."""

__version__ = "0.1.0"
