"""The contents of the method, encoder and evaluator registries read from their source files with `ast`, without
importing them (`methods` and `bench.encoders.models` import torch), so that `clbench run` checks names and knobs,
and `clbench list` shows them, before anything pays for torch and transformers. It collects:

- `@METHODS.register("name", "alias", ...)` (likewise `ENCODERS`, `EVALUATORS`) on a class or function, and
  `METHODS.add("name", obj, "alias", ...)` at module level, also in a module-level `for NAME in ITERABLE:` loop
  over a literal or a module-level name bound to one (the tiny models), with the object's docstring (`Entry.doc`:
  also one a factory sets as `__doc__`);
- for methods, the knobs and defaults of the `Config = SomeConfig` dataclass of the class or of its bases (with
  its dataclass bases' fields, across the `methods` modules; `NoConfig`: no knobs) and its `VARIANT_KNOBS` literal.

Anything it cannot read for certain raises CatalogError; `registry()` (what callers use: the catalog merged with
the real registry's entries) then imports the real modules: slower, never wrong (tests/test_fast_errors.py checks)."""

from __future__ import annotations

import __future__
import ast
import dataclasses
import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from bench.errors import BenchError
from bench.registry import ENCODERS, EVALUATORS, METHODS, PLUGIN_GROUPS, Registry, plugins

KINDS = {"method": "METHODS", "encoder": "ENCODERS", "evaluator": "EVALUATORS"}  # kind -> registry variable
REAL = {"method": METHODS, "encoder": ENCODERS, "evaluator": EVALUATORS}
PACKAGES = {"method": "bench.methods", "encoder": "bench.encoders.models", "evaluator": "bench.evaluators"}  # fill them


class CatalogError(Exception):
    """The sources hold something this reader cannot follow for certain."""


@dataclass(frozen=True)
class Entry:
    """One registration read from source: the registered name, its aliases, the decorated (or added) object's
    name, the file it is in, and for methods the knobs with their defaults."""

    name: str
    aliases: tuple[str, ...]
    target: str
    path: str
    knobs: tuple[tuple[str, Any], ...] = ()
    config: tuple[str, str] | None = None  # methods: (module, class) of the Config dataclass
    variants: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # methods: the Config's VARIANT_KNOBS
    doc: str | None = dataclasses.field(default=None, compare=False)  # its docstring ("": none; None: unreadable)

    def config_fields(self) -> dict[str, Any]:
        """The knobs and their defaults, as `Method.config_fields()` gives them."""
        return dict(self.knobs)

    def variant_knobs(self) -> dict[str, dict[str, Any]]:
        """variant -> the knobs it implies, as `Method.variant_knobs()` gives them."""
        return {variant: dict(knobs) for variant, knobs in self.variants}

    @property
    def Config(self) -> type:  # noqa: N802  (named as Method.Config, which it stands in for)
        """The method's Config dataclass built from its source alone (see `config_class`)."""
        if self.config is None:
            raise CatalogError(f"{self.name} is not a method")
        return config_class(*self.config)


# ----------------------------------------------------------------------------------------------- sources

def source_files(kind: str) -> list[Path]:
    """The files whose registrations fill the registry of `kind`, found without importing them: methods/*.py by the
    `bench.methods` package's spec (installed from methods/), the others by their place in the `bench` folder."""
    bench_dir = Path(sys.modules["bench"].__file__).resolve().parent
    if kind == "encoder":
        return [bench_dir / "encoders" / "models.py"]
    if kind == "evaluator":
        return sorted((bench_dir / "evaluators").glob("*.py"))
    spec = importlib.util.find_spec("bench.methods")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError("package 'bench.methods' not found")
    return sorted(p for folder in spec.submodule_search_locations for p in Path(folder).glob("*.py"))


def module_name(path: Path, kind: str) -> str:
    """`methods/clld.py` -> `bench.methods.clld` (only methods are followed across modules)."""
    return f"{PACKAGES[kind] if kind != 'encoder' else 'bench.encoders'}.{path.stem}"


@functools.lru_cache(maxsize=None)
def parse(kind: str) -> tuple[Entry, ...]:
    """Every registration of `kind` ("method", "encoder", "evaluator"); CatalogError where not read for certain."""
    modules = sources(kind)
    entries = []
    for module, (path, tree) in modules.items():
        found = registrations(tree, KINDS[kind], str(path))
        if kind == "method":
            found = [dataclasses.replace(e, knobs=tuple(method_knobs(modules, module, e.target).items()),
                                         config=find_config(modules, module, e.target, set()),
                                         variants=method_variants(modules, module, e.target))
                     for e in found]
        entries.extend(found)
    return tuple(entries)


