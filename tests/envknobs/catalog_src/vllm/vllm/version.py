__version__ = "0.99.0"
