"""tapejax's hypothesis profiles: defined in ``tapejax_pytest.profiles`` (the lightweight
pytest plugin package, importable without JAX), re-exported here for ``tapejax.testing``."""

from tapejax_pytest.profiles import (  # noqa: F401
    DETERMINISTIC,
    PROFILE_ENV_VAR,
    THOROUGH,
    load_profile,
    register_profiles,
    resolve_profile,
)

__all__ = ["PROFILE_ENV_VAR", "DETERMINISTIC", "THOROUGH", "register_profiles", "load_profile", "resolve_profile"]
