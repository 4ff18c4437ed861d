"""distc.ir.records: classes made by ``@record`` behave as ``@dataclasses.dataclass`` makes them.

Each case defines one class body twice, once under each decorator, and compares what a user of
the class sees: construction (positional, keywords, defaults, factories, ``init=False``,
``__post_init__``), ``repr``, ``==``, ``hash`` (the same values), immutability, slots, pickling,
copying, ``replace`` and ``fields``.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from distc.ir import records
from distc.ir.records import Field, FrozenInstanceError, field, fields, record, replace


def make(deco, fld, **opts):
    """The same five classes built by ``deco`` (dataclass or record) with its ``field``."""

    class Point:
        x: int
        y: int = 0
        label: str = fld(default="p", compare=False)

        def norm(self) -> int:
            return abs(self.x) + abs(self.y)

    class Bag:
        items: list = fld(default_factory=list)
        names: dict = fld(default_factory=dict, repr=False)
        count: int = 0

    class Checked:
        shape: tuple
        memo: dict | None = fld(default=None, init=False, compare=False, repr=False, hash=False)

        def __post_init__(self) -> None:
            if not isinstance(self.shape, tuple):
                raise ValueError("shape must be a tuple")

    class OwnHash:
        a: int
        b: int = 1

        def __hash__(self) -> int:
            return 7

    class Empty:
        pass

    return {c.__name__: deco(c, **opts) for c in (Point, Bag, Checked, OwnHash, Empty)}


VARIANTS = [dict(), dict(frozen=True), dict(frozen=True, slots=True), dict(slots=True), dict(eq=False)]


def outcome(f, *a):
    """f(*a), or the type of what it raised."""
    try:
        return f(*a)
    except Exception as e:  # noqa: BLE001 - compared, not handled
        return type(e)


def pair(opts):
    return make(dataclasses.dataclass, dataclasses.field, **opts), make(record, field, **opts)


@pytest.mark.parametrize("opts", VARIANTS, ids=lambda o: ",".join(o) or "plain")
def test_record_behaves_as_dataclass(opts):
    dc, rc = pair(opts)
    for name in dc:
        D, R = dc[name], rc[name]
        args = {"Point": [(3,), (3, 4), (3, 4, "q")], "Bag": [(), ([1],), ([1], {"a": 1}, 2)],
                "Checked": [((2, 3),)], "OwnHash": [(1,), (1, 2)], "Empty": [()]}[name]
        for a in args:
            d, r = D(*a), R(*a)
            assert repr(r).replace(".R", ".D") == repr(d), name
            assert (r == R(*a)) == (d == D(*a)) and (r != R(*a)) == (d != D(*a))
            assert (D.__hash__ is None) == (R.__hash__ is None), name
            if D.__hash__ is not None and opts.get("eq", True):
                assert outcome(hash, r) == outcome(hash, d), name
            assert [f.name for f in fields(r)] == [f.name for f in dataclasses.fields(d)]
            assert R.__match_args__ == D.__match_args__
            assert hasattr(r, "__dict__") == hasattr(d, "__dict__")
            if opts.get("frozen"):
                with pytest.raises(FrozenInstanceError):
                    setattr(r, fields(r)[0].name if fields(r) else "z", 1)
                with pytest.raises(AttributeError):
                    delattr(r, fields(r)[0].name if fields(r) else "z")
            assert copy.copy(r) == r if opts.get("eq", True) else True
            assert repr(copy.deepcopy(r)) == repr(r)
        assert R.__init__.__defaults__ == D.__init__.__defaults__ or name == "Bag"
    # keywords, factories (a new list each), init=False, __post_init__
    b1, b2 = rc["Bag"](), rc["Bag"](count=3)
    assert b1.items == [] and b1.items is not b2.items and b2.count == 3
    c = rc["Checked"]((1,))
    assert c.memo is None and "memo" not in repr(c)
    with pytest.raises(ValueError, match="shape must be a tuple"):
        rc["Checked"]([1])
    with pytest.raises(TypeError):
        rc["Checked"]((1,), {})  # memo is not a parameter
    # replace goes through __init__ (so __post_init__ runs) and refuses init=False fields
    p = rc["Point"](1, 2, "a")
    q = replace(p, y=5)
    assert (q.x, q.y, q.label) == (1, 5, "a") and type(q) is type(p)
    with pytest.raises(ValueError, match="init=False"):
        replace(c, memo={})
    with pytest.raises(ValueError, match="shape must be a tuple"):
        replace(c, shape=[2])


def test_records_pickle_and_ir_values():
    from distc.ir import DenseTensorType, IntAttr, ProcessMesh, TensorDistAttr

    m = ProcessMesh((2, 2), (0, 1, 2, 3), ("dp", "mp"))
    t = TensorDistAttr(m, (0, -1), ((1, "SUM"),))
    for v in (m, t, DenseTensorType((4, 8), "f32"), IntAttr(3, "Int32")):
        for w in (pickle.loads(pickle.dumps(v)), copy.copy(v), copy.deepcopy(v)):
            assert w == v and hash(w) == hash(v) and repr(w) == repr(v)
        with pytest.raises(AttributeError):
            v.__setattr__(fields(v)[0].name, None)
    assert IntAttr(3) == IntAttr(3) and hash(IntAttr(3)) == hash((3, None))
    assert replace(DenseTensorType((4,), "f32"), shape=(8,)) == DenseTensorType((8,), "f32")
    with pytest.raises(ValueError, match="needs 4 process ids"):
        ProcessMesh((2, 2), (0, 1))


def test_dataclasses_functions_take_records():
    """Code written for the dataclasses these classes were (dataclasses.replace on an IR value ...)."""
    from distc.ir import DenseTensorType, ProcessMesh, TensorDistAttr

    t = TensorDistAttr(ProcessMesh((2,), (0, 1)), (0, -1))
    assert dataclasses.is_dataclass(t) and dataclasses.is_dataclass(TensorDistAttr)
    assert dataclasses.replace(t, dims_mapping=(-1, -1)) == replace(t, dims_mapping=(-1, -1))
    assert [f.name for f in dataclasses.fields(t)] == [f.name for f in fields(t)]
    assert dataclasses.asdict(DenseTensorType((4,), "f32")) == {"shape": (4,), "dtype": "f32", "prefix": "tensor"}
    _, rc = pair({})
    b = rc["Bag"]([1])
    assert dataclasses.replace(b, count=2).items == [1] and dataclasses.fields(b)[1].repr is False
    with pytest.raises(ValueError, match="init=False"):
        dataclasses.replace(rc["Checked"]((1,)), memo={})


def test_replace_and_fields_take_dataclasses_too():
    @dataclasses.dataclass(frozen=True)
    class D:
        a: int
        b: int = 2

    assert replace(D(1), b=3) == D(1, 3)
    assert [f.name for f in fields(D)] == ["a", "b"]
    assert records.MISSING is not None and repr(records.MISSING) == "MISSING"


def test_no_module_of_distc_uses_dataclasses():
    """One way to make a class with fields (the records: cheaper to build; see the module's doc)."""
    from pathlib import Path

    root = Path(records.__file__).resolve().parent.parent
    users = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if p.name != "records.py" and ("from dataclasses" in p.read_text() or "import dataclasses" in p.read_text())]
    assert not users, f"modules using dataclasses (use distc.ir.records): {users}"


