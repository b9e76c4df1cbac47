"""The classes `AutoencoderMixin` derives from in the tree: a blend method one of them defines would be shadowed by
the method of that name the rewrite adds to the mixin, so the rewrite stops instead.

A base is followed where its name is a class of the same module or is imported by `from ... import` from a module of
the package (a relative import, or one from `diffusers.`), and so on through their bases. A base written otherwise (an
attribute such as `module.Base`, a call) or defined outside the package is not followed.
"""

import ast
from pathlib import Path

from .blend_methods import SOURCE_CLASS
from .edits import RewriteError, bindings, parse_source
from .model_files import mixin_class
from .source_files import SourceFile, read_source


def _module_path(importer: Path, node: ast.ImportFrom, package: Path) -> Path | None:
    """The file of the package that `node`, in the module `importer`, imports from; None outside the package."""
    parents = importer.absolute().parents
    if node.level:
        if node.level > len(parents):
            return None
        base = parents[node.level - 1]
    elif node.module and (node.module == "diffusers" or node.module.startswith("diffusers.")):
        base = package.parent
    else:
        return None
    parts = node.module.split(".") if node.module else []
    for path in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if parts and path.is_file() and path.resolve().is_relative_to(package.resolve()):
            return path
    return None


def _class(path: Path, tree: ast.Module, name: str, package: Path) -> tuple[Path, ast.Module, ast.ClassDef] | None:
    """(file, its tree, the class) that the name `name` of the module `path` binds to a class, where it can be
    followed: a class of the module, or one imported from a module of the package."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return path, tree, node
        if isinstance(node, ast.ImportFrom):
            alias = next((alias for alias in node.names if (alias.asname or alias.name) == name), None)
            if alias is not None and (module := _module_path(path, node, package)) is not None:
                source = read_source(module)
                return _class(module, parse_source(source.text, module), alias.name, package)
    return None


def check_mixin_bases(vae: SourceFile, package: Path, names: list[str]) -> None:
    """Raise `RewriteError` where a class `AutoencoderMixin` of `vae` derives from (directly or not, followed as the
    module docstring says) binds one of `names` (the blend methods the rewrite writes into the mixin) in its body."""
    tree = parse_source(vae.text, vae.path)
    mixin = mixin_class(tree, vae.path)
    pending = [(vae.path, tree, mixin)] if mixin is not None else []
    seen = set()
    while pending:
        path, module, cls = pending.pop()
        for base in cls.bases:
            found = _class(path, module, base.id, package) if isinstance(base, ast.Name) else None
            if found is None or (found[0], found[2].name) in seen:
                continue
            seen.add((found[0], found[2].name))
            pending.append(found)
            bound = bindings(found[2].body, module=False)
            for name in names:
                if name in bound:
                    raise RewriteError(
                        f"{found[0]}: line {bound[name][0][0]}: {found[2].name}.{name}, in a base of {SOURCE_CLASS}, "
                        f"would be shadowed by the {SOURCE_CLASS}.{name} the rewrite writes: move it into "
                        f"{SOURCE_CLASS} or rename it; nothing was written"
                    )
