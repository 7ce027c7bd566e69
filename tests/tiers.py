"""Test tiers, declared by what a test uses (issue 28): tests/conftest.py marks every collected test from the fixtures
it requests and the server helpers its code calls, so `pytest -m "not servers"` and friends select tiers without
anyone remembering to add a marker. docs/testing.md says how to run each tier.

A test is found to use a server when
- it requests (directly or through other fixtures) one of FIXTURE_MARKS, or
- its function, one of its fixtures, or a helper they call (a function in a `tests.` module, followed by name)
  names one of CODE_MARKS (`prefect_server_process(...)`, `run_prometheus(...)`, `signal.SIGKILL`, ...).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable

# the tier markers; every one of them but `slow` also means `servers`
MARKERS = {
    "servers": "uses a real server or process of its own (any of the tiers below); `-m 'not servers'` is the fast tier",
    "prefect": "runs flows against a real Prefect server (the session's test harness or one of its own)",
    "postgres": "uses the session's real PostgreSQL 15 (a database per test)",
    "prometheus": "starts real Prometheus / Alertmanager / node_exporter binaries",
    "browser": "drives headless Chromium through Playwright",
    "real_k8s": "uses a real kube-apiserver + controller-manager (skipped where the binaries are absent)",
    "crash": "kills or stops a process of its own (SIGKILL/SIGSTOP) and waits for what follows",
    "slow(reason)": "takes over 20 s on the 2-core CI machine; the reason says why (tests/slow.py)",
}
SERVER_TIERS = ("prefect", "postgres", "prometheus", "browser", "real_k8s", "crash")

FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    "prefect_server": ("prefect",),
    "postgres_server": ("postgres",),
    "postgres_url": ("postgres",),
    "fresh_postgres_url": ("postgres",),
    "real_cluster": ("real_k8s",),
}

CODE_MARKS: dict[str, tuple[str, ...]] = {
    "prefect_test_harness": ("prefect",),
    "prefect_server_process": ("prefect",),
    "start_stack": ("prefect",),  # `remedy up`'s stack: receiver, dispatcher, flows on a Prefect server
    "running_postgres": ("postgres",),
    "run_prometheus": ("prometheus",),
    "run_alertmanager": ("prometheus",),
    "run_node_exporter": ("prometheus",),
    "run_alert_pipeline": ("prometheus",),
    "prometheus_servers": ("prometheus",),
    "sync_playwright": ("browser",),
    "browser_page": ("browser",),
    "SIGKILL": ("crash",),
    "SIGSTOP": ("crash",),
}


def _code_objects(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _callables(obj: object) -> Iterable[Callable]:
    """The plain functions behind obj (a function, a method, a class's methods), unwrapped."""
    if isinstance(obj, type):
        for value in vars(obj).values():
            yield from _callables(getattr(value, "__func__", value))
        return
    fn = getattr(obj, "__wrapped__", obj)
    fn = getattr(fn, "__func__", fn)
    if isinstance(fn, types.FunctionType):
        yield fn


def _is_ours(obj: object) -> bool:
    return (getattr(obj, "__module__", None) or getattr(obj, "__name__", "")).startswith("tests.")


class CodeScan:
    """Which CODE_MARKS a function reaches, following the helpers it names in tests.* modules. Cached per function:
    collecting ~2,000 tests scans each helper once."""

    def __init__(self) -> None:
        self._cache: dict[types.FunctionType, frozenset[str]] = {}
        self._strings_cache: dict[types.FunctionType, frozenset[str]] = {}
        # tiers_of per (the item's parent, its function, fixtures, the parameters a fixture of ours reads): the cases
        # of one parametrized test share the answer (182 CLI cases resolved the same fixtures 182 times)
        self.items: dict[tuple, frozenset[str]] = {}

    def marks(self, fn: Callable) -> frozenset[str]:
        found: set[str] = set()
        for f in _callables(fn):
            found |= self._scan(f, set())
        return frozenset(found)

    def strings(self, fn: Callable) -> frozenset[str]:
        """The identifier-like string constants in fn and the helpers it names (`request.getfixturevalue("x")`)."""
        found: set[str] = set()
        for f in _callables(fn):
            found |= self._strings(f, set())
        return frozenset(found)

    def _strings(self, fn: types.FunctionType, seen: set) -> frozenset[str]:
        if fn in self._strings_cache:
            return self._strings_cache[fn]
        if fn in seen:
            return frozenset()
        seen.add(fn)
        found = {c for code in _code_objects(fn.__code__) for c in code.co_consts
                 if isinstance(c, str) and c.isidentifier()}
        for helper in self._helpers(fn):
            found |= self._strings(helper, seen)
        self._strings_cache[fn] = frozenset(found)
        return self._strings_cache[fn]

    def _helpers(self, fn: types.FunctionType) -> Iterable[types.FunctionType]:
        """The functions in tests.* modules that fn names (directly or as module.attribute)."""
        names: set[str] = set()
        for code in _code_objects(fn.__code__):
            names.update(code.co_names)
            names.update(code.co_varnames)
        scope = fn.__globals__
        modules = [v for n in names if isinstance(v := scope.get(n), types.ModuleType) and _is_ours(v)]
        for name in names:
            for target in [scope.get(name)] + [getattr(m, name, None) for m in modules]:
                # a fixture named here is a fixture, not a call: the fixture walk in tiers_of judges it
                if (target is not None and target is not fn and _is_ours(target)
                        and not hasattr(target, "_fixture_function_marker")):
                    yield from _callables(target)

    def _scan(self, fn: types.FunctionType, seen: set) -> frozenset[str]:
        if fn in self._cache:
            return self._cache[fn]
        if fn in seen:  # recursion in progress: its marks are added where it started
            return frozenset()
        seen.add(fn)
        found: set[str] = set()
        names: set[str] = set()
        for code in _code_objects(fn.__code__):
            names.update(code.co_names)
            names.update(code.co_varnames)
        # a fixture module's SIGKILL stops a server that ignored SIGTERM: that is cleanup, not a crash test
        fixture_module = fn.__module__.startswith("tests.fixtures.")
        for name in names:
            found.update(m for m in CODE_MARKS.get(name, ()) if not (fixture_module and m == "crash"))
        for helper in self._helpers(fn):
            found |= self._scan(helper, seen)
        result = frozenset(found)
        self._cache[fn] = result
        return result


# a fixture parametrized over backends (["sqlite", "postgresql"], ["simulator", "real"]) that requests a server
# fixture by name (`request.getfixturevalue("fresh_postgres_url")`) uses it only in the case whose parameter says so
PARAM_WORDS = {"postgres": ("postg",), "real_k8s": ("real",), "prefect": ("prefect",), "prometheus": ("prom",),
               "browser": ("browser", "chromium")}


def tiers_of(item, scan: CodeScan) -> set[str]:
    """The tier markers for one collected test (without `servers`, added by the caller): from its fixture closure,
    the fixtures those request by name, and the code of the test, its fixtures and their helpers."""
    manager = item.session._fixturemanager
    params = getattr(getattr(item, "callspec", None), "params", {})
    # a parameter matters only to a fixture of ours (a plain parametrize argument is pytest's pseudo-fixture)
    ours = tuple(sorted((name, str(value)) for name, value in params.items()
                        if any(_is_ours(d.func) for d in manager.getfixturedefs(name, item) or ())))
    parent = getattr(item, "parent", None)
    key = (getattr(parent, "nodeid", None), getattr(item, "function", None),
           tuple(getattr(item, "fixturenames", ())), ours)
    if parent is None or key not in scan.items:
        found = frozenset(_tiers_of(item, scan, manager, params))
        if parent is None:
            return set(found)
        scan.items[key] = found
    return set(scan.items[key])


def _tiers_of(item, scan: CodeScan, manager, params: dict) -> set[str]:
    memo: dict[str, frozenset[str]] = {}

    def of_fixture(name: str, stack: frozenset[str]) -> frozenset[str]:
        if name in memo:
            return memo[name]
        if name in stack:
            return frozenset()
        stack = stack | {name}
        marks = set(FIXTURE_MARKS.get(name, ()))
        for fixturedef in manager.getfixturedefs(name, item) or ():
            if not _is_ours(fixturedef.func):
                continue
            marks |= scan.marks(fixturedef.func)
            for arg in fixturedef.argnames:
                if arg != "request":
                    marks |= of_fixture(arg, stack)
            by_name: set[str] = set()
            for ref in scan.strings(fixturedef.func):
                if ref != name and manager.getfixturedefs(ref, item):
                    by_name |= of_fixture(ref, stack)
            if name in params:  # only what this case's parameter names
                said = str(params[name]).lower()
                by_name = {m for m in by_name if any(w in said for w in PARAM_WORDS.get(m, ()))}
            marks |= by_name
        memo[name] = frozenset(marks)
        return memo[name]

    marks: set[str] = set()
    for name in getattr(item, "fixturenames", ()):
        marks |= of_fixture(name, frozenset())
    function = getattr(item, "function", None)
    if function is not None:
        marks |= scan.marks(function)
        for ref in scan.strings(function):
            if manager.getfixturedefs(ref, item):
                marks |= of_fixture(ref, frozenset())
    return marks
