"""The tool's version: part of every memo key and of the evidence; kept low so any step may ask."""

__version__ = "0.1.0"
