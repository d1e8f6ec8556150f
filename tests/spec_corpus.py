"""The real job-spec corpus for preflight's compat family: loading it and scoring it.

The corpus (tests/fixtures/specs, INDEX.json there) holds job specs copied as found from public
material: gcloud ``--config`` files, REST bodies, the Python dicts people hand the SDK (whole
files, the exact lines, or notebook cells), specs a notebook printed, and compiled KFP pipelines.
Each entry says where it was read (repository, path, commit, or a documentation page and the day
it was read), how to turn it into a spec, and the outcome the cited document backs: whether the
spec parses (and, when it must not, what the message has to name), the worst compat status and
the status of every rule that is not PASS. It is split by a stable hash of its source (a
repository or a page), so every spec of one source lands in the same part: rules are tuned
against ``dev``; ``test`` only measures. Used by tests/unit/test_spec_corpus.py and
tests/benchmarks/bench_spec_corpus.py.

How a file becomes a spec:

- ``.yaml``/``.json``: the text, as ``parse_spec`` reads a ``--config`` file or a REST body.
- ``.py.txt`` (Python as found): the value ``expr`` names, literals only: ``NAME``,
  ``Class.NAME``, ``function.NAME`` or ``function.self.NAME`` (a name bound in several functions
  is named by its function), optionally subscripted (``job['trial_job_spec']``); or
  ``CustomJob(worker_pool_specs=...)``, the keyword of the file's first such call (a spec
  written inline). Bound names, ``{**base, ...}``, ``A, B = (x, y)``, f-strings and proto-plus
  constructors (``custom_job.CustomJobSpec(worker_pool_specs=...)``: their keyword mapping) are
  followed; a name the file does not bind becomes the text ``${name}``. What the file
  computes from its own literals is worked out (arithmetic, comparisons, ``x if c else y``,
  ``len``/``int``/``str``, ``os.path.join``, ``str.startswith``, ``re.search(...).group(n)``,
  an enum's ``.name``), and an ``if`` whose test those literals decide keeps only the branch it
  takes (a test nothing in the file decides, such as ``FLAGS.debug``, keeps both branches, the
  last binding winning); anything else stays a placeholder. ``x = f(x)`` reads the ``x`` bound
  before; ``kw = dict(...)`` is its mapping and ``kw.update({...})`` merges into it. A
  function's parameters are the arguments of the file's first call of it (worked out in the
  caller's scope), else their defaults; ``function.job.run()`` names a job made inside a
  function. ``config`` (an INDEX field) names the JSON/YAML file, in the corpus too, that the
  source's ``json.load(...)`` reads (a launcher's parameters file).
  ``job.run()`` (or ``job.submit()``): the spec the SDK builds from the file's first
  ``job.run(machine_type=..., ...)`` on a CustomTrainingJob, CustomContainerTrainingJob or
  CustomPythonPackageTrainingJob that ``job`` is bound to (``_training_run``); on an
  ``aiplatform.CustomJob(worker_pool_specs=...)`` the constructor's pools, output folder and
  persistent resource plus the run keywords' job fields and Scheduling (``_custom_job_run``).
- ``.ipynb``: a notebook as found; its code cells are read as one Python file (shell ``!`` and
  magic ``%`` lines left out, ``x = !cmd`` read as IPython reads it), then as ``.py.txt``.
- ``.pprint.txt``: a Python literal as a notebook printed it (``pprint(WORKER_POOL_SPECS)``).
- ``.sh.txt`` (a shell script as found): the gcloud ``--config`` YAML the script writes in a
  here-document; ``expr`` names its delimiter (``YAML``: the first ``<<YAML``; ``YAML#2``: the
  second). The body is expanded as bash expands it when the script runs with none of its
  variables set in the environment (the defaults it documents): ``$NAME`` and ``${NAME}`` take
  the script's own assignments above the here-document (unindented ``NAME=value`` lines, each
  expanded in turn), ``${NAME:-default}`` and ``${NAME-default}`` take the default when the
  script leaves the name unset (or, for ``:-``, empty); a name the script does not bind (set by
  a sourced file, or the caller's own variable) and ``$(command)`` stay as found; a quoted
  delimiter (``<<'YAML'``) expands nothing. Lines the script appends to the file later
  (``printf ... >> "$CFG"``) are not read.
- kind ``gcloud-command``, a ``.sh.txt`` script: the CustomJobSpec its ``gcloud [beta|alpha] ai
  custom-jobs create --worker-pool-spec=...`` command sends; ``expr`` is ``custom-jobs create``
  (``#2`` appended: the second such command). Its logical line (backslash-newlines and quoted
  newlines joined) is split into words and expanded as above, with the script's own assignments
  (a quoted value may run over lines); the flags become the spec as gcloud builds it
  (``gcloud_command_spec``).
- kind ``gcpc-pipeline``: a compiled KFP pipeline; ``expr`` names the training task, whose
  payload is GCPC's launcher template with the task's inputs and the component's defaults put
  in, as the KFP backend resolves them (``_gcpc_payload``).

Placeholders stay as found (``CUSTOM_CONTAINER_IMAGE_URI``, ``$WANDB_API_KEY``, a function
parameter): compat does not look at images or environment values.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CORPUS_DIR",
    "SPLITS",
    "Entry",
    "Outcome",
    "Score",
    "split_of",
    "load",
    "spec_data",
    "heredoc_config",
    "gcloud_command_spec",
    "judge",
    "score",
    "REQUIRED_CATEGORIES",
    "categories",
]

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "specs"
SPLITS = ("dev", "test")


@dataclass(frozen=True)
class Entry:
    """One real spec and what compat must say about it."""

    id: str
    file: str
    source: str  # the repository (owner/name) or documentation page it was read from
    url: str  # where exactly: a blob URL at a commit, or the page
    kind: str  # gcloud-config | gcloud-command | rest-body | sdk-dict | gcpc-payload | gcpc-pipeline
    region: str
    wrap: str  # spec | body | worker_pool_specs
    expr: str  # for .py.txt (Python as found): the name (or Class.NAME) whose value is the spec
    expect_parse: str  # ok | error
    expect_status: str  # the worst compat status
    expect_rules: dict[str, str]  # rule -> status, for every non-PASS result
    why: str
    docs: tuple[str, ...]
    error_mentions: tuple[str, ...] = ()  # for expect_parse "error": what the message must name
    config: str = ""  # a JSON/YAML file (in the corpus) the Python source loads its parameters from

    def text(self) -> str:
        return (CORPUS_DIR / self.file).read_text(encoding="utf-8")


@dataclass
class Outcome:
    """What preflight made of one entry."""

    entry: Entry
    parsed: bool
    status: str = ""
    rules: dict[str, str] = field(default_factory=dict)
    message: str = ""  # the parse error, or the internal error's trace
    internal_error: bool = False

    @property
    def status_right(self) -> bool:
        if not self.parsed:  # refused, and the message names what the document says is wrong
            return self.entry.expect_parse == "error" and all(
                m in self.message for m in self.entry.error_mentions
            )
        return self.entry.expect_parse == "ok" and self.status == self.entry.expect_status

    @property
    def rules_right(self) -> bool:
        return self.status_right and (not self.parsed or self.rules == self.entry.expect_rules)


@dataclass
class Score:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def status_right(self) -> int:
        return sum(o.status_right for o in self.outcomes)

    @property
    def rules_right(self) -> int:
        return sum(o.rules_right for o in self.outcomes)

    @property
    def internal_errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.internal_error]

    def format(self, title: str = "") -> str:
        lines = [title] if title else []
        lines.append(
            f"{self.total} specs: worst status right {self.status_right}/{self.total}, "
            f"every rule right {self.rules_right}/{self.total}, internal errors {len(self.internal_errors)}"
        )
        for o in self.outcomes:
            if not o.rules_right:
                got = o.status if o.parsed else f"parse error ({o.message[:80]})"
                if o.entry.expect_parse == "error":
                    want = "parse error naming " + ", ".join(map(repr, o.entry.error_mentions))
                else:
                    want = f"{o.entry.expect_status} {o.entry.expect_rules}"
                lines.append(f"  miss {o.entry.id}: want {want}, got {got} {o.rules}")
        return "\n".join(lines)


def split_of(source: str) -> str:
    """The part an entry belongs to: a stable hash of its source (about 50/50)."""
    return "test" if int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) % 2 else "dev"


def load(split: str | None = None) -> list[Entry]:
    """The corpus, or one part of it (``dev`` or ``test``)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    raw = json.loads((CORPUS_DIR / "INDEX.json").read_text(encoding="utf-8"))
    out = []
    for e in raw["entries"]:
        entry = Entry(
            e["id"],
            e["file"],
            e["source"],
            e["url"],
            e["kind"],
            e["region"],
            e["wrap"],
            e.get("expr", ""),
            e["expect"]["parse"],
            e["expect"].get("status", ""),
            dict(e["expect"].get("rules", {})),
            e["why"],
            tuple(e["docs"]),
            tuple(e["expect"].get("error_mentions", ())),
            e.get("config", ""),
        )
        if split is None or split_of(entry.source) == split:
            out.append(entry)
    return out


