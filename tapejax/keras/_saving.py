"""tapejax's Keras classes in Keras's saved configs, under Keras's own names, and back.

A ``.keras`` file, a ``get_config``, ``copy.deepcopy`` and ``pickle`` all go through Keras's
serialization, which names a built-in class by its public name (``keras.layers.Dense``) and finds
it again through ``keras.src.api_export``'s two tables. tapejax's classes are subclasses of those
built-ins, so:

- saving: each tapejax class is entered in the object-to-name table under its Keras class's
  name. A file tapejax saves is the file TF saves, and TF loads it.
- loading: inside ``loading()``, the name-to-object table answers Keras's public names with
  tapejax's classes. A file TF saved (or a copy) comes back as objects whose calls go on the tape.
  Outside it, Keras's table is Keras's own, so plain ``keras`` code in the same process loads
  plain Keras objects.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_BY_NAME: dict[str, type] = {}  # Keras's public name -> tapejax's class
# A plain class name -> tapejax's class: files saved before configs used Keras's public names name
# tapejax's classes so (module ``tapejax.keras.*``, registered name ``Dense``).
_BY_PLAIN: dict[str, type] = {}
# One load at a time swaps the table (a load inside a load, such as a wrapper layer's from_config, nests).
_lock = threading.RLock()


def register(ours: type, theirs: type) -> None:
    """Save ``ours`` under ``theirs``' public Keras name, and load that name as ``ours`` inside ``loading()``."""
    from keras.src import api_export  # (here, not at import: ``_bridge.load_keras`` picks the backend first)

    _BY_PLAIN.setdefault(ours.__name__, ours)
    name = api_export.get_name_from_symbol(theirs)
    if name is None:
        # A class Keras does not export (Functional): named by its module path, which Keras's loader
        # imports (in TF too) when no public name answers.
        if not theirs.__module__.startswith("keras."):
            return
        name = f"{theirs.__module__}.{theirs.__name__}"
    api_export.REGISTERED_OBJS_TO_NAMES[ours] = name
    # The first class registered for a name keeps it (tape_metric's classes come after the generated ones).
    _BY_NAME.setdefault(name, ours)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Keras's public names resolve to tapejax's classes (and so do the plain names of older files)."""
    import keras
    from keras.src import api_export

    table = api_export.REGISTERED_NAMES_TO_OBJS
    with _lock:
        saved = {name: table.get(name) for name in _BY_NAME}
        table.update(_BY_NAME)
        try:
            with keras.saving.custom_object_scope(_BY_PLAIN):
                yield
        finally:
            for name, obj in saved.items():
                if obj is None:
                    table.pop(name, None)
                else:
                    table[name] = obj


def registered() -> dict[str, Any]:
    """Keras's public name -> tapejax's class, for every class registered."""
    return dict(_BY_NAME)
