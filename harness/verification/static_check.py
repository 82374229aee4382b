"""Static policy: read the candidate's Python (AST) and its C++/CUDA sources before anything runs.

Findings have a severity decided by the policy level: `strict` (all of forward's compute in the candidate's own
kernels) or `default` (library compute allowed but reported). Things that can only be an attack on the harness
(monkeypatching, introspection, threads, streams, I/O, fast-math) are rejected at every level. Everything is
read from the AST, so a `pass` in a comment or a `try` that falls back to nothing is not a finding.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from harness.policy import EvalPolicy
from harness.records import Check, Finding, Verdict
from harness.verification.source_scan import own_namespaces, scan_cpp, string_constants

_BUILD_FUNCTIONS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
# modules whose import can only serve to escape or observe the harness
_FORBIDDEN_MODULES = {
    "threading": "threads", "_thread": "threads", "multiprocessing": "processes", "concurrent": "threads/processes",
    "subprocess": "subprocesses", "socket": "network", "urllib": "network", "http": "network",
    "requests": "network", "httpx": "network", "asyncio": "concurrency", "inspect": "introspection",
    "gc": "introspection", "ctypes": "raw memory access", "importlib": "import machinery", "builtins": "builtins",
    "pickle": "deserialization", "shutil": "file access", "signal": "signal handlers", "atexit": "exit hooks",
    "sys": None,  # allowed, but see _FORBIDDEN_ATTRIBUTES
    "harness": "the harness", "kernelwright": "the harness", "kernelbench": "the harness", "store": "the store",
    "sqlite3": "databases", "sqlalchemy": "databases", "__main__": "the harness", "kernelwright_problem":
    "the problem module", "mmap": "raw memory access", "resource": "process limits",
}
# names that can only refer to the harness's or the problem's own module objects
_HARNESS_NAMES = ("kernelwright_problem", "kernelwright_candidate", "harness.", "__main__")
_FORBIDDEN_CALLS = {"eval": "dynamic code", "exec": "dynamic code", "compile": "dynamic code",
                    "globals": "introspection", "locals": "introspection", "vars": "introspection",
                    "open": "file access", "__import__": "import machinery", "setattr": "monkeypatching",
                    "delattr": "monkeypatching", "breakpoint": "debugger", "input": "stdin"}
_FORBIDDEN_ATTRIBUTES = {
    "_getframe": "introspection", "settrace": "tracing",
    "setprofile": "tracing", "Stream": "CUDA streams", "stream": "CUDA streams", "ExternalStream": "CUDA streams",
    "set_stream": "CUDA streams", "set_num_threads": "thread settings",
    "set_num_interop_threads": "thread settings", "use_deterministic_algorithms": "global state",
    "manual_seed": "RNG state", "seed": "RNG state", "set_rng_state": "RNG state", "__globals__": "introspection",
    "__code__": "introspection", "__closure__": "introspection", "__subclasses__": "introspection",
    "f_back": "introspection", "f_locals": "introspection", "__builtins__": "builtins",
    # the compute census runs an audit batch under a dispatch mode: asking whether one is active tells it apart
    "_python_dispatch": "introspection", "_len_torch_dispatch_stack": "introspection",
    "_get_dispatch_stack_at": "introspection", "_get_current_dispatch_mode": "introspection",
    "_get_current_dispatch_mode_stack": "introspection", "_is_torch_function_mode_enabled": "introspection",
    "_DisableTorchDispatch": "introspection", "_disable_current_modes": "introspection",
    "DisableTorchFunction": "introspection", "DisableTorchFunctionSubclass": "introspection",
    "_DisableFuncTorch": "introspection", "_pop_mode": "introspection", "_pop_torch_dispatch_stack": "introspection",
    "_unset_dispatch_mode": "introspection", "_ExcludeDispatchKeyGuard": "introspection",
    "cell_contents": "introspection", "__self__": "introspection", "__wrapped__": "introspection",
    # an object or a mode that answers for an operator: a call into the candidate's own kernel runs PyTorch instead
    "__torch_function__": "operator overriding", "__torch_dispatch__": "operator overriding",
    "TorchFunctionMode": "operator overriding", "TorchDispatchMode": "operator overriding",
    "as_subclass": "operator overriding", "_make_wrapper_subclass": "operator overriding",
    "_make_subclass": "operator overriding",
    # registering a Python implementation for the candidate's own operator: PyTorch answers the kernel's call
    "library": "operator registration", "Library": "operator registration", "custom_op": "operator registration",
    "register_kernel": "operator registration", "register_fake": "operator registration",
    "impl_abstract": "operator registration", "register_torch_dispatch": "operator registration",
}
# attributes that are only an escape when read off `os` or `sys`
_OS_SYS_ATTRIBUTES = {"modules": "introspection (sys.modules)", "fork": "processes", "system": "shell",
                      "popen": "shell", "spawnv": "processes", "environ": "environment access",
                      "getenv": "environment access", "exit": "exit", "_exit": "exit", "kill": "signals"}
# precision settings of the candidate's own process: reduced precision like .half() (the reference runs elsewhere)
_PRECISION_SETTINGS = {"allow_tf32": "TF32", "set_float32_matmul_precision": "reduced matmul precision",
                       "allow_fp16_reduced_precision_reduction": "fp16 reductions",
                       "allow_bf16_reduced_precision_reduction": "bf16 reductions"}
# forward-time keys that identify an input by its address or its values: a cache of outputs
_CACHE_KEYS = {"data_ptr": "address", "_cdata": "address", "id": "identity", "hash": "values", "tobytes": "values",
               "tolist": "values", "item": "values"}
_DOWNCASTS = {"half": "float16", "bfloat16": "bfloat16", "float16": "float16", "float8_e4m3fn": "float8",
              "float8_e5m2": "float8"}
_TORCH_NAMES = {"torch", "F", "nn", "functional"}
# forward-time torch calls that move or describe data rather than compute the answer
_SHAPE_ONLY = {"empty", "empty_like", "zeros", "zeros_like", "empty_strided", "contiguous", "view", "reshape",
               "size", "dim", "numel", "stride", "to", "cuda", "cpu", "device", "dtype", "is_contiguous",
               "data_ptr", "unsqueeze", "squeeze", "flatten", "expand", "permute", "transpose", "t", "detach",
               "shape", "narrow", "split", "chunk", "item", "tolist", "get_device", "new_empty", "float",
               "is_cuda", "type", "requires_grad_", "element_size", "storage_offset", "len", "range",
               "isinstance", "tuple", "list", "int", "enumerate", "zip", "max", "min", "getattr", "hasattr",
               "super", "print", "reversed", "sorted", "dict", "str", "abs_", "no_grad", "inference_mode",
               "current_device", "synchronize", "load_inline", "load", "is_available", "Event", "record",
               "elapsed_time", "get_device_properties", "device_count", "kaiming_uniform_", "kaiming_normal_",
               "xavier_uniform_", "xavier_normal_", "zeros_", "ones_", "normal_", "uniform_", "constant_",
               "calculate_gain", "_calculate_fan_in_and_fan_out", "Parameter", "register_buffer", "is_grad_enabled"}
# tensor methods that compute (x.sum(), y.exp()): PyTorch's kernels, not the candidate's
_TENSOR_COMPUTE = {"sum", "mean", "exp", "log", "sqrt", "rsqrt", "pow", "matmul", "mm", "bmm", "relu", "sigmoid",
                   "tanh", "softmax", "log_softmax", "max", "min", "amax", "amin", "argmax", "argmin", "clamp",
                   "clamp_", "abs", "neg", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_", "cumsum",
                   "norm", "var", "std", "prod", "addmm", "baddbmm", "einsum", "where", "masked_fill", "sort",
                   "topk", "gelu", "erf", "reciprocal", "square", "conv2d", "linear", "relu_", "exp_", "sign"}
_ARITHMETIC = (ast.Mult, ast.Add, ast.Sub, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)


@dataclass
class StaticReport:
    """`verdict` is set when the candidate cannot go further; `findings` carries every observation."""

    verdict: Verdict | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [f.render() for f in self.findings if f.fatal]

    @property
    def notes(self) -> list[str]:
        return [f.render() for f in self.findings if not f.fatal]


def _module_tag(reason: str) -> str:
    """The check's name for a forbidden module: the harness's own modules are `harness-alias`."""
    if reason.startswith("the "):
        return "harness-alias"
    return {"raw": "raw-memory", "import": "import-machinery"}.get(reason.split(" ")[0].split("/")[0],
                                                                   reason.split(" ")[0].split("/")[0])


def _writes_only(node: ast.Call) -> bool:
    """open(path, "w"): writing a file (a source for load(), say); reading one is what the ban is for."""
    mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(set(mode.value) & set("wx")) \
        and not set(mode.value) & set("r+")


def _on_self(node: ast.Call) -> bool:
    """setattr(self, ...)/delattr(self, ...): the module's own attributes, not another module's."""
    return bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """Local name -> top-level module for every import in the file."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = node.module.split(".")[0]
    return names