# --- Python sources: the value of one name, literals only -------------------------------------


def _assigned(node: ast.Assign) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs of one assignment; ``A, B = (x, y)`` pairs element-wise."""
    out: list[tuple[ast.expr, ast.expr]] = []
    for target in node.targets:
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            if len(target.elts) == len(node.value.elts):
                out += list(zip(target.elts, node.value.elts, strict=True))
        else:
            out.append((target, node.value))
    return out


def _bindings(tree: ast.AST) -> dict[str, ast.expr]:
    """Every ``NAME = value`` binding in the file, last one winning, plus each binding under
    its scope: ``Class.NAME`` for a class body, ``function.NAME`` (and ``function.self.NAME``)
    inside a function: a file that binds one name in several functions, as test files do,
    names each by its function. ``kw.update(...)`` merges into ``kw``."""
    out: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            _class_bindings(node, out)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _function_bindings(node, out)
        elif isinstance(node, ast.Assign):
            for target, value in _assigned(node):
                if isinstance(target, ast.Name):
                    out[target.id] = _rebound(value, target.id, out.get(target.id))
        elif not _inside_function(node, tree):
            _merge_update(node, out, "")
    return out


def _class_bindings(node: ast.ClassDef, out: dict[str, ast.expr]) -> None:
    for stmt in node.body:
        if isinstance(stmt, ast.Assign):
            for target, value in _assigned(stmt):
                if isinstance(target, ast.Name):
                    out[f"{node.name}.{target.id}"] = value
                    out.setdefault(target.id, value)


def _function_bindings(node: ast.FunctionDef | ast.AsyncFunctionDef, out: dict[str, ast.expr]) -> None:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assign):
            for target, value in _assigned(inner):
                if isinstance(target, ast.Name | ast.Attribute):  # x = …, self.x = …
                    key = f"{node.name}.{ast.unparse(target)}"
                    out[key] = _rebound(value, ast.unparse(target), out.get(key))
        _merge_update(inner, out, node.name + ".")


class _Previous(ast.NodeTransformer):
    def __init__(self, name: str, previous: ast.expr) -> None:
        self.name, self.previous = name, previous

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.previous if node.id == self.name else node


def _rebound(value: ast.expr, name: str, previous: ast.expr | None) -> ast.expr:
    """``x = f"{prefix}-{x}"``: the ``x`` on the right is the binding before (``${x}`` when
    there is none), never the new one."""
    if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
        return value
    import copy

    before = previous if previous is not None else ast.Constant("${" + name + "}")
    return _Previous(name, before).visit(copy.deepcopy(value))


def _merge_update(node: ast.AST, out: dict[str, ast.expr], scope: str) -> None:
    """``kw.update({...})`` (or ``kw.update(a=1)``) after ``kw = {...}``: ``kw`` is then the
    merged mapping, as a dict's ``update`` leaves it."""
    if not (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "update"
        and isinstance(node.value.func.value, ast.Name)
    ):
        return
    call = node.value
    key = scope + node.value.func.value.id
    if key not in out or len(call.args) > 1:
        return
    added: list[ast.expr] = list(call.args)
    if call.keywords:
        added.append(ast.Call(ast.Name("dict"), [], call.keywords))
    merged: list[ast.expr | None] = [None] * (1 + len(added))
    out[key] = ast.Dict(keys=merged, values=[out[key], *added])


def _inside_function(node: ast.AST, tree: ast.AST) -> bool:
    # The ids of the nodes inside functions, kept on the tree itself: a table keyed by id(tree)
    # outlives the tree, and a later tree given the same id would read another file's answer.
    inside = getattr(tree, "_tg_function_nodes", None)
    if inside is None:
        found: set[int] = set()
        for f in ast.walk(tree):
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                found.update(id(n) for n in ast.walk(f) if n is not f)
        inside = frozenset(found)
        tree._tg_function_nodes = inside  # type: ignore[attr-defined]
    return id(node) in inside


def _message(node: ast.Call, env: dict[str, ast.expr], depth: int) -> Any:
    """A proto-plus constructor called with keywords only (``custom_job.CustomJobSpec(
    worker_pool_specs=...)``) is the mapping of its keywords, which is what proto-plus builds;
    ``duration_pb2.Duration(seconds=N)`` is the JSON duration ``"Ns"``. Anything else is a
    placeholder."""
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if not name[:1].isupper() or node.args or any(k.arg is None for k in node.keywords):
        return "${" + ast.unparse(node) + "}"
    fields = {k.arg: _eval(k.value, env, depth + 1) for k in node.keywords}
    if name == "Duration" and set(fields) <= {"seconds", "nanos"}:
        return f"{fields.get('seconds', 0)}s"
    return fields


def _eval(node: ast.expr, env: dict[str, ast.expr], depth: int = 0) -> Any:
    """Literals, lists, dicts, names bound in the file; an attribute chain ending in an
    enum-like NAME (``aiplatform.gapic.AcceleratorType.NVIDIA_TESLA_K80``) is that name; an
    unbound name is the placeholder ``${name}``; f-strings join their parts; proto-plus
    constructors are their keyword mappings (``_message``)."""
    if depth > 50:
        raise ValueError("bindings nest too deep")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(v, env, depth + 1) for v in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # {**base, "replica_count": 2}
                base = _eval(v, env, depth + 1)
                out.update(base if isinstance(base, dict) else {})
            else:
                out[_eval(k, env, depth + 1)] = _eval(v, env, depth + 1)
        return out
    if isinstance(node, ast.Name):
        bound = env.get(node.id)
        return _eval(bound, env, depth + 1) if bound is not None else "${" + node.id + "}"
    if isinstance(node, ast.Attribute):
        dotted = ast.unparse(node)
        if dotted in env:
            return _eval(env[dotted], env, depth + 1)
        if node.attr == "name" and isinstance(node.value, ast.Attribute) and node.value.attr.isupper():
            return node.value.attr  # Scheduling.Strategy.SPOT.name: the enum value's name
        return node.attr
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(_eval(v.value, env, depth + 1)) if isinstance(v, ast.FormattedValue) else str(v.value)
            for v in node.values
            if isinstance(v, ast.FormattedValue | ast.Constant)
        )
    if isinstance(node, ast.Call):
        found = _pure_call(node, env, depth)
        return found if found is not _UNKNOWN else _message(node, env, depth)
    found = _operation(node, env, depth)
    return found if found is not _UNKNOWN else "${" + ast.unparse(node) + "}"


