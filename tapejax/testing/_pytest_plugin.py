"""The pytest plugin lives in ``tapejax_pytest`` (entry point ``tapejax``), which imports
neither tapejax nor JAX; re-exported here for code that imported it from this path."""

from tapejax_pytest import INI_OPTION, pytest_addoption, pytest_configure  # noqa: F401
