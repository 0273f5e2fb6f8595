"""mheval: how safely and how well language models respond in mental-health and crisis conversations."""

__version__ = "0.1.0"