@pytest.mark.parametrize("opts", VARIANTS, ids=lambda o: ",".join(o) or "plain")
def test_subclass_fields_as_dataclass(opts):
    """A subclass that redefines a base's field keeps it in the base's place (positional
    arguments, repr, eq and hash order: a record once moved it to the end, so ``Sub(5, 6, 7)`` set
    y=5); a slotted subclass adds slots for its own fields only; a field without a default after
    one with a default is dataclass's TypeError."""
    def classes(deco):
        class Base:
            x: int = 1
            y: int = 2

        class Sub(Base):
            z: int = 3
            x: int = 9

        b = deco(Base, **opts)
        return b, deco(type("Sub", (b,), {"__annotations__": dict(Sub.__annotations__), "z": 3, "x": 9}), **opts)

    (DB, DS), (RB, RS) = classes(dataclasses.dataclass), classes(record)
    assert [f.name for f in fields(RS)] == [f.name for f in dataclasses.fields(DS)] == ["x", "y", "z"]
    assert repr(RS(5, 6, 7)).split("(")[1] == repr(DS(5, 6, 7)).split("(")[1] == "x=5, y=6, z=7)"
    assert RS.__match_args__ == DS.__match_args__ and RS().x == DS().x == 9
    if opts.get("slots"):
        assert RS.__slots__ == DS.__slots__ == ("z",)
        s = RS(5, 6, 7)
        assert copy.copy(s) == s and copy.deepcopy(s) == s  # (the state of both slots levels)
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        record(type("Bad", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}), **opts)


@pytest.mark.parametrize("opts", VARIANTS, ids=lambda o: ",".join(o) or "plain")
def test_mutable_defaults_refused_and_cycles_shown_as_dataclass(opts):
    """A list, dict or set default (plain or ``field(default=...)``) is dataclass's ValueError, with
    its message (a record once shared one list among all its objects); a tuple or frozenset
    default is fine.  A record met again inside its own repr shows ``...`` (it recursed until
    RecursionError)."""
    for deco, fld in ((dataclasses.dataclass, dataclasses.field), (record, field)):
        for bad in ([], {}, set(), fld(default=[1])):
            with pytest.raises(ValueError) as e:
                deco(type("Bad", (), {"__annotations__": {"a": "list"}, "a": bad}), **opts)
            kind = type(bad.default if isinstance(bad, (Field, dataclasses.Field)) else bad)
            assert str(e.value) == f"mutable default {kind} for field a is not allowed: use default_factory"
        ok = deco(type("Ok", (), {"__annotations__": {"a": "tuple", "b": "frozenset"}, "a": (), "b": frozenset()}), **opts)
        assert ok().a == () and ok().b == frozenset()

    def node(deco, fld):
        return deco(type("Node", (), {"__annotations__": {"name": "str", "edges": "list"},
                                      "edges": fld(default_factory=list)}), **opts)

    D, R = node(dataclasses.dataclass, dataclasses.field), node(record, field)
    d, r = D("a"), R("a")
    d.edges.append(d), r.edges.append(r)  # (in place: frozen ones too)
    r.edges.append(R("b", [r]))
    d.edges.append(D("b", [d]))
    assert repr(r) == repr(d) == "Node(name='a', edges=[..., Node(name='b', edges=[...])])"