@functools.lru_cache(maxsize=None)
def sources(kind: str) -> dict[str, tuple[Path, ast.Module]]:
    """module name -> (file, syntax tree) of the source files of `kind`; CatalogError where one is unreadable."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}")
    modules = {}
    for path in source_files(kind):
        try:
            modules[module_name(path, kind)] = (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            raise CatalogError(f"cannot read {path}: {exc}") from exc
    return modules


LIGHT_GLOBALS = {"dataclass": dataclass, "field": dataclasses.field, "BenchError": BenchError, "Any": Any}


@functools.lru_cache(maxsize=None)
def config_class(module: str, name: str) -> type:
    """A method's Config dataclass built from its own source lines (and its dataclass bases'), with only dataclass
    tools, BenchError and the module's literal constants at hand, so that its `__post_init__` checks run as written
    without importing the method (torch). CatalogError where it needs more (the real class then checks)."""
    modules = sources("method")
    module, node = class_def(modules, module, name)
    namespace: dict[str, Any] = {**LIGHT_GLOBALS, **module_constants(modules[module][1])}
    for base in node.bases:
        base_module, base_node = class_def(modules, module, base_name(base, module))
        namespace[base_name(base, module)] = config_class(base_module, base_node.name)
    code = compile(ast.Module([node], type_ignores=[]), str(modules[module][0]), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    try:
        exec(code, namespace)  # the project's own class statement, as importing its module would run it
    except Exception as exc:
        raise CatalogError(f"{module}.{name} cannot be built from its source alone ({exc})") from exc
    return namespace[name]


def registrations(tree: ast.Module, variable: str, path: str) -> list[Entry]:
    """The registrations made through `variable` (e.g. METHODS) at the top level of a module."""
    entries: list[Entry] = []
    seen: set[int] = set()  # the register/add calls accounted for
    constants = module_constants(tree)

    def visit(statements: Sequence[ast.stmt], bound: dict[str, Any]) -> None:
        for node in statements:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    if is_call(decorator, variable, "register"):
                        names = [literal(a, bound, path) for a in decorator.args]
                        if not names or decorator.keywords:
                            raise CatalogError(f"{path}:{decorator.lineno}: register() needs literal names")
                        doc = ast.get_docstring(node) or ""
                        entries.append(Entry(names[0], tuple(names[1:]), node.name, path, doc=doc))
                        seen.add(id(decorator))
            elif isinstance(node, ast.Expr) and is_call(node.value, variable, "add"):
                call = node.value
                if len(call.args) < 2 or call.keywords:
                    raise CatalogError(f"{path}:{call.lineno}: add() needs a literal name and an object")
                target = call.args[1].id if isinstance(call.args[1], ast.Name) else ""
                aliases = tuple(literal(a, bound, path) for a in call.args[2:])
                entries.append(Entry(literal(call.args[0], bound, path), aliases, target, path,
                                     doc=added_doc(call.args[1], tree, bound)))
                seen.add(id(call))
            elif isinstance(node, ast.For) and not node.orelse and isinstance(node.target, ast.Name):
                try:
                    values = list(literal(node.iter, bound, path))
                except TypeError:
                    raise CatalogError(f"{path}:{node.lineno}: cannot iterate over the loop's values") from None
                for value in values:
                    visit(node.body, {**bound, node.target.id: value})

    visit(tree.body, constants)
    missed = [n for n in ast.walk(tree) if (is_call(n, variable, "register") or is_call(n, variable, "add"))
              and id(n) not in seen]
    if missed:  # e.g. one inside a function or under `if`: only running the module tells whether it happens
        raise CatalogError(f"{path}:{missed[0].lineno}: a {variable} registration this reader cannot follow")
    return entries


def added_doc(obj: ast.expr, tree: ast.Module, bound: dict[str, Any]) -> str | None:
    """The docstring of an object `add()`ed by name, or made by a module-level factory that sets its `__doc__`
    from its arguments and the module's constants (the tiny models); None where it cannot be read for certain."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if isinstance(obj, ast.Name):
        return (ast.get_docstring(defs[obj.id]) or "") if obj.id in defs else None
    factory: Any = defs.get(obj.func.id) if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name) else None
    try:  # the project's own expression, with only its literal constants and the factory's arguments at hand
        (doc,) = [s.value for s in factory.body if isinstance(s, ast.Assign)
                  and [ast.unparse(t).rpartition(".")[2] for t in s.targets] == ["__doc__"]]
        args = zip([a.arg for a in factory.args.args], [literal(v, bound, "") for v in obj.args], strict=True)
        return str(eval(compile(ast.Expression(doc), "<doc>", "eval"), {"__builtins__": {}}, {**bound, **dict(args)}))
    except Exception:  # no factory, not one `__doc__ = ...`, or more than literals needed
        return None


