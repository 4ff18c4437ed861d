"""Record classes: what ``@dataclasses.dataclass`` makes, built at a fraction of its cost.

A ``distc shard`` run defines ~50 classes with fields; the dataclasses module spent ~1/3 of the
run's start-up building them (each method compiled apart, every annotation inspected, and
``import dataclasses`` pulls in ``inspect``).  :func:`record` makes the same methods, compiling
only ``__init__`` (the others are closures over the field names): ``__init__`` (defaults,
``default_factory``, ``init=False``, ``__post_init__``; a mutable default is refused), ``__repr__`` (``...`` for a
record met again inside itself), ``__eq__``, ``__hash__`` (the dataclass rules: a frozen class
with ``eq`` hashes its compared fields; an ``eq`` class that is not frozen is unhashable; a method
the class defines itself is kept), ``frozen`` (assigning raises :class:`FrozenInstanceError`, an
``AttributeError``), ``slots`` (with pickling and copying of frozen instances), ``__match_args__``
and fields inherited from record bases.  :func:`field`, :func:`fields` and :func:`replace` take
the place of their dataclasses namesakes (and accept real dataclasses too); the dataclasses module's
own functions take records (``__dataclass_fields__``, made when asked for).
"""

from __future__ import annotations

from _thread import get_ident
from operator import attrgetter
from types import FunctionType

from .record_templates import __dict__ as _TEMPLATES  # (not `from . import`: distc.ir's __getattr__ would answer)

