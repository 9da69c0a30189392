"""pytest plugin (entry point ``tapejax`` in group ``pytest11``): tapejax's hypothesis profiles.

Installed with tapejax, it registers the profiles ``tapejax-deterministic``
and ``tapejax-thorough`` (so hypothesis's own ``--hypothesis-profile`` can name
them) and loads one when asked, in this order:

1. hypothesis's ``--hypothesis-profile NAME`` on the command line: left alone;
2. the environment variable ``TAPEJAX_HYPOTHESIS_PROFILE``
   (``deterministic``, ``thorough`` or any registered profile name);
3. the ini option ``tapejax_hypothesis_profile`` (``[tool.pytest.ini_options]``).

With none of these it changes nothing, so installing tapejax never alters the
hypothesis settings of an unrelated project.
"""

from __future__ import annotations

import os
from typing import Any

INI_OPTION = "tapejax_hypothesis_profile"


def pytest_addoption(parser: Any) -> None:
    parser.addini(
        INI_OPTION,
        "hypothesis profile to load: 'deterministic' (derandomized, no deadline) or 'thorough'; "
        "TAPEJAX_HYPOTHESIS_PROFILE overrides it",
        default="",
    )


def pytest_configure(config: Any) -> None:
    try:
        from . import _profiles
    except ImportError:  # hypothesis is not installed: nothing to configure
        return
    _profiles.register_profiles()
    try:
        explicit = config.getoption("hypothesis_profile", default=None)
    except ValueError:
        explicit = None
    if explicit:
        return
    name = os.environ.get(_profiles.PROFILE_ENV_VAR) or config.getini(INI_OPTION)
    if name:
        _profiles.load_profile(name, default=None)