def is_call(node: ast.AST, variable: str, method: str) -> bool:
    """Whether `node` is `variable.method(...)` (e.g. `METHODS.register(...)`)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
            and isinstance(node.func.value, ast.Name) and node.func.value.id == variable)


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level `NAME = <literal>` assignments (e.g. TINY_MODELS), for loops that register over them."""
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    return constants


def literal(node: ast.expr, bound: dict[str, Any], path: str) -> Any:
    """The value of a literal, or of a name bound to one (a loop variable, a module constant)."""
    if isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CatalogError(f"{path}:{node.lineno}: {ast.unparse(node)!r} is not a literal") from None


# ----------------------------------------------------------------------------------------------- knobs

def method_knobs(modules: dict[str, tuple[Path, ast.Module]], module: str, cls: str) -> dict[str, Any]:
    """The knobs (dataclass fields and defaults) of the Config of class `cls` in `module`."""
    config = find_config(modules, module, cls, set())
    if config is None:
        raise CatalogError(f"{module}.{cls}: no `Config = ...` in the class or its bases")
    return dataclass_fields(modules, *config, set())


def method_variants(modules: dict[str, tuple[Path, ast.Module]], module: str,
                    cls: str) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """The `VARIANT_KNOBS` literal of the Config of class `cls` in `module` (variant -> implied knobs)."""
    config = find_config(modules, module, cls, set())
    found = class_attribute(modules, *config, "VARIANT_KNOBS", set()) if config is not None else None
    table = literal(found[1], {}, str(modules[found[0]][0])) if found is not None else {}
    if not isinstance(table, dict) or not all(isinstance(knobs, dict) for knobs in table.values()):
        raise CatalogError(f"{module}.{cls}: VARIANT_KNOBS is not a dict of variant -> dict of knobs")
    return tuple((variant, tuple(knobs.items())) for variant, knobs in table.items())


def class_def(modules: dict[str, tuple[Path, ast.Module]], module: str, name: str) -> tuple[str, ast.ClassDef]:
    """(module, class definition) that the name `name` means in `module`: a class defined there, or one
    imported from another module of the package (`from bench.methods.base import Method`, relative too)."""
    tree = modules[module][1]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    package = module.rsplit(".", 1)[0]
                    source = (f"{package}.{node.module}" if node.module else package) if node.level else node.module
                    if source in modules:
                        return class_def(modules, source, alias.name)
    raise CatalogError(f"{module}: cannot find class {name!r}")


def base_name(node: ast.expr, module: str) -> str:
    """The name of a base class given by a plain name."""
    if isinstance(node, ast.Name):
        return node.id
    raise CatalogError(f"{module}: base class {ast.unparse(node)!r} is not a plain name")


def find_config(modules: dict[str, tuple[Path, ast.Module]], module: str, cls: str,
                visiting: set[tuple[str, str]]) -> tuple[str, str] | None:
    """(module, name) of the class assigned to `Config` in class `cls` or, first found, in its bases."""
    found = class_attribute(modules, module, cls, "Config", visiting)
    if found is None:
        return None
    if not isinstance(found[1], ast.Name):
        raise CatalogError(f"{module}.{cls}: Config is not a plain class name")
    where, config = class_def(modules, found[0], found[1].id)
    return where, config.name


