"""pytest plugin (entry point ``tapejax`` in group ``pytest11``): tapejax's hypothesis profiles.

Installed with tapejax, it registers the profiles ``tapejax-deterministic``
and ``tapejax-thorough`` (so hypothesis's own ``--hypothesis-profile`` can name
them) and loads one when asked, in this order:

1. hypothesis's ``--hypothesis-profile NAME`` on the command line: left alone;
2. the environment variable ``TAPEJAX_HYPOTHESIS_PROFILE``
   (``deterministic``, ``thorough`` or any registered profile name);
3. the ini option ``tapejax_hypothesis_profile`` (``[tool.pytest.ini_options]``).

With none of these it changes nothing, so installing tapejax never alters the
hypothesis settings of an unrelated project. This package is separate from
``tapejax`` so that pytest's start-up in any project of the environment imports
neither tapejax nor JAX (nor hypothesis, unless a tapejax profile is asked for).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

INI_OPTION = "tapejax_hypothesis_profile"


def pytest_addoption(parser: Any) -> None:
    parser.addini(
        INI_OPTION,
        "hypothesis profile to load: 'deterministic' (derandomized, no deadline) or 'thorough'; "
        "TAPEJAX_HYPOTHESIS_PROFILE overrides it",
        default="",
    )


# First: hypothesis's own plugin loads ``--hypothesis-profile tapejax-...`` in its
# pytest_configure, so the profiles must be registered before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: Any) -> None:
    try:
        explicit = config.getoption("hypothesis_profile", default=None)
    except ValueError:
        explicit = None
    name = os.environ.get("TAPEJAX_HYPOTHESIS_PROFILE") or config.getini(INI_OPTION)
    wants_ours = bool(name) or (explicit or "").startswith("tapejax-")
    if not wants_ours:
        return  # nothing asked of tapejax: import nothing, change nothing
    try:
        from . import profiles
    except ImportError:  # hypothesis is not installed: nothing to configure
        return
    profiles.register_profiles()
    if explicit:
        return  # hypothesis loads the profile named on its command line itself
    profiles.load_profile(name, default=None)
