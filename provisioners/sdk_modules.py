"""Cloud SDK modules imported on first use, not when their driver's module is imported.

Every process start discovers the installed plugins, which imports each driver module to
check its class against its interface (a broken plugin is reported at once, by name). The
cloud SDKs are large: google-cloud-compute alone takes seconds of CPU to import here, boto3
and oci more than a second between them, and every Orchestrate, Federate and CLI start paid
for all three although a cluster provisions from one cloud or none. A driver module names its
SDK modules through :func:`sdk_module`, which checks they are installed (a missing SDK still
breaks the plugin at discovery, naming it) and loads them when the driver first uses them.
Type checkers see the real imports (each module imports them under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def sdk_module(name: str) -> ModuleType:
    """Module ``name``, loaded on its first attribute access (the loaded one if it already
    is); ModuleNotFoundError at once when it is not installed."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        # what the import system does for a submodule it loads; without it ``botocore`` has
        # no ``exceptions`` once ``botocore.exceptions`` is in sys.modules, and boto3's own
        # ``import botocore.exceptions`` then ``botocore.exceptions.X`` fails
        setattr(sys.modules[parent], child, module)
    loader.exec_module(module)
    return module
