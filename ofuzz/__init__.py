"""ofuzz: graph-based differential fuzzing of deep-learning inference engines."""
__version__ = "0.1.0"