# --- what a file computes from its own literals -----------------------------------------------
#
# Notebooks derive the spec from their parameters (``replica_count = num_samples //
# accelerators_per_machine``, ``if machine_type.startswith("a3-highgpu"): ...``). Arithmetic,
# comparisons, conditional expressions and a few pure functions are worked out when every
# operand is a known literal; anything else stays a placeholder (``_UNKNOWN`` inside).

_UNKNOWN = object()
_CONFIG = "<config>"  # the env key of the entry's config file (no Python name can clash)
_LOADERS = ("json.load", "json.loads", "yaml.safe_load", "yaml.load")
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _known(value: Any) -> bool:
    """A value worked out in full: no placeholder anywhere in it."""
    if isinstance(value, str):
        return "${" not in value
    if isinstance(value, list):
        return all(_known(v) for v in value)
    if isinstance(value, dict):
        return all(_known(k) and _known(v) for k, v in value.items())
    return value is None or isinstance(value, bool | int | float)


def _known_eval(node: ast.expr, env: dict[str, ast.expr], depth: int) -> Any:
    if _opaque(node, env):
        return _UNKNOWN
    value = _eval(node, env, depth + 1)
    return value if _known(value) else _UNKNOWN


def _opaque(node: ast.expr, env: dict[str, ast.expr]) -> bool:
    """An attribute the file binds nowhere (``FLAGS.debug``, ``args.smoke``): set at run time,
    not known here; an enum value (``Strategy.SPOT``) is its name."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return any(
        isinstance(n, ast.Attribute)
        and id(n) not in called
        and ast.unparse(n) not in env
        and not n.attr.isupper()
        and n.attr != "name"
        for n in ast.walk(node)
    )


def _operation(node: ast.expr, env: dict[str, ast.expr], depth: int) -> Any:
    """``a // b``, ``a == b``, ``a and b``, ``not a``, ``m[k]``, ``x if c else y`` on known
    values."""
    try:
        if isinstance(node, ast.BinOp | ast.Compare):
            return _arithmetic(node, env, depth)
        return _logic(node, env, depth)
    except (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError):
        return _UNKNOWN


def _arithmetic(node: ast.BinOp | ast.Compare, env: dict[str, ast.expr], depth: int) -> Any:
    if isinstance(node, ast.BinOp):
        left, right = _known_eval(node.left, env, depth), _known_eval(node.right, env, depth)
        if type(node.op) not in _BINARY or left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        return _BINARY[type(node.op)](left, right)
    values = [_known_eval(v, env, depth) for v in (node.left, *node.comparators)]
    if any(v is _UNKNOWN for v in values) or not all(type(op) in _COMPARE for op in node.ops):
        return _UNKNOWN
    pairs = zip(node.ops, values, values[1:], strict=False)
    return all(_COMPARE[type(op)](a, b) for op, a, b in pairs)


def _logic(node: ast.expr, env: dict[str, ast.expr], depth: int) -> Any:
    if isinstance(node, ast.BoolOp):
        value: Any = _UNKNOWN
        for operand in node.values:  # short-circuit, left to right, as Python does
            value = _known_eval(operand, env, depth)
            if value is _UNKNOWN or bool(value) == isinstance(node.op, ast.Or):
                return value
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        value = _known_eval(node.operand, env, depth)
        if value is _UNKNOWN:
            return _UNKNOWN
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Subscript):  # config["bucket"], values[0]
        container, key = _known_eval(node.value, env, depth), _known_eval(node.slice, env, depth)
        if container is _UNKNOWN or key is _UNKNOWN:
            return _UNKNOWN
        return container[key]
    if isinstance(node, ast.IfExp):
        test = _known_eval(node.test, env, depth)
        if test is _UNKNOWN:
            return _UNKNOWN
        return _eval(node.body if test else node.orelse, env, depth + 1)
    return _UNKNOWN


def _pure_call(node: ast.Call, env: dict[str, ast.expr], depth: int) -> Any:
    """``dict(...)``, ``json.load(f)`` (the entry's config file), ``len``/``int``/``str``,
    ``os.path.join``, ``m.get(k)``, ``s.startswith(p)``, ``s.endswith(p)`` and
    ``re.search(pattern, s).group(n)`` on known values."""
    func = ast.unparse(node.func)
    if func == "dict" and len(node.args) <= 1:
        return _made_dict(node, env, depth)
    if func in _LOADERS and _CONFIG in env:  # json.load(f): the entry's config file
        loaded = env[_CONFIG]
        return loaded.value if isinstance(loaded, ast.Constant) else _UNKNOWN
    if node.keywords:
        return _UNKNOWN
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("group", "get", "startswith", "endswith"):
        return _method_call(node, node.func, env, depth)
    pure: dict[str, Callable[..., Any]] = {"len": len, "int": int, "str": str, "os.path.join": _join}
    args = [_known_eval(a, env, depth) for a in node.args]
    if func not in pure or any(a is _UNKNOWN for a in args):
        return _UNKNOWN
    try:
        return pure[func](*args)
    except (TypeError, ValueError):
        return _UNKNOWN


def _made_dict(node: ast.Call, env: dict[str, ast.expr], depth: int) -> dict[Any, Any]:
    """``dict(a=1, **base)``: the mapping it makes."""
    made: dict[Any, Any] = {}
    for arg in node.args:
        base = _eval(arg, env, depth + 1)
        made.update(base if isinstance(base, dict) else {})
    for k in node.keywords:
        value = _eval(k.value, env, depth + 1)
        if k.arg is None:
            made.update(value if isinstance(value, dict) else {})
        else:
            made[k.arg] = value
    return made


def _method_call(node: ast.Call, func: ast.Attribute, env: dict[str, ast.expr], depth: int) -> Any:
    args = [_known_eval(a, env, depth) for a in node.args]
    if _UNKNOWN in args:
        return _UNKNOWN
    inner = func.value
    if func.attr == "group":  # re.search(r"-(\d+)g$", machine_type).group(1)
        if not (isinstance(inner, ast.Call) and ast.unparse(inner.func) in ("re.search", "re.match")):
            return _UNKNOWN
        operands = [_known_eval(a, env, depth) for a in inner.args]
        if len(operands) != 2 or not all(isinstance(a, str) for a in operands):
            return _UNKNOWN
        found = getattr(re, inner.func.attr)(*operands)  # type: ignore[attr-defined]
        return found.group(*args) if found else _UNKNOWN
    subject = _known_eval(inner, env, depth)
    if func.attr == "get" and isinstance(subject, dict) and 1 <= len(args) <= 2:
        return subject.get(*args)  # config.get("reservation_name")
    if func.attr in ("startswith", "endswith") and isinstance(subject, str) and len(args) == 1:
        prefix = tuple(args[0]) if isinstance(args[0], list) else args[0]
        return getattr(subject, func.attr)(prefix) if isinstance(prefix, str | tuple) else _UNKNOWN
    return _UNKNOWN


def _join(*parts: str) -> str:
    import posixpath  # os.path.join on the Linux machines these notebooks run on

    return posixpath.join(*parts)


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}


def _parameters(tree: ast.AST, env: dict[str, ast.expr]) -> dict[str, ast.expr]:
    """``function.param`` for every parameter a file's first call of that function passes (by
    keyword or position) or leaves at its default, each worked out in the caller's scope: a
    function's spec is the one its first call builds. Parameters no call passes stay unbound."""
    functions = _functions(tree)
    callers: dict[str, tuple[ast.Call, str]] = {}  # function -> (its first call, caller scope)
    scopes: list[tuple[str, ast.AST]] = [("", tree), *functions.items()]
    for caller_name, scope in scopes:
        for node in ast.walk(scope):
            if caller_name == "" and _inside_function(node, tree):
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                callers.setdefault(node.func.id, (node, caller_name))
    out: dict[str, ast.expr] = {}
    done: set[str] = set()

    def bind(name: str, depth: int) -> None:
        if name in done or name not in callers or depth > 10:
            return
        done.add(name)
        call, caller = callers[name]
        if caller:
            bind(caller, depth + 1)
        scope = _scoped({**out, **env}, caller)
        args = functions[name].args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(zip([a.arg for a in positional][::-1], args.defaults[::-1], strict=False))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d})
        given: dict[str, ast.expr] = {a.arg: v for a, v in zip(positional, call.args, strict=False)}
        given.update({k.arg: k.value for k in call.keywords if k.arg})
        for param in [*positional, *args.kwonlyargs]:
            passed = given.get(param.arg)
            chosen = passed if passed is not None else defaults.get(param.arg)
            if chosen is not None:
                out[f"{name}.{param.arg}"] = ast.Constant(_eval(chosen, scope if passed is not None else env))

    for name in functions:
        bind(name, 0)
    return out