class _Checker(ast.NodeVisitor):
    def __init__(self, policy: EvalPolicy, tree: ast.Module) -> None:
        self.policy = policy
        self.strict = policy.static_policy == "strict"
        self.modules = _imported_modules(tree)
        self.findings: list[Finding] = []

    def add(self, check: Check, message: str, node: ast.AST | None, fatal: bool = True) -> None:
        self.findings.append(Finding(check, message, getattr(node, "lineno", None), fatal))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self._check_module(node.module, node)
            os_sys = node.module.split(".")[0] in ("os", "sys", "time")
            for alias in node.names:  # a forbidden attribute imported by name is the attribute
                reason = _FORBIDDEN_ATTRIBUTES.get(alias.name) or (_OS_SYS_ATTRIBUTES.get(alias.name) if os_sys else None)
                if reason:
                    self.add(Check.FORBIDDEN_API, f"imports {node.module}.{alias.name}: {reason}", node)

    def _check_module(self, module: str, node: ast.AST) -> None:
        top = module.split(".")[0]
        for part in module.split(".")[1:]:  # torch.utils._python_dispatch: a module that is a forbidden name
            if part in _FORBIDDEN_ATTRIBUTES:
                self.add(Check.FORBIDDEN_API, f"imports {module}: {_FORBIDDEN_ATTRIBUTES[part]}", node)
        if top == "torch" and ".multiprocessing" in f".{module}":
            self.add(Check.PROCESSES, f"imports {module}", node)
        reason = _FORBIDDEN_MODULES.get(module) or _FORBIDDEN_MODULES.get(top)
        if reason:
            self.add(Check(_module_tag(reason)), f"imports {module}: {reason} is not allowed in a candidate", node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 200 and \
                any(node.value == n or node.value.startswith(n) for n in _HARNESS_NAMES):
            self.add(Check.HARNESS_ALIAS, f"names the harness's or the problem's module ({node.value!r}): the "
                     "reference and the harness are not the candidate's to reach", node)
        if isinstance(node.value, str) and node.value in _FORBIDDEN_ATTRIBUTES:  # getattr(f, "__closure__")
            self.add(Check.FORBIDDEN_API, f"names {node.value!r}: {_FORBIDDEN_ATTRIBUTES[node.value]}", node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        allowed = (name == "open" and _writes_only(node)) or (name in ("setattr", "delattr") and _on_self(node))
        if isinstance(node.func, ast.Name) and name in _FORBIDDEN_CALLS and not allowed:
            self.add(Check(_FORBIDDEN_CALLS[name].split(" ")[0]), f"calls {name}(): {_FORBIDDEN_CALLS[name]}", node)
        if isinstance(node.func, ast.Attribute) and name in _PRECISION_SETTINGS:
            self.add(Check.PRECISION, f"calls {ast.unparse(node.func)}(): computes with {_PRECISION_SETTINGS[name]}",
                     node, fatal=self.strict)
        if isinstance(node.func, ast.Attribute) and name in _DOWNCASTS:
            self.add(Check.PRECISION, f"calls .{name}(): computes in {_DOWNCASTS[name]}", node, fatal=self.strict)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = _root_name(node)
        if node.attr in _OS_SYS_ATTRIBUTES and self.modules.get(root or "", root) in ("os", "sys"):
            self.add(Check.FORBIDDEN_API, f"uses {root}.{node.attr}: {_OS_SYS_ATTRIBUTES[node.attr]}", node)
        if node.attr in _FORBIDDEN_ATTRIBUTES:
            self.add(Check.FORBIDDEN_API, f"uses .{node.attr}: {_FORBIDDEN_ATTRIBUTES[node.attr]}", node)
        if node.attr in _DOWNCASTS and _root_name(node) in self.modules and \
                self.modules.get(_root_name(node) or "") == "torch" and not isinstance(node.ctx, ast.Store):
            self.add(Check.PRECISION, f"uses torch.{node.attr}: computes in {_DOWNCASTS[node.attr]}", node,
                     fatal=self.strict)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node)
        self.generic_visit(node)

    def _check_store(self, target: ast.expr, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute) and ast.unparse(target).startswith("torch.backends."):
            self._backend_setting(target, node)
        elif isinstance(target, ast.Attribute):
            root = _root_name(target)
            if root in self.modules or root in ("torch", "time", "builtins", "os", "sys"):
                self.add(Check.MONKEYPATCH, f"assigns {ast.unparse(target)}: patching a module (torch, timers, "
                         "builtins) changes the reference or the harness", node)
        elif isinstance(target, ast.Name) and target.id in ("get_inputs", "get_init_inputs"):
            self.add(Check.PROBLEM_OVERRIDE, f"redefines {target.id}: inputs always come from the problem", node)

    def _backend_setting(self, target: ast.Attribute, node: ast.AST) -> None:
        """torch.backends.* settings (cudnn.benchmark, allow_tf32) are configuration, not patches: they change only
        this process (the reference is timed in its own), so they are reported, and fatal only when strict."""
        name = ast.unparse(target)
        if target.attr in _PRECISION_SETTINGS:
            self.add(Check.PRECISION, f"sets {name}: computes with {_PRECISION_SETTINGS[target.attr]}", node,
                     fatal=self.strict)
        else:
            self.add(Check.GLOBAL_STATE, f"sets {name}: a process-wide backend setting the reference is timed without",
                     node, fatal=self.strict)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in _FORBIDDEN_ATTRIBUTES:  # def __torch_function__(...) in a helper class
            self.add(Check.FORBIDDEN_API, f"defines {node.name}: {_FORBIDDEN_ATTRIBUTES[node.name]}", node)
        if node.name in ("get_inputs", "get_init_inputs"):
            self.add(Check.PROBLEM_OVERRIDE, f"defines {node.name}(): inputs always come from the problem, so it "
                     "is ignored", node, fatal=self.strict)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.add(Check.GLOBAL_STATE, f"declares global {', '.join(node.names)}: state that survives calls can "
                 "cache outputs", node, fatal=self.strict)


def _try_fallbacks(tree: ast.Module, checker: _Checker) -> None:
    """A `try` whose handler computes or returns something is a fallback to a path the judge never saw."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            body = ast.Module(body=handler.body, type_ignores=[])
            computes = any(isinstance(n, ast.Call) and _call_name(n) not in ("print", "warn", "RuntimeError",
                                                                              "ValueError", "TypeError")
                           for n in ast.walk(body))
            returns = any(isinstance(n, ast.Return) for n in ast.walk(body))
            if computes or returns:
                checker.add(Check.TRY_FALLBACK, "a try/except whose handler computes or returns: if the kernel fails "
                            "it must fail, not fall back", handler)


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)


def _own_op(node: ast.Call, namespaces: set[str]) -> bool:
    """torch.ops.<ns>.<op>(...) or torch.ops.<ns>.<op>.default(...) with <ns> one of the candidate's own."""
    parts = ast.unparse(node.func).split(".")
    return len(parts) >= 4 and parts[0] == "torch" and parts[1] == "ops" and parts[2] in namespaces


def _caches(model_new: ast.ClassDef, checker: _Checker) -> None:
    """A lookup in forward keyed by an input's address or values (`cache[x.data_ptr()]`, `key in seen` with
    key from `.tobytes()`): outputs that depend on earlier calls. Reported by default, fatal under `strict`."""
    for method in model_new.body:
        if not isinstance(method, ast.FunctionDef) or method.name == "__init__":
            continue
        keys = {t.id for n in ast.walk(method) if isinstance(n, ast.Assign) and _keyed(n.value)
                for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(method):
            key = node.slice if isinstance(node, ast.Subscript) else \
                node.left if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) else None
            if key is not None and (_keyed(key) or (isinstance(key, ast.Name) and key.id in keys)):
                checker.add(Check.CACHE, f"{method.name}() looks up `{ast.unparse(node)[:80]}` by its inputs' "
                            "address or values: an output that depends on earlier calls is a cache, not a kernel",
                            node, fatal=checker.strict)
                break


def _keyed(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and _call_name(n) in _CACHE_KEYS for n in ast.walk(node))


# a tensor leaving PyTorch for another library's compute (NumPy's BLAS ships its own), and those libraries
_LEAVES_TORCH = {"numpy", "__array__", "__dlpack__", "to_dlpack", "from_dlpack"}
_OTHER_ARRAYS = {"numpy", "scipy", "cupy", "jax", "numba", "tensorflow"}


def _helpers(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level functions, lambdas and attribute aliases by name: code ModelNew's methods may run."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Lambda, ast.Attribute)):
            # a lambda, or an alias of an attribute (`_to_array = torch._C.TensorBase.numpy`)
            found.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _forward_code(model_new: ast.ClassDef, tree: ast.Module | None) -> list[tuple[str, ast.AST]]:
    """ModelNew's methods but __init__, and every module-level helper they name, however deep (a helper called
    from forward runs in forward: `def _product(A, B): return A.numpy() @ B.numpy()` is forward's compute)."""
    helpers = _helpers(tree) if tree is not None else {}
    bodies = [(m.name, m) for m in model_new.body if isinstance(m, ast.FunctionDef) and m.name != "__init__"]
    seen: set[str] = set()
    for _, body in bodies:  # grows while it is read
        for node in ast.walk(body):
            if isinstance(node, ast.Name) and node.id in helpers and node.id not in seen:
                seen.add(node.id)
                bodies.append((node.id, helpers[node.id]))
    return bodies


def _forward_compute(model_new: ast.ClassDef, checker: _Checker, namespaces: set[str] = frozenset(),
                     tree: ast.Module | None = None) -> None:
    """torch compute inside ModelNew's methods and the module-level helpers they call: reported by default, fatal
    under `strict`."""
    for where, code in _forward_code(model_new, tree):
        for node in ast.walk(code):
            if isinstance(node, ast.Attribute) and node.attr in _LEAVES_TORCH and not isinstance(node.ctx, ast.Store):
                checker.add(Check.TORCH_COMPUTE, f"{where}() names {ast.unparse(node)[:60]}: a tensor handed to "
                            "another array library computes where no census counts it", node, fatal=checker.strict)
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                checker.add(Check.TORCH_COMPUTE, f"{where}() uses the @ operator (torch matmul)", node,
                            fatal=checker.strict)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC) and _tensor_operands(node):
                checker.add(Check.TORCH_COMPUTE, f"{where}() computes `{ast.unparse(node)[:80]}` with tensor "
                            "operators (PyTorch kernels)", node, fatal=checker.strict)
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            root = _root_name(node.func)
            if checker.modules.get(root or "", "").split(".")[0] in _OTHER_ARRAYS:
                checker.add(Check.TORCH_COMPUTE, f"{where}() calls {ast.unparse(node.func)[:60]}(): a tensor handed "
                            "to another array library computes where no census counts it", node, fatal=checker.strict)
                continue
            torch_call = root in _TORCH_NAMES or checker.modules.get(root or "") == "torch"
            module_call = isinstance(node.func, ast.Attribute) and root == "self" and \
                isinstance(node.func.value, ast.Name)  # self.conv(x): an nn.Module computes
            method_call = isinstance(node.func, ast.Attribute) and name in _TENSOR_COMPUTE and \
                not (root in checker.modules and checker.modules.get(root or "") != "torch")
            if (torch_call or module_call or method_call) and name not in _SHAPE_ONLY and \
                    not _own_op(node, namespaces):
                what = ast.unparse(node.func)
                checker.add(Check.TORCH_COMPUTE, f"{where}() calls {what}(): PyTorch computes part of the "
                            "answer, not the candidate's kernel", node, fatal=checker.strict)


def _shape_like(node: ast.expr) -> bool:
    """Sizes and constants: `x.size(0) * 2`, `n // 4`, `self.k + 1` are arithmetic on shapes, not tensors."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call):
        return _call_name(node) in _SHAPE_ONLY
    if isinstance(node, ast.Attribute):
        return node.attr in ("shape", "ndim") or node.attr.startswith(("n_", "num", "dim", "size"))
    if isinstance(node, ast.Subscript):
        return _shape_like(node.value)
    if isinstance(node, ast.BinOp):
        return _shape_like(node.left) and _shape_like(node.right)
    return False


def _tensor_operands(node: ast.BinOp) -> bool:
    """Both sides may be tensors: neither is a constant or a size."""
    return not _shape_like(node.left) and not _shape_like(node.right)


def check_candidate(source: str, policy: EvalPolicy) -> StaticReport:
    report = StaticReport()
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        report.verdict = Verdict.COMPILE_ERROR
        report.findings.append(Finding(Check.SYNTAX, f"Python syntax error on line {exc.lineno}: {exc.msg}"))
        return report
    model_new = _model_new(tree)
    if model_new is None:
        report.verdict = Verdict.REJECTED
        report.findings.append(Finding(
            Check.NO_MODELNEW, "no `class ModelNew` at module level: a candidate must define "
                                       "ModelNew (KernelBench format) with the same constructor and forward "
                                       "signature as Model"))
        return report
    if policy.static_policy == "off":
        return _kernel_presence(tree, model_new, policy, report)
    checker = _Checker(policy, tree)
    checker.visit(tree)
    _try_fallbacks(tree, checker)
    code = string_constants(tree)
    _forward_compute(model_new, checker, own_namespaces(code), tree)
    _caches(model_new, checker)
    for finding in scan_cpp(code, strict=checker.strict):
        checker.findings.append(finding)
    report.findings.extend(checker.findings)
    _kernel_presence(tree, model_new, policy, report)
    if any(f.fatal for f in report.findings) and report.verdict is None:
        report.verdict = Verdict.REJECTED
    return report


def _kernel_presence(tree: ast.Module, model_new: ast.ClassDef, policy: EvalPolicy,
                     report: StaticReport) -> StaticReport:
    bindings = _bindings(tree)
    builds = any(isinstance(n, ast.Call) and _resolve(n.func, bindings) in _BUILD_FUNCTIONS for n in ast.walk(tree))
    inherits_reference = any(isinstance(b, ast.Name) and b.id == "Model" for b in model_new.bases)
    has_forward = any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model_new.body)
    if inherits_reference and not has_forward:
        report.findings.append(Finding(Check.NO_KERNEL, "ModelNew inherits Model's forward: the reference itself, "
                                       "no kernel", model_new.lineno, fatal=True))
    if not builds:
        report.findings.append(Finding(
            Check.NO_KERNEL, "no custom kernel: the candidate never calls torch.utils.cpp_extension.load_inline (or "
            "load), so forward() can only be PyTorch's own operators", None, fatal=policy.require_custom_kernel))
    if any(f.fatal for f in report.findings):
        report.verdict = report.verdict or Verdict.REJECTED
    return report


def _bindings(tree: ast.Module) -> dict[str, str]:
    """What each name the file binds by import (or by plain assignment of a resolvable name) refers to:
    `li` -> `torch.utils.cpp_extension.load_inline`, `ce` -> `torch.utils.cpp_extension`, `torch` -> `torch`.
    A name the file also binds to something else (a def, a class, another assignment) refers to nothing known."""
    bindings: dict[str, str] = {}
    ambiguous: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    bindings[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    for name in _BUILD_FUNCTIONS:
                        if name.rsplit(".", 1)[0] == node.module:
                            bindings[name.rsplit(".", 1)[1]] = name
                else:
                    bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            ambiguous.add(node.name)
    for node in ast.walk(tree):  # `build = load_inline`, `build = ce.load_inline`, after the imports are known
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            resolved = _resolve(node.value, bindings)
            name = node.targets[0].id
            if resolved and bindings.get(name, resolved) == resolved:
                bindings[name] = resolved
            else:
                ambiguous.add(name)
    return {name: target for name, target in bindings.items() if name not in ambiguous}


def _resolve(node: ast.expr, bindings: dict[str, str]) -> str | None:
    """The dotted path a name or attribute chain refers to through the file's bindings (`ce.load_inline` ->
    `torch.utils.cpp_extension.load_inline`); None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bindings:
        return None
    return ".".join([bindings[node.id], *reversed(parts)])
