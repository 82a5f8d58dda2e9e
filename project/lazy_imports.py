"""Modules a third-party app imports at start-up and only some requests use, loaded when first used.

The OAuth toolkit's models (``oauth2_provider`` is an installed app, so Django imports them
with the app registry) import ``jwcrypto.jwk`` for the OpenID Connect keys, and with it
cryptography's X.509 and key serialization: about 11 MiB that a request without OIDC never
uses. :func:`defer` registers such a module with the standard library's
:class:`importlib.util.LazyLoader`: ``from jwcrypto import jwk`` binds the module, and its code
runs at the first attribute read (``jwk.JWK``), in whichever request needs it. (``import
jwcrypto.jwk`` and ``from jwcrypto.jwk import JWK`` read its attributes: they load it there.)
"""

from __future__ import annotations

import importlib.util
import sys


def defer(name: str) -> None:
    """Make ``name`` (a submodule) load at its first attribute read, unless already imported.

    Nothing happens when the module is imported already or not installed: then importing it
    behaves as usual.
    """
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)  # imports the parent package, not the module
    except ImportError:
        return
    if spec is None or spec.loader is None:
        return
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        # As the import system does for a submodule it loads: ``from parent import child`` reads it.
        setattr(sys.modules[parent], child, module)