def _scoped(env: dict[str, ast.expr], scope: str) -> dict[str, ast.expr]:
    """``env`` as code inside function ``scope`` sees it: its own bindings (and parameters)
    over the file's."""
    if not scope:
        return env
    prefix = scope + "."
    return {**env, **{k[len(prefix) :]: v for k, v in env.items() if k.startswith(prefix)}}


class _TakenBranches(ast.NodeTransformer):
    """Keeps only the branch an ``if`` takes when the file's own literals decide its test
    (``if scheduling_strategy == "FLEX_START": ... elif ...``), so the binding a run makes
    wins over the ones in branches it never enters."""

    def __init__(self, env: dict[str, ast.expr]) -> None:
        self.env = env
        self.changed = False
        self.scopes: list[tuple[str, set[str]]] = []  # the functions the visit is inside

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        self.scopes.append((node.name, params))
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    def visit_If(self, node: ast.If) -> Any:
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        # a function's parameter is what its first caller passes (never a module-level binding
        # of the same name); one no call passes leaves the test undecided
        env = _scoped(self.env, self.scopes[-1][0]) if self.scopes else self.env
        unknown = any(
            f"{function}.{name}" not in self.env
            for function, params in self.scopes
            for name in names & params
        )
        test = _UNKNOWN if unknown else _known_eval(node.test, env, 0)
        if test is _UNKNOWN:
            return self.generic_visit(node)
        self.changed = True
        taken = node.body if test else node.orelse
        kept = [self.visit(stmt) for stmt in taken]
        flat = [s for k in kept for s in (k if isinstance(k, list) else [k]) if s is not None]
        return flat or ast.Pass()


def _environment(tree: ast.AST, config: Any = _UNKNOWN) -> dict[str, ast.expr]:
    """The file's bindings, its functions' parameters as their first calls pass them, and the
    entry's config file (what ``json.load`` returns)."""
    env = _bindings(tree)
    if config is not _UNKNOWN:
        env[_CONFIG] = ast.Constant(config)
    params = _parameters(tree, env)
    return {**params, **env}  # a parameter reassigned in its function: the assignment wins


def _decided(tree: ast.AST, config: Any = _UNKNOWN) -> ast.AST:
    """``tree`` with every ``if`` its literals decide reduced to the branch taken (repeated:
    a decided branch may bind what decides the next)."""
    for _ in range(10):
        pruner = _TakenBranches(_environment(tree, config))
        tree = pruner.visit(tree)
        if not pruner.changed:
            break
    return tree


def _value_of(expr: str, tree: ast.AST, config: Any = _UNKNOWN) -> Any:
    """The value ``expr`` names: a binding (``NAME``, ``Class.NAME``, ``function.NAME``),
    optionally subscripted (``hyperparameter_tuning_job["trial_job_spec"]``). Names inside a
    class or function resolve to that scope's bindings (and parameters) first. ``config``: the
    data of the file the source loads with ``json.load`` (the entry's ``config``)."""
    tree = _decided(tree, config)
    env = _environment(tree, config)
    node = ast.parse(expr, mode="eval").body
    if isinstance(node, ast.Call) and _method(node) in _RUN_METHODS and not node.keywords:
        return _training_run(node, tree, env)  # job.run(): the spec the SDK builds from it
    if isinstance(node, ast.Call):  # CustomJob(worker_pool_specs=...): the keyword's value
        return _call_keyword(node, tree, env)
    keys = []
    while isinstance(node, ast.Subscript):
        keys.append(ast.literal_eval(node.slice))
        node = node.value
    name = ast.unparse(node)
    if name not in env:
        raise KeyError(f"the file binds no {name}")
    scope = name.rpartition(".")[0]
    local = {k[len(scope) + 1 :]: v for k, v in env.items() if scope and k.startswith(scope + ".")}
    value = _eval(env[name], {**env, **local})
    for key in reversed(keys):
        value = value[key]
    return value


def _call_keyword(pattern: ast.Call, tree: ast.AST, env: dict[str, ast.expr]) -> Any:
    """``CustomJob(worker_pool_specs=...)``: the value given to that keyword in the file's
    first call of a function of that name (specs written inline in the call)."""
    name = ast.unparse(pattern.func)
    (wanted,) = [k.arg for k in pattern.keywords]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name:
            for k in node.keywords:
                if k.arg == wanted:
                    return _eval(k.value, env)
    raise KeyError(f"the file has no call {name}({wanted}=...)")


# --- the SDK's training jobs: job.run(machine_type=..., ...) ----------------------------------
#
# google-cloud-aiplatform's CustomTrainingJob, CustomContainerTrainingJob and
# CustomPythonPackageTrainingJob take the machine in ``run()``/``submit()`` keywords and build the
# CustomJobSpec themselves: the pools by utils/worker_spec_utils.py (_DistributedTrainingSpec.
# chief_worker_pool: one chief, replica_count - 1 workers, then the reduction servers; every pool
# the same machine, a boot disk of pd-ssd / 100 GB unless given, the accelerator only when a type
# and a count are given), the code by training_jobs.py (_run: containerSpec or
# python_package_spec) and the job's fields by _prepare_training_task_inputs_and_output_dir
# (googleapis/python-aiplatform at 91cc8ce, read 2026-12-02).

_RUN_METHODS = ("run", "submit")
_RUN_DEFAULTS: dict[str, Any] = {  # run()'s defaults (training_jobs.py, CustomContainerTrainingJob.run)
    "replica_count": 1,
    "machine_type": "n1-standard-4",
    "accelerator_type": "ACCELERATOR_TYPE_UNSPECIFIED",
    "accelerator_count": 0,
    "boot_disk_type": "pd-ssd",
    "boot_disk_size_gb": 100,
    "reduction_server_replica_count": 0,
}
#: run() keywords copied onto the job as they are (their CustomJobSpec field has the same name).
_RUN_JOB_FIELDS = (
    "service_account",
    "network",
    "persistent_resource_id",
    "psc_interface_config",
    "enable_web_access",
)