def test_compiled_methods_are_made_on_first_call_from_any_thread():
    """``__init__`` (and a frozen record's ``__eq__``/``__hash__``) are compiled when first called,
    not when the class is made (a run defines records it never makes): until then the class holds
    stand-ins; 8 threads making, comparing and hashing at once get what one thread gets; a plain
    subclass reaching the stand-in first (``super().__init__``) gets the record's method."""
    import threading

    @record(frozen=True, slots=True)
    class Key:
        a: int
        b: str = "x"

    @record
    class Box:
        items: list = field(default_factory=list)
        n: int = 0

    class Sub(Box):
        def __init__(self, n):
            super().__init__(n=n)
            self.extra = n + 1

    assert Key.__init__.__code__.co_filename == records.__file__  # (a stand-in: nothing compiled yet)
    barrier, out = threading.Barrier(8), {}

    def job(k):
        barrier.wait()
        out[k] = (Key(k % 2), Key(k % 2) == Key(k % 2, "x"), hash(Key(k % 2)), Box(n=k).n, Sub(k).extra)

    threads = [threading.Thread(target=job, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {k: (Key(k % 2), True, hash((k % 2, "x")), k, k + 1) for k in range(8)}
    assert Key.__init__.__code__.co_filename == "<string>" and Key.__hash__.__code__.co_filename == "<string>"
    assert Key.__init__.__qualname__.endswith("Key.__init__") and Key.__init__.__defaults__ == ("x",)
    assert Sub(3).items == [] and Sub(3).items is not Sub(3).items
    with pytest.raises(TypeError):
        Key()


_SPY = r"""
import importlib, pkgutil, sys
import distc.ir.records as R
made = []
orig = R._deferred
def spy(cls, src, ns, names, plan=None):
    made.append((cls.__qualname__, src, dict(ns), names, plan))
    return orig(cls, src, ns, names, plan)
R._deferred = spy
import distc
for m in pkgutil.walk_packages(distc.__path__, "distc."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
fields = ("co_code", "co_consts", "co_names", "co_varnames", "co_argcount", "co_posonlyargcount",
          "co_kwonlyargcount", "co_flags", "co_nlocals", "co_stacksize", "co_exceptiontable", "co_name",
          "co_filename")
templated = 0
for qual, src, ns, names, plan in made:
    if plan is None:
        continue
    templated += 1
    compiled = dict(ns)
    exec(src, compiled)
    got = R._templated(plan, dict(ns))
    assert sorted(got) == sorted(names), (qual, sorted(got), names)
    for k in names:
        a, b = compiled[k], got[k]
        for f in fields:
            assert getattr(a.__code__, f) == getattr(b.__code__, f), (qual, k, f)
        assert a.__defaults__ == b.__defaults__ and all(x is y for x, y in zip(a.__defaults__ or (), b.__defaults__ or ())), (qual, k)
        assert a.__globals__.keys() == b.__globals__.keys() or b.__globals__ is not None
print(len(made), templated)
"""


def test_templated_methods_are_the_compiled_source():
    """Every record of distc whose methods come from record_templates gets the bytecode, names,
    constants and defaults that compiling its source gives; the templates file is what
    ``template_source`` writes."""
    import subprocess
    import sys
    from pathlib import Path

    assert Path(records.__file__).with_name("record_templates.py").read_text() == records.template_source()
    out = subprocess.run([sys.executable, "-c", _SPY], capture_output=True, text=True, check=True).stdout.split()
    made, templated = map(int, out[-2:])
    assert made >= 80 and templated >= made // 2


def test_templated_record_behaves_as_compiled():
    """A record made from templates (plain fields with defaults, frozen and not) acts as one whose
    methods were compiled: keywords, defaults, errors, equality and hash."""

    @record(frozen=True, slots=True)
    class Pair:
        left: int
        right: str = "r"
        note: str = field(default="", compare=False)

    @record
    class Loose:
        a: int
        b: tuple = ()

    p = Pair(1)
    assert (p.left, p.right, p.note) == (1, "r", "") and Pair(right="s", left=2).right == "s"
    assert p == Pair(1, note="other") and hash(p) == hash((1, "r")) and p != Pair(2)
    assert Pair.__init__.__code__.co_varnames[:4] == ("self", "left", "right", "note")
    with pytest.raises(FrozenInstanceError):
        p.left = 3
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'left'"):
        Pair()
    with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
        Loose(1, zz=2)
    x = Loose(1)
    x.b = (2,)
    assert x == Loose(1, (2,)) and Loose.__hash__ is None and Loose.__init__.__qualname__.endswith("Loose.__init__")