MISSING = type("_Missing", (), {"__repr__": lambda self: "MISSING"})()


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen record."""


class Field:
    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata")

    def __init__(self, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None, compare=True,
                 metadata=None) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name, self.type = "", None  # (the annotation, as written)
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare = init, repr, hash, compare
        self.metadata = {} if metadata is None else metadata

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None, compare=True,
          metadata=None) -> Field:
    return Field(default, default_factory, init, repr, hash, compare, metadata)


def fields(obj) -> tuple:
    """The fields of a record (class or instance), in order."""
    fs = getattr(obj, "__record_fields__", None)
    if fs is None:  # a dataclass
        import dataclasses

        return dataclasses.fields(obj)
    return fs


def replace(obj, /, **changes):
    """A copy of ``obj`` with ``changes`` (as ``dataclasses.replace``: through ``__init__``)."""
    fs = getattr(type(obj), "__record_fields__", None)
    if fs is None:  # a dataclass
        import dataclasses

        return dataclasses.replace(obj, **changes)
    for f in fs:
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


class _DataclassFields:
    """A record's ``__dataclass_fields__``, made when first asked for: to the dataclasses module a
    record is a dataclass (``dataclasses.replace``, ``fields``, ``asdict``, ``is_dataclass`` take
    it), at no cost to a run that never asks."""

    def __get__(self, obj, cls) -> dict:
        import dataclasses

        out = {}
        for f in cls.__record_fields__:
            d = dataclasses.field(default=dataclasses.MISSING if f.default is MISSING else f.default,
                                  default_factory=(dataclasses.MISSING if f.default_factory is MISSING
                                                   else f.default_factory),
                                  init=f.init, repr=f.repr, hash=f.hash, compare=f.compare, metadata=f.metadata or None)
            d.name, d.type, d._field_type = f.name, f.type, dataclasses._FIELD  # (as dataclass() sets them)
            out[f.name] = d
        return out


_DATACLASS_FIELDS = _DataclassFields()


def _tuple(obj: str, names: list[str]) -> str:
    return "(" + "".join(f"{obj}.{n}," for n in names) + ")"


def _source(cls, fs: list[Field], frozen: bool, slots: bool, ns: dict, own: dict, eq: bool, hash_fn: bool) -> str:
    """The text of ``__init__`` (it runs for every object made) and, for a frozen record (a value
    the passes compare and hash in their inner loops), of ``__eq__`` and ``__hash__``."""
    lines = []
    put = "_setattr(self, {0!r}, {1})" if frozen else "self.{0} = {1}"
    params, body = ["self"], []
    for f in fs:
        n = f.name
        if f.default_factory is not MISSING:
            ns[f"_f_{n}"] = f.default_factory
            if f.init:
                params.append(f"{n}=_FACTORY")
                body.append(put.format(n, f"_f_{n}() if {n} is _FACTORY else {n}"))
            else:
                body.append(put.format(n, f"_f_{n}()"))
        elif f.init:
            if f.default is not MISSING:
                ns[f"_d_{n}"] = f.default
                params.append(f"{n}=_d_{n}")
            else:
                if params[-1].count("="):
                    raise TypeError(f"non-default argument {n!r} follows default argument")
                params.append(n)
            body.append(put.format(n, n))
        elif f.default is not MISSING and slots:  # (a dict class reads the class attribute)
            ns[f"_d_{n}"] = f.default
            body.append(put.format(n, f"_d_{n}"))
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    if "__init__" not in own:
        lines += [f"def __init__({', '.join(params)}):", *("    " + b for b in body or ["pass"])]
    if frozen and eq and "__eq__" not in own:
        names = [f.name for f in fs if f.compare]
        lines += ["def __eq__(self, other):", "    if other.__class__ is self.__class__:",
                  f"        return {_tuple('self', names)} == {_tuple('other', names)}", "    return NotImplemented"]
    if frozen and hash_fn:
        names = [f.name for f in fs if (f.compare if f.hash is None else f.hash)]
        lines += ["def __hash__(self):", f"    return hash({_tuple('self', names)})"]
    return "\n".join(lines)


TEMPLATE_FIELDS = 12  # record_templates holds the shapes of methods of up to this many fields
TEMPLATE_MEMO = 8  # ... and of a frozen record's __init__ of up to this many fields and a memo slot after them
_RESERVED = frozenset(("self", "other", "hash", "_setattr", "NotImplemented", "__class__", "__post_init__"))  # (the templates' own names)


def template_source(most: int = TEMPLATE_FIELDS) -> str:
    """The text of :mod:`distc.ir.record_templates`: the methods :func:`_source` writes, for 0 to
    ``most`` fields named ``_0_``, ``_1_``, ...  (``python -c 'import distc.ir.records as r;
    print(r.template_source(), end="")' > distc/ir/record_templates.py``)."""
    out = [f'"""{_TEMPLATES["__doc__"]}"""', "", "# fmt: off", ""]
    for n in range(most + 1):
        ph = [f"_{i}_" for i in range(n)]
        out.append(f"def init_{n}({', '.join(['self', *ph])}):")
        out += [f"    self.{p} = {p}" for p in ph] or ["    pass"]
        out.append(f"def frozen_init_{n}({', '.join(['self', *ph])}):")
        out += [f"    _setattr(self, {p!r}, {p})" for p in ph] or ["    pass"]
        if n <= TEMPLATE_MEMO:  # (one more field, not a parameter, set to its default; then __post_init__)
            for post in ("", "p"):
                out.append(f"def frozen_init_{n}_d{post}({', '.join(['self', *ph])}):")
                out += [f"    _setattr(self, {p!r}, {p})" for p in ph]
                out.append("    _setattr(self, '_x_', _d__x_)")
                if post:
                    out.append("    self.__post_init__()")
        out += [f"def eq_{n}(self, other):", "    if other.__class__ is self.__class__:",
                f"        return {_tuple('self', ph)} == {_tuple('other', ph)}", "    return NotImplemented"]
        out += [f"def hash_{n}(self):", f"    return hash({_tuple('self', ph)})"]
    return "\n".join(out) + "\n"


def _plan(cls, fs: list[Field], frozen: bool, slots: bool, own: dict, eq: bool, hash_fn: bool) -> list | None:
    """How :func:`_templated` makes what :func:`_source` writes for ``cls`` (same arguments): one
    ``(method, template name, field names, defaults)`` a method; None where no template has its
    shape (a factory, an ``init=False`` field set in ``__init__``, ``__post_init__``, many fields)."""
    params, defaults, memo = [], [], []
    for f in fs:
        if not f.init and f.default is not MISSING and slots and f.default_factory is MISSING:
            memo.append(f.name)  # (set to its default in __init__: a frozen record's memo slot, after its parameters)
            continue
        if f.default_factory is not MISSING or memo:
            return None
        if f.init:
            params.append(f.name)
            if f.default is not MISSING:
                defaults.append(f.default)
            elif defaults:
                return None  # (the source's error: said by compiling it)
    post = hasattr(cls, "__post_init__")
    if (post or memo) and not (frozen and len(memo) == 1 and len(params) <= TEMPLATE_MEMO):
        return None
    plan = []
    if "__init__" not in own:
        if memo:
            plan.append(("__init__", f"frozen_init_{len(params)}_d{'p' if post else ''}", params + memo, tuple(defaults)))
        else:
            plan.append(("__init__", f"{'frozen_' if frozen else ''}init_{len(params)}", params, tuple(defaults)))
    if frozen and eq and "__eq__" not in own:
        plan.append(("__eq__", "eq_%d", [f.name for f in fs if f.compare], ()))
    if frozen and hash_fn:
        plan.append(("__hash__", "hash_%d", [f.name for f in fs if (f.compare if f.hash is None else f.hash)], ()))
    out = []
    for k, template, names, dflt in plan:
        if len(names) > TEMPLATE_FIELDS or _RESERVED.intersection(names) or any(n.startswith("_d_") for n in names):
            return None
        out.append((k, template.replace("%d", str(len(names))), names, dflt))
    return out


def _templated(plan: list, ns: dict) -> dict:
    """The methods of ``plan`` (see :func:`_plan`): templates' code, placeholders renamed, with
    ``ns`` for globals (as ``exec(src, ns)`` gives them)."""
    ns.setdefault("__builtins__", __builtins__)
    out = {}
    for k, template, names, defaults in plan:
        code = _TEMPLATES[template].__code__
        ren = {f"_{i}_": n for i, n in enumerate(names)}
        if template.endswith(("_d", "_dp")):  # (the last name: the memo slot, '_x_', set to the global '_d__x_')
            ren.pop(f"_{len(names) - 1}_")
            ren["_x_"], ren["_d__x_"] = names[-1], f"_d_{names[-1]}"
        code = code.replace(co_name=k, co_qualname=k, co_filename="<string>",
                            co_varnames=tuple(ren.get(v, v) for v in code.co_varnames),
                            co_names=tuple(ren.get(v, v) for v in code.co_names),
                            co_consts=tuple(ren.get(c, c) if type(c) is str else c for c in code.co_consts))
        out[k] = FunctionType(code, ns, k, defaults or None)
    return out


def _getter(names: list[str]):
    """obj -> the tuple of its ``names`` (as the dataclass methods compare and hash them)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()


def _methods(cls, fs: list[Field], frozen: bool, eq: bool) -> dict:
    """``__repr__``, ``__setattr__``, ``__delattr__`` and a mutable record's ``__eq__`` (closures:
    nothing compiled)."""
    out = {}
    shown = [f.name for f in fs if f.repr]

    running = set()  # (record, thread) pairs being shown: a cycle shows '...', as a dataclass does

    def __repr__(self):
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            return f"{self.__class__.__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in shown) + ")"
        finally:
            running.discard(key)

    out["__repr__"] = __repr__
    if eq and not frozen:
        key = _getter([f.name for f in fs if f.compare])

        def __eq__(self, other):
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented

        out["__eq__"] = __eq__
    if frozen:
        names = frozenset(f.name for f in fs)

        def __setattr__(self, name, value):
            if type(self) is cls or name in names:
                raise FrozenInstanceError(f"cannot assign to field {name!r}")
            super(cls, self).__setattr__(name, value)

        def __delattr__(self, name):
            if type(self) is cls or name in names:
                raise FrozenInstanceError(f"cannot delete field {name!r}")
            super(cls, self).__delattr__(name)

        out["__setattr__"], out["__delattr__"] = __setattr__, __delattr__
    return out


def _deferred(cls, src: str, ns: dict, names: list[str], plan: list | None = None) -> dict:
    """Stand-ins for the compiled methods ``names`` of ``cls`` (``src`` defines them): the first
    call of any of them makes them -- from ``plan``'s templates (see :func:`_plan`), else by
    compiling ``src``, one ``exec`` for the class -- and puts them in their places, then calls its
    own.  A record the run never makes (or, frozen, never compares or hashes) costs nothing: a
    compile is ~0.25 ms a class, 20 of the 49 a ``distc shard -q`` run defines.  Two threads may
    both make them: each installs the same methods."""

    def load() -> None:
        if plan is not None:
            ns.update(_templated(plan, ns))
        else:
            exec(src, ns)
        for k in names:
            fn = ns[k]
            fn.__qualname__ = f"{cls.__qualname__}.{k}"
            setattr(cls, k, fn)

    def stand_in(k: str):
        def method(self, *args, **kw):
            if cls.__dict__.get(k) is method:
                load()
            return cls.__dict__[k](self, *args, **kw)

        return method

    return {k: stand_in(k) for k in names}


def _build(cls, frozen: bool, slots: bool, eq: bool):
    by_name: dict[str, Field] = {}  # (a field redefined keeps its first place, as in a dataclass)
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            by_name[f.name] = f
    own = cls.__dict__
    for name, ann in own.get("__annotations__", {}).items():
        if isinstance(ann, str) and ann.startswith(("ClassVar", "typing.ClassVar")):
            continue
        v = own.get(name, MISSING)
        f = v if isinstance(v, Field) else Field(default=v)
        f.name, f.type = name, ann
        if f.default.__class__.__hash__ is None:  # (unhashable stands for mutable, as in a dataclass)
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        by_name[name] = f
        if isinstance(v, Field):
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
    fs = list(by_name.values())
    names = tuple(f.name for f in fs)
    if slots:
        d = {k: v for k, v in own.items() if k not in names and k not in ("__dict__", "__weakref__")}
        inherited = {s for b in cls.__mro__[1:-1] for s in _slots(b)}
        d["__slots__"] = tuple(n for n in names if n not in inherited)  # (a base's slot serves)
        qualname = cls.__qualname__
        cls = type(cls)(cls.__name__, cls.__bases__, d)
        cls.__qualname__ = qualname
        own = cls.__dict__
    explicit = own.get("__hash__", MISSING)
    explicit_hash = not (explicit is MISSING or (explicit is None and "__eq__" in own))
    methods = _methods(cls, fs, frozen, eq)
    ns = {"_setattr": object.__setattr__, "_FACTORY": MISSING}
    hash_fn = eq and frozen and not explicit_hash
    src = _source(cls, fs, frozen, slots, ns, own, eq, hash_fn)  # (its errors: now)
    methods.update(_deferred(cls, src, ns, [k for k in ("__init__", "__eq__", "__hash__") if f"def {k}(" in src],
                             _plan(cls, fs, frozen, slots, own, eq, hash_fn)))
    for k, fn in methods.items():
        if k not in own or k == "__hash__":  # (a class with its own __eq__ has __hash__ = None)
            fn.__qualname__ = f"{cls.__qualname__}.{k}"
            setattr(cls, k, fn)
    if eq and not frozen and not explicit_hash:
        cls.__hash__ = None
    cls.__record_fields__ = tuple(fs)
    cls.__dataclass_fields__ = _DATACLASS_FIELDS
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(f.name for f in fs if f.init)
    if slots and frozen:
        cls.__getstate__ = _getstate
        cls.__setstate__ = _setstate
    return cls


def _slots(cls) -> tuple:
    s = cls.__dict__.get("__slots__", ())
    return (s,) if isinstance(s, str) else tuple(s)


def _getstate(self):
    return [getattr(self, f.name) for f in self.__record_fields__]


def _setstate(self, state) -> None:
    for f, value in zip(self.__record_fields__, state):
        object.__setattr__(self, f.name, value)


def record(cls=None, /, *, frozen: bool = False, slots: bool = False, eq: bool = True):
    """``@record``, ``@record(frozen=True, slots=True)``: as ``@dataclass`` with the same options."""

    def wrap(c):
        return _build(c, frozen, slots, eq)

    return wrap if cls is None else wrap(cls)