def _method(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else ""


def _keywords(node: ast.Call, env: dict[str, ast.expr]) -> dict[str, Any]:
    """A call's keyword values; ``**kw`` merges the mapping ``kw`` is bound to."""
    out: dict[str, Any] = {}
    for k in node.keywords:
        value = _eval(k.value, env)
        if k.arg is None:
            out.update(value if isinstance(value, dict) else {})
        else:
            out[k.arg] = value
    return out


def _pool(kw: dict[str, Any], replicas: int, machine_type: str, accelerated: bool) -> dict[str, Any]:
    """One pool as _WorkerPoolSpec.spec_dict writes it."""
    machine: dict[str, Any] = {"machine_type": machine_type}
    if accelerated and kw["accelerator_type"] != "ACCELERATOR_TYPE_UNSPECIFIED" and kw["accelerator_count"]:
        machine["accelerator_type"] = kw["accelerator_type"]
        machine["accelerator_count"] = kw["accelerator_count"]
    if accelerated and kw.get("tpu_topology"):
        machine["tpu_topology"] = kw["tpu_topology"]
    if kw.get("reservation_affinity_type"):
        affinity = {"reservation_affinity_type": kw["reservation_affinity_type"]}
        if kw["reservation_affinity_type"] == "SPECIFIC_RESERVATION":
            affinity["key"] = kw.get("reservation_affinity_key")
            affinity["values"] = kw.get("reservation_affinity_values")
        machine["reservation_affinity"] = affinity
    return {
        "machine_spec": machine,
        "replica_count": replicas,
        "disk_spec": {"boot_disk_type": kw["boot_disk_type"], "boot_disk_size_gb": kw["boot_disk_size_gb"]},
    }


def _code(job: dict[str, Any], kind: str, kw: dict[str, Any]) -> dict[str, Any]:
    """What each pool runs: a container (CustomContainerTrainingJob) or a Python package."""
    env = [{"name": k, "value": v} for k, v in (kw.get("environment_variables") or {}).items()]
    if kind == "CustomContainerTrainingJob":
        container: dict[str, Any] = {"imageUri": job.get("container_uri")}
        for key, value in (("command", job.get("command")), ("args", kw.get("args")), ("env", env)):
            if value:
                container[key] = value
        return {"containerSpec": container}
    package: dict[str, Any] = {
        "executor_image_uri": job.get("container_uri"),
        "package_uris": [job.get("python_package_gcs_uri", "${the SDK's staged package}")],
        "python_module": job.get("python_module_name", "aiplatform_custom_trainer_script.task"),
    }
    if kw.get("args"):
        package["args"] = kw["args"]
    if env:
        package["env"] = env
    return {"python_package_spec": package}


def _default_output(
    made: ast.Call, tree: ast.AST, env: dict[str, ast.expr], folder: str = "aiplatform-custom-training"
) -> str:
    """The SDK's folder when run() has no base_output_dir: utils._timestamped_gcs_dir of the staging
    bucket (the job's, else aiplatform.init's), ``gs://`` put in front when missing; the time
    stays a placeholder."""
    bucket = _keywords(made, env).get("staging_bucket")
    for node in ast.walk(tree):
        if bucket is None and isinstance(node, ast.Call) and ast.unparse(node.func).endswith("init"):
            bucket = _keywords(node, env).get("staging_bucket")
    path = f"{str(bucket or '${staging_bucket}').rstrip('/')}/{folder}-${{time}}"
    return path if path.startswith("gs://") else "gs://" + path


def _training_run(pattern: ast.Call, tree: ast.AST, env: dict[str, ast.expr]) -> Any:
    """``job.run()``: the CustomJobSpec the SDK builds from the file's first ``job.run(...)``
    (or ``.submit(...)``) call and the training-job constructor ``job`` is bound to."""
    receiver = ast.unparse(pattern.func).rpartition(".")[0]
    scope, _, local = receiver.partition(".")
    functions = _functions(tree)
    where: ast.AST = tree
    if local and scope in functions:  # launch_job.train_job.submit(): the job made in launch_job
        receiver, where, env = local, functions[scope], _scoped(env, scope)
    call = next(
        (
            n
            for n in ast.walk(where)
            if isinstance(n, ast.Call)
            and _method(n) == _method(pattern)
            and ast.unparse(n.func).rpartition(".")[0] == receiver
        ),
        None,
    )
    made = env.get(receiver)
    if call is None or not isinstance(made, ast.Call):
        raise KeyError(f"the file has no {receiver}.{_method(pattern)}(...) on a training job it makes")
    kind = ast.unparse(made.func).split(".")[-1]
    if kind == "CustomJob":  # the pools are the constructor's; run() adds the job's fields
        return _custom_job_run(made, _keywords(call, env), tree, env)
    kw = {**_RUN_DEFAULTS, **_keywords(call, env)}
    pools = []
    if kw["replica_count"] >= 1:
        pools.append(_pool(kw, 1, kw["machine_type"], True))
    if kw["replica_count"] > 1 or kw["reduction_server_replica_count"]:
        pools.append(
            _pool(kw, kw["replica_count"] - 1, kw["machine_type"], True) if kw["replica_count"] > 1 else {}
        )
    code = _code(_keywords(made, env), kind, kw)
    pools = [{**p, **code} if p else p for p in pools]
    if kw["reduction_server_replica_count"]:
        server = _pool(
            kw, kw["reduction_server_replica_count"], kw.get("reduction_server_machine_type") or "", False
        )
        server["container_spec"] = {"image_uri": kw.get("reduction_server_container_uri")}
        pools.append(server)
    spec: dict[str, Any] = {
        "worker_pool_specs": pools,
        "base_output_directory": {
            "output_uri_prefix": kw.get("base_output_dir") or _default_output(made, tree, env)
        },
    }
    spec.update({k: kw[k] for k in _RUN_JOB_FIELDS if kw.get(k)})
    if (scheduling := _run_scheduling(kw)) is not None:
        spec["scheduling"] = scheduling
    return spec


def _run_scheduling(kw: dict[str, Any], zero_wait: bool = False) -> dict[str, Any] | None:
    """The Scheduling run()/submit() sets: only when one of its keywords asks for it;
    ``zero_wait``: CustomJob.submit sends ``max_wait_duration=0`` too ("0 is a valid value")."""
    scheduling = {
        "timeout": f"{kw['timeout']}s" if kw.get("timeout") else None,
        "restart_job_on_worker_restart": kw.get("restart_job_on_worker_restart"),
        "disable_retries": kw.get("disable_retries"),
        "strategy": kw.get("scheduling_strategy"),
        "max_wait_duration": f"{kw['max_wait_duration']}s" if kw.get("max_wait_duration") else None,
    }
    if zero_wait and kw.get("max_wait_duration") == 0:
        scheduling["max_wait_duration"] = "0s"
    if not any(v is not None and v is not False for v in scheduling.values()):
        return None
    return {k: v for k, v in scheduling.items() if v is not None}


def _custom_job_run(made: ast.Call, run: dict[str, Any], tree: ast.AST, env: dict[str, ast.expr]) -> Any:
    """``aiplatform.CustomJob(worker_pool_specs=..., ...).run(...)``: the CustomJobSpec
    jobs.py builds (CustomJob.__init__: the pools, base_output_dir else the staging bucket's
    timestamped ``aiplatform-custom-job`` folder, persistent_resource_id; submit(): the run
    keywords named in _RUN_JOB_FIELDS and the Scheduling; google-cloud-aiplatform 1.165.1,
    read 2026-12-02)."""
    job = _keywords(made, env)
    spec: dict[str, Any] = {
        "worker_pool_specs": job.get("worker_pool_specs"),
        "base_output_directory": {
            "output_uri_prefix": job.get("base_output_dir")
            or _default_output(made, tree, env, "aiplatform-custom-job")
        },
    }
    if job.get("persistent_resource_id"):
        spec["persistent_resource_id"] = job["persistent_resource_id"]
    spec.update({k: run[k] for k in _RUN_JOB_FIELDS if run.get(k)})
    if (scheduling := _run_scheduling(run, zero_wait=True)) is not None:
        spec["scheduling"] = scheduling
    return spec


_SHELL_ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_][\w.]*)\s*=\s*!(.*)$")


def _notebook_code(text: str) -> str:
    """A notebook's code cells as one Python file; shell (``!``) and magic (``%``) lines become
    comments, as Jupyter runs them outside Python; ``x = !cmd`` becomes what IPython makes of
    it, ``x = get_ipython().getoutput('cmd')`` (a value not known here)."""
    cells = json.loads(text)["cells"]
    lines = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            source = cell["source"]
            shell = False  # inside a shell line continued with a backslash
            for line in ("".join(source) if isinstance(source, list) else source).splitlines():
                captured = None if shell else _SHELL_ASSIGNMENT.match(line)
                if captured:
                    indent, name, command = captured.groups()
                    lines.append(f"{indent}{name} = get_ipython().getoutput({command.strip()!r})")
                    continue
                shell = shell or line.lstrip().startswith(("!", "%"))
                lines.append("# " + line if shell else line)
                shell = shell and line.rstrip().endswith("\\")
    return "\n".join(lines) + "\n"