def class_attribute(modules: dict[str, tuple[Path, ast.Module]], module: str, cls: str, name: str,
                    visiting: set[tuple[str, str]]) -> tuple[str, ast.expr] | None:
    """(module, value) of `name = value` in class `cls` or, first found, in its bases; None where none has it."""
    module, node = class_def(modules, module, cls)
    if (module, node.name) in visiting:
        raise CatalogError(f"{module}.{cls}: circular bases")
    for statement in node.body:
        target, value = assignment(statement)
        if target == name and value is not None:
            return module, value
    for base in (b for b in node.bases if base_name(b, module) != "object"):
        found = class_attribute(modules, module, base_name(base, module), name, visiting | {(module, node.name)})
        if found is not None:
            return found
    return None


def assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """(name, value) of `name = value` or `name: type = value`; (None, None) for anything else."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def is_dataclass_def(node: ast.ClassDef) -> bool:
    """Whether the class is decorated with `@dataclass` or `@dataclass(...)`."""
    for decorator in node.decorator_list:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(func, ast.Name) and func.id == "dataclass") or \
                (isinstance(func, ast.Attribute) and func.attr == "dataclass"):
            return True
    return False


def is_classvar(annotation: ast.expr) -> bool:
    """Whether an annotation is `ClassVar` or `ClassVar[...]` (also as a string, or typing.ClassVar)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.replace("typing.", "").startswith("ClassVar")
    node = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (isinstance(node, ast.Name) and node.id == "ClassVar") or \
        (isinstance(node, ast.Attribute) and node.attr == "ClassVar")


def dataclass_fields(modules: dict[str, tuple[Path, ast.Module]], module: str, cls: str,
                     visiting: set[tuple[str, str]]) -> dict[str, Any]:
    """Field names and defaults of dataclass `cls` (base classes' fields first, as dataclasses order them);
    a field without a default, or with a default_factory, has `dataclasses.MISSING` as `Field.default` has."""
    module, node = class_def(modules, module, cls)
    if not is_dataclass_def(node):
        raise CatalogError(f"{module}.{cls}: a Config that is not a dataclass")
    if (module, node.name) in visiting:
        raise CatalogError(f"{module}.{cls}: circular bases")
    fields: dict[str, Any] = {}
    for base in reversed(node.bases):
        name = base_name(base, module)
        if name != "object":
            fields.update(dataclass_fields(modules, module, name, visiting | {(module, node.name)}))
    path = str(modules[module][0])
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                and not is_classvar(statement.annotation):
            fields[statement.target.id] = field_default(statement.value, path)
    return fields


def field_default(value: ast.expr | None, path: str) -> Any:
    """The default of a dataclass field: a literal, `field(default=literal)`, or MISSING."""
    if value is None:
        return dataclasses.MISSING
    if isinstance(value, ast.Call) and ((isinstance(value.func, ast.Name) and value.func.id == "field") or
                                        (isinstance(value.func, ast.Attribute) and value.func.attr == "field")):
        given = {k.arg: k.value for k in value.keywords}
        return literal(given["default"], {}, path) if "default" in given else dataclasses.MISSING
    return literal(value, {}, path)


# ----------------------------------------------------------------------------------------------- registries

def registry(kind: str) -> Registry:
    """The names (and, for methods, knobs) the registry of `kind` holds once filled, without filling it: the real
    registry when its package is imported already (or its sources cannot be read for certain), else the catalog
    merged with whatever the real registry holds (entries registered at run time win)."""
    real = REAL[kind]
    if PACKAGES[kind] in sys.modules:
        return real
    try:
        if kind in PLUGIN_GROUPS and plugins(kind):
            raise CatalogError(f"{kind} plugins are installed (entry points): their sources are not read here")
        entries = parse(kind)
    except CatalogError:
        importlib.import_module(PACKAGES[kind])
        return real
    merged: Registry = Registry(real.kind)
    for name, obj in real.items():
        merged.add(name, obj, *real.aliases_of(name))
    for entry in entries:
        if not any(key in merged for key in (entry.name, *entry.aliases)):
            merged.add(entry.name, entry, *entry.aliases)
    return merged


def evaluator_names(names: list[str] | None, evaluators: Registry | None = None) -> list[str]:
    """Canonical evaluator names; None or ["all"] means every registered evaluator, ["none"] none. `evaluators`:
    the registry to check against (default: the real one, bench.registry.EVALUATORS)."""
    evaluators = EVALUATORS if evaluators is None else evaluators
    if names is None or names == ["all"]:
        return [name for name, _ in evaluators.items()]
    if names == ["none"]:
        return []
    return list(dict.fromkeys(evaluators.canonical(n) for n in names))
