"""Benchmarks of tapejax against jax.jit, TensorFlow and PyTorch (``python benchmarks/run.py --help``)."""