# --- shell scripts: the config a here-document writes --------------------------------------

_SH_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_SH_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_SH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _closing(text: str, start: int, opening: str, closing: str) -> int:
    """The index of the bracket closing the one at ``start`` (nested ones counted), or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _sh_expand(text: str, env: dict[str, str]) -> str:
    """``text`` with its parameter expansions done as bash does them for ``env`` (the names
    the script binds); what bash would take from outside (an unbound name, a command's output)
    stays as written."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "$`\\\n":
            out.append("" if text[i + 1] == "\n" else text[i + 1])  # backslash-newline joins lines
            i += 2
        elif c == "$" and text.startswith("${", i):
            end = _closing(text, i + 1, "{", "}")
            if end < 0:
                out.append(text[i:])
                break
            out.append(_sh_parameter(text[i + 2 : end], text[i : end + 1], env))
            i = end + 1
        elif c == "$" and text.startswith("$(", i):
            end = _closing(text, i + 1, "(", ")")
            end = len(text) - 1 if end < 0 else end
            out.append(text[i : end + 1])  # a command's output: not known here
            i = end + 1
        elif c == "$" and (m := _SH_NAME.match(text, i + 1)):
            out.append(env.get(m.group(), text[i : m.end()]))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _sh_parameter(inner: str, written: str, env: dict[str, str]) -> str:
    """One ``${...}``: ``NAME``, ``NAME:-word`` or ``NAME-word``; any other form as written."""
    m = _SH_NAME.match(inner)
    if m is None:
        return written
    name, rest = m.group(), inner[m.end() :]
    if rest == "":
        return env.get(name, written)
    for op in (":-", "-"):
        if rest.startswith(op):
            value = env.get(name)
            if value is None or (op == ":-" and value == ""):
                return _sh_expand(rest[len(op) :], env)
            return value
    return written


def _sh_word(value: str) -> str:
    """The right-hand side of ``NAME=value`` as one shell word, before expansion: quotes
    removed (single-quoted text protected from expansion with backslashes), a trailing
    ``# comment`` dropped."""
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if c == '"':
            j = i + 1
            while j < len(value) and value[j] != '"':
                if value[j] == "$" and value.startswith("${", j):
                    j = max(j, _closing(value, j + 1, "{", "}"))
                elif value[j] == "$" and value.startswith("$(", j):
                    j = max(j, _closing(value, j + 1, "(", ")"))
                j += 2 if value[j] == "\\" else 1
            out.append(value[i + 1 : j])
            i = j + 1
        elif c == "'":
            j = value.find("'", i + 1)
            j = len(value) if j < 0 else j
            out.append(value[i + 1 : j].replace("\\", "\\\\").replace("$", "\\$"))
            i = j + 1
        elif c.isspace():
            break  # the word ends; what follows is a comment or another command
        elif value.startswith("$(", i) or value.startswith("${", i):  # blanks inside stay in the word
            end = _closing(value, i + 1, value[i + 1], "}" if value[i + 1] == "{" else ")")
            end = len(value) - 1 if end < 0 else end
            out.append(value[i : end + 1])
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def heredoc_config(text: str, delimiter: str) -> str:
    """The text the script's here-document ``delimiter`` (``NAME`` or ``NAME#n``, the n-th of
    that name) writes, expanded with the script's own assignments above it."""
    name, _, nth = delimiter.partition("#")
    wanted = int(nth or 1)
    env: dict[str, str] = {}
    lines = text.splitlines()
    seen = 0
    for number, line in enumerate(lines):
        found = _SH_HEREDOC.search(line)
        if found and found.group(3) == name:
            seen += 1
            if seen == wanted:
                strip_tabs, quoted = found.group(1) == "-", bool(found.group(2))
                body = []
                for inner in lines[number + 1 :]:
                    inner = inner.lstrip("\t") if strip_tabs else inner
                    if inner == name:
                        break
                    body.append(inner)
                else:
                    raise ValueError(f"the here-document <<{name} never ends")
                joined = "\n".join(body) + "\n"
                return joined if quoted else _sh_expand(joined, env)
        assigned = _SH_ASSIGN.match(line)
        if assigned and not line[:1].isspace():
            env[assigned.group(1)] = _sh_expand(_sh_word(assigned.group(2)), env)
    raise KeyError(f"the script has no here-document <<{delimiter}")


# --- a `gcloud ai custom-jobs create --worker-pool-spec=...` command line ----------------------
#
# gcloud builds the CustomJobSpec from its flags (googlecloudsdk/command_lib/ai/custom_jobs:
# flags.py, _WORKER_POOL_SPEC's ArgDict, and custom_jobs_util.py, _ConstructSingleWorkerPoolSpec,
# UpdateWorkerPoolSpecsIfLocalPackageRequired and ConstructCustomJobSpec; google-cloud-sdk-unofficial/
# google-cloud-sdk, read 2026-12-02): one pool per --worker-pool-spec, in order; replica-count 1
# and, when accelerator-type is given, accelerator-count 1 unless set; container-image-uri makes a
# containerSpec, else executor-image-uri / python-module (with --python-package-uris) a
# pythonPackageSpec; local-package-path in the first pool builds an image from executor-image-uri
# and the local code, which every non-empty pool then runs; --args goes to every pool's code,
# --command to every containerSpec. Any other key is refused ("valid keys are [...]").

#: --worker-pool-spec's keys and how gcloud reads each value (flags.py, _WORKER_POOL_SPEC).
_POOL_KEYS: dict[str, Callable[[str], Any]] = {
    "replica-count": int,
    "machine-type": str,
    "accelerator-type": str,
    "accelerator-count": int,
    "container-image-uri": str,
    "executor-image-uri": str,
    "output-image-uri": str,
    "python-module": str,
    "script": str,
    "local-package-path": str,
    "requirements": lambda v: v.split(";"),
    "extra-dirs": lambda v: v.split(";"),
    "extra-packages": lambda v: v.split(";"),
}
_BOOLEAN_FLAGS = frozenset({"enable-web-access", "enable-dashboard-access", "async"})
_SH_LOGICAL_ASSIGN = re.compile(_SH_ASSIGN.pattern, re.DOTALL)  # a value may run over lines
_GCLOUD_CREATE = ("ai", "custom-jobs", "create")


def _sh_logical_lines(text: str) -> list[str]:
    """The script's logical lines as bash reads them: a backslash-newline (outside single
    quotes) or a newline inside quotes continues the line; ``# comments`` dropped."""
    lines: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (not current or current[-1][-1:].isspace()):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c == "\n":
            lines.append("".join(current))
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    lines.append("".join(current))
    return lines


def _sh_split(line: str, env: dict[str, str]) -> list[str]:
    """One logical line's words after quote removal and parameter expansion (no word
    splitting of what expands, which holds no blanks in these scripts)."""
    words: list[str] = []
    word: list[str] | None = None
    i = 0
    while i < len(line):
        c = line[i]
        if c.isspace():
            if word is not None:
                words.append("".join(word))
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if c == "'":
            end = line.find("'", i + 1)
            end = len(line) if end < 0 else end
            word.append(line[i + 1 : end])
            i = end + 1
        elif c == '"':
            j = i + 1
            while j < len(line) and line[j] != '"':
                if line.startswith("${", j) or line.startswith("$(", j):
                    j = max(j, _closing(line, j + 1, line[j + 1], "}" if line[j + 1] == "{" else ")"))
                j += 2 if line[j] == "\\" else 1
            word.append(_sh_expand(line[i + 1 : j].replace('\\"', '"'), env))
            i = j + 1
        else:
            j = i
            while j < len(line) and not line[j].isspace() and line[j] not in "'\"":
                if line.startswith("${", j) or line.startswith("$(", j):
                    j = max(j, _closing(line, j + 1, line[j + 1], "}" if line[j + 1] == "{" else ")"))
                j += 2 if line[j] == "\\" else 1
            word.append(_sh_expand(line[i:j], env))
            i = j
    if word is not None:
        words.append("".join(word))
    return words


def _gcloud_list(value: str, delimiter: str = ",") -> list[str]:
    """An ArgList / ArgDict value split as gcloud splits it; ``^:^a:b`` names its own
    delimiter (``gcloud topic escaping``)."""
    if value.startswith("^") and value.find("^", 1) > 1:
        end = value.find("^", 1)
        delimiter, value = value[1:end], value[end + 1 :]
    return value.split(delimiter) if value else []


def _gcloud_pool(value: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for item in _gcloud_list(value):
        key, _, raw = item.partition("=")
        if key not in _POOL_KEYS:
            valid = ", ".join(sorted(_POOL_KEYS))
            raise ValueError(f"gcloud refuses --worker-pool-spec key {key!r}: valid keys are [{valid}]")
        spec[key] = _POOL_KEYS[key](raw)
    return spec


def _gcloud_flags(words: list[str]) -> dict[str, list[str]]:
    """``--flag=value`` / ``--flag value`` / ``--boolean-flag``, each flag's values in order."""
    flags: dict[str, list[str]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if not eq and name not in _BOOLEAN_FLAGS and i < len(words) and not words[i].startswith("--"):
            value, i = words[i], i + 1
        flags.setdefault(name, []).append(value if eq or name not in _BOOLEAN_FLAGS else "true")
    return flags


def gcloud_command_spec(text: str, which: str) -> dict[str, Any]:
    """The CustomJobSpec (camelCase, as gcloud sends it) of the script's ``gcloud [beta|alpha]
    ai custom-jobs create`` command ``which`` names (``custom-jobs create``, or ``#n`` appended
    for the n-th), its words expanded with the script's own assignments above it."""
    _, _, nth = which.partition("#")
    wanted = int(nth or 1)
    env: dict[str, str] = {}
    seen = 0
    for line in _sh_logical_lines(text):
        assigned = _SH_LOGICAL_ASSIGN.match(line)
        if assigned and not line[:1].isspace():
            env[assigned.group(1)] = _sh_expand(_sh_word(assigned.group(2)), env)
            continue
        words = _sh_split(line, env)
        if "gcloud" not in words:
            continue
        rest = [w for w in words[words.index("gcloud") + 1 :] if w not in ("beta", "alpha")]
        if tuple(rest[:3]) != _GCLOUD_CREATE:
            continue
        seen += 1
        if seen == wanted:
            return _gcloud_job_spec(_gcloud_flags(rest[3:]))
    raise KeyError(f"the script has no gcloud ai custom-jobs create #{wanted}")


def _gcloud_autopackage(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """local-package-path in the first pool: gcloud builds an image from its executor image and
    the local code, pushes it (to output-image-uri, else a name it makes up) and every non-empty
    pool runs it as its container."""
    if not specs or "local-package-path" not in specs[0]:
        return specs
    first = dict(specs[0])
    base, code = first.pop("executor-image-uri", ""), first.pop("local-package-path")
    built = first.pop("output-image-uri", None) or f"${{the image gcloud builds from {base} and {code}}}"
    for key in ("python-module", "script", "requirements", "extra-packages", "extra-dirs"):
        first.pop(key, None)
    return [{**s, "container-image-uri": built} if s else s for s in [first, *specs[1:]]]


def _gcloud_worker_pool(
    spec: dict[str, Any], package_uris: list[str], args: list[str], command: list[str]
) -> Any:
    """One WorkerPoolSpec as _ConstructSingleWorkerPoolSpec and ConstructCustomJobSpec make it."""
    if not spec:
        return {}  # an empty --worker-pool-spec: an empty (skipped) pool
    machine: dict[str, Any] = {"machineType": spec.get("machine-type")}
    if spec.get("accelerator-type"):
        machine["acceleratorType"] = spec["accelerator-type"]
        machine["acceleratorCount"] = spec.get("accelerator-count", 1)
    pool: dict[str, Any] = {"machineSpec": machine, "replicaCount": spec.get("replica-count", 1)}
    if spec.get("container-image-uri"):
        container: dict[str, Any] = {"imageUri": spec["container-image-uri"]}
        container.update({k: v for k, v in (("args", args), ("command", command)) if v})
        pool["containerSpec"] = container
    elif package_uris or spec.get("executor-image-uri") or spec.get("python-module"):
        package: dict[str, Any] = {"packageUris": package_uris}  # an unset field is not sent
        for key, name in (("executor-image-uri", "executorImageUri"), ("python-module", "pythonModule")):
            if spec.get(key):
                package[name] = spec[key]
        if args:
            package["args"] = args
        pool["pythonPackageSpec"] = package
    return pool


def _gcloud_job_spec(flags: dict[str, list[str]]) -> dict[str, Any]:
    if "config" in flags:
        raise ValueError("the command reads --config: put that file in the corpus as a gcloud-config entry")
    specs = _gcloud_autopackage([_gcloud_pool(v) for v in flags.get("worker-pool-spec", [])])
    if not specs:
        raise ValueError("the command gives no --worker-pool-spec")

    def listed(flag: str) -> list[str]:
        return [item for value in flags.get(flag, []) for item in _gcloud_list(value)]

    code = (listed("python-package-uris"), listed("args"), listed("command"))
    job: dict[str, Any] = {"workerPoolSpecs": [_gcloud_worker_pool(s, *code) for s in specs]}
    for flag, name in (
        ("network", "network"),
        ("service-account", "serviceAccount"),
        ("persistent-resource-id", "persistentResourceId"),
    ):
        if flags.get(flag):
            job[name] = flags[flag][-1]
    for flag, name in (
        ("enable-web-access", "enableWebAccess"),
        ("enable-dashboard-access", "enableDashboardAccess"),
    ):
        if flags.get(flag):
            job[name] = True
    return job


_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")


def _gcpc_payload(text: str, task: str) -> Any:
    """The CustomJob payload GCPC's launcher gets for ``task`` of a compiled KFP pipeline: its
    executor's ``--payload`` template with every ``{{$.inputs.parameters['x']}}`` replaced as
    the KFP backend resolves it (the task's constant, else the component's default; a STRING
    as its text, any other type as JSON; ``{{$.pipeline_persistent_resource_id}}`` as the empty
    string of a PipelineJob on no persistent resource). The empty defaults GCPC sends on every job
    come from the component's ``defaultValue``s."""
    pipeline = yaml.safe_load(text)
    node = pipeline["root"]["dag"]["tasks"][task]
    component = pipeline["components"][node["componentRef"]["name"]]
    args = pipeline["deploymentSpec"]["executors"][component["executorLabel"]]["container"]["args"]
    template = args[args.index("--payload") + 1]
    declared = component["inputDefinitions"]["parameters"]
    given = {
        name: value["runtimeValue"]["constant"]
        for name, value in node.get("inputs", {}).get("parameters", {}).items()
        if "runtimeValue" in value
    }

    def resolve(m: re.Match[str]) -> str:
        name = m.group(1)
        value = given.get(name, declared[name].get("defaultValue", ""))
        return value if declared[name]["parameterType"] == "STRING" else json.dumps(value)

    # A pipeline-level default the backend resolves too: the PipelineJob's persistent resource,
    # "an empty string" when it runs on none (GCPC's persistent_resource_id description).
    rendered = _PLACEHOLDER.sub(resolve, template).replace("{{$.pipeline_persistent_resource_id}}", "")
    return json.loads(rendered)


def spec_data(entry: Entry) -> Any:
    """The entry as the mapping (or text) ``parse_spec`` takes."""
    text = entry.text()
    config: Any = _UNKNOWN
    if entry.config:  # the parameters file the source reads with json.load
        config = yaml.safe_load((CORPUS_DIR / entry.config).read_text(encoding="utf-8"))
    if entry.file.endswith(".py.txt"):
        value = _value_of(entry.expr, ast.parse(text), config)
    elif entry.file.endswith(".ipynb"):  # a notebook: its code cells, read as one Python file
        value = _value_of(entry.expr, ast.parse(_notebook_code(text)), config)
    elif entry.file.endswith(".pprint.txt"):  # a spec as Python printed it (a notebook's output)
        value = ast.literal_eval(text)
    elif entry.file.endswith(".sh.txt") and entry.kind == "gcloud-command":  # flags on the command line
        value = gcloud_command_spec(text, entry.expr)
    elif entry.file.endswith(".sh.txt"):  # a shell script writing its config in a here-document
        value = heredoc_config(text, entry.expr)
    elif entry.kind == "gcpc-pipeline":  # a compiled pipeline; expr names the training task
        value = _gcpc_payload(text, entry.expr)
    else:
        value = text
    if entry.wrap == "worker_pool_specs":
        return {"workerPoolSpecs": value}
    return value


def judge(entry: Entry, run: Callable[..., Any] | None = None) -> Outcome:
    """Parses the entry and runs ``preflight --only compat`` on it."""
    from trainguard.errors import SpecError
    from trainguard.preflight import run_preflight
    from trainguard.spec import parse_spec

    try:
        spec = parse_spec(spec_data(entry), project="my-project", region=entry.region, source=entry.file)
    except SpecError as exc:
        return Outcome(entry, parsed=False, message=str(exc))
    try:
        report = (run or run_preflight)(spec, only=["compat"])
    except Exception:  # a defect: the scorer says so rather than dying
        return Outcome(
            entry, parsed=True, status="ERROR", message=traceback.format_exc(), internal_error=True
        )
    rules: dict[str, str] = {}
    for r in report.results:
        if r.status.value != "PASS":
            key = r.details.get("rule") or r.title
            worst = rules.get(key)
            order = ("WARN", "UNKNOWN", "FAIL", "ERROR")
            if worst is None or order.index(r.status.value) > order.index(worst):
                rules[key] = r.status.value
    errors = [r for r in report.results if r.status.value == "ERROR"]
    return Outcome(
        entry,
        parsed=True,
        status=report.worst().value,
        rules=rules,
        message="; ".join(r.evidence for r in errors),
        internal_error=bool(errors),
    )


def score(entries: Iterable[Entry]) -> Score:
    return Score([judge(e) for e in entries])


# --- what the corpus covers -------------------------------------------------------------------

#: The kinds of spec issue 28 requires the corpus to hold (at least one each).
REQUIRED_CATEGORIES: tuple[str, ...] = (
    *(
        f"gpu:{g}"
        for g in (
            "NVIDIA_TESLA_K80",
            "NVIDIA_TESLA_P100",
            "NVIDIA_TESLA_V100",
            "NVIDIA_TESLA_P4",
            "NVIDIA_TESLA_T4",
            "NVIDIA_TESLA_A100",
            "NVIDIA_A100_80GB",
            "NVIDIA_L4",
            "NVIDIA_H100_80GB",
            "NVIDIA_H100_MEGA_80GB",
            "NVIDIA_H200_141GB",
            "NVIDIA_B200",
            "NVIDIA_GB200",
        )
    ),
    *(f"tpu:{t}" for t in ("TPU_V2", "TPU_V3", "TPU_V5_LITEPOD", "TPU_V5P", "TPU_V6E", "TPU_7X")),
    "multi-worker",
    "reduction-server",
    "python-package",
    "spot",
    "flex-start",
    "reservation",
    "reservation-block",
    "persistent-resource",
    "psc-interface",
    "gcpc-defaults",
    "snake-case",
)

# TPU generations named by the machine type alone (no acceleratorType value of their own); v5p's
# machine family is ct5p (trainguard.catalog knows the family by its name shape).
_TPU_BY_MACHINE_PREFIX = {
    "ct5p-": "TPU_V5P",
    "ct5lp-": "TPU_V5_LITEPOD",
    "ct6e-": "TPU_V6E",
    "tpu7x-": "TPU_7X",
}
_KEY_CATEGORIES = {  # a key present (with a value) puts the spec in the category
    "reservationAffinity": "reservation",
    "reservation_affinity": "reservation",
    "persistentResourceId": "persistent-resource",
    "persistent_resource_id": "persistent-resource",
    "pscInterfaceConfig": "psc-interface",
    "psc_interface_config": "psc-interface",
    "pythonPackageSpec": "python-package",
    "python_package_spec": "python-package",
}
_SNAKE_KEYS = {"worker_pool_specs", "machine_spec", "replica_count", "container_spec", "image_uri"}


def _keys(value: Any) -> Iterable[tuple[str, Any]]:
    """Every (key, value) pair of the nested mappings in ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k), v
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def _raw_spec(entry: Entry) -> Any:
    """The entry's CustomJobSpec data as found (a body's jobSpec), None when it is no YAML."""
    from trainguard.errors import SpecError
    from trainguard.safe_yaml import load as load_yaml

    data = spec_data(entry)
    if isinstance(data, str):
        try:
            data = load_yaml(data, entry.file)
        except SpecError:
            return None
    if isinstance(data, dict):
        body = data.get("jobSpec", data.get("job_spec"))
        return body if isinstance(body, dict) else data
    return data


def _machine_category(machine_type: str) -> str | None:
    from trainguard.catalog import machine_rule

    tpu = next((t for p, t in _TPU_BY_MACHINE_PREFIX.items() if machine_type.startswith(p)), None)
    if tpu:
        return f"tpu:{tpu}"
    rule = machine_rule(machine_type)
    if rule is not None and rule.needs_accelerator and len(rule.accelerators) == 1:
        return f"gpu:{next(iter(rule.accelerators))}"  # a bundled GPU (a3-highgpu-8g: H100)
    return None


def _pair_category(key: str, value: Any) -> str | None:
    if key in ("acceleratorType", "accelerator_type") and isinstance(value, str) and value.isupper():
        return ("tpu:" if value.startswith("TPU") else "gpu:") + value
    if key in ("machineType", "machine_type") and isinstance(value, str):
        return _machine_category(value)
    if key == "strategy" and value in ("SPOT", "FLEX_START"):
        return "spot" if value == "SPOT" else "flex-start"
    if key == "values" and isinstance(value, list) and any("reservationBlocks/" in str(x) for x in value):
        return "reservation-block"
    if key in ("imageUri", "image_uri") and "reductionserver" in str(value):
        return "reduction-server"
    return _KEY_CATEGORIES.get(key) if value not in (None, "") else None


def categories(entry: Entry) -> frozenset[str]:
    """The REQUIRED_CATEGORIES (and any other ``gpu:``/``tpu:`` name) the entry's spec falls in,
    read from its data as found (a refused spec counts for what it holds)."""
    data = _raw_spec(entry)
    pairs = list(_keys(data))
    out = {c for c in (_pair_category(k, v) for k, v in pairs) if c}
    pools = data.get("workerPoolSpecs", data.get("worker_pool_specs")) if isinstance(data, dict) else None
    if isinstance(pools, list) and len([p for p in pools if p]) > 1:
        out.add("multi-worker")
    if {k for k, _ in pairs} & _SNAKE_KEYS:
        out.add("snake-case")
    if entry.kind.startswith("gcpc"):
        out.add("gcpc-defaults")
    return frozenset(out)
