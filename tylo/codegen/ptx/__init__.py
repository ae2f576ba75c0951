"""Inline-PTX templates and lowerings, one module per hardware feature (same names as ``tylo.lang``).

Every module here is imported with the package, so a feature's ``@lowering``
registrations are in place before any kernel is lowered.
"""
import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
