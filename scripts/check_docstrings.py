#!/usr/bin/env python3
"""Fails when a public name of the `gbx` package has no docstring (run by scripts/docs.sh).

Public: every name in `gbx.__all__`, every module of the package whose name does not start
with "_", the names those modules list in their own `__all__` (or, without one, define
without a leading "_"), and the public methods and properties of every public class. Read
statically with griffe (the package need not be built; `_native.pyi` stands for the module).
"""

from __future__ import annotations

import sys
from pathlib import Path

import griffe

root = Path(__file__).resolve().parent.parent
pkg = griffe.load("gbx", search_paths=[str(root / "python")], allow_inspection=False)
missing: list[str] = []


def doc_of(obj) -> str:
    try:
        target = obj.final_target if obj.is_alias else obj
    except Exception:  # an alias to something outside the package (numpy, gymnasium): theirs
        return "external"
    return target.docstring.value if target.docstring else ""


def check_class(cls, path: str) -> None:
    for name, member in cls.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        if member.is_function or member.is_attribute and "property" in member.labels:
            if not doc_of(member):
                missing.append(f"{path}.{name}")


checked: set[str] = set()


def check(obj, path: str) -> None:
    target_path = obj.target_path if obj.is_alias else obj.path
    if target_path in checked:
        return
    checked.add(target_path)
    path = target_path
    if not doc_of(obj):
        missing.append(path)
    target = obj.final_target if obj.is_alias else obj
    if target.is_class:
        check_class(target, path)


def public_names(module) -> list[str]:
    exported = module.exports
    if exported is not None:
        return [e if isinstance(e, str) else e.name for e in exported]
    return [
        n
        for n, m in module.members.items()
        if not n.startswith("_") and not m.is_alias and (m.is_function or m.is_class)
    ]


modules = [pkg] + [m for n, m in pkg.modules.items() if not n.startswith("_")]
for module in modules:
    if not module.docstring:
        missing.append(module.path)
    for name in public_names(module):
        if name not in module.members:
            missing.append(f"{module.path}.{name} (listed in __all__, not defined)")
            continue
        member = module.members[name]
        if member.is_alias and member.target_path.startswith("gbx.") and module is not pkg:
            continue  # re-exported from another gbx module: checked there
        if member.is_module:
            continue
        if member.is_attribute:
            continue  # constants: documented in the module docstring
        check(member, f"{module.path}.{name}")

if missing:
    print("public names without a docstring:", file=sys.stderr)
    for m in sorted(set(missing)):
        print(f"  {m}", file=sys.stderr)
    sys.exit(1)
print(f"check_docstrings: every public name of gbx has a docstring ({len(modules)} modules)")
