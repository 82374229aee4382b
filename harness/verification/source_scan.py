"""Scan the C++/CUDA text of a candidate (every string in its Python, or the sources it actually built)."""

from __future__ import annotations

import ast
import re
from typing import Any, Iterable

from harness.records import Check, Finding

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRING_LITERALS = re.compile(r'"(?:\\.|[^"\\\n])*"')

_FATAL_PATTERNS: list[tuple[Check, str, re.Pattern[str]]] = [
    (Check.STREAMS, "creates CUDA streams: work on a stream the timer does not wait for is invisible",
     re.compile(r"\b(cudaStreamCreate\w*|getStreamFromPool|cudaStreamPerThread|cudaStreamNonBlocking)\b")),
    (Check.STREAMS, "sets stream attributes or persisting-L2 windows: state that outlives the timed call",
     re.compile(r"\b(cudaStreamSetAttribute|accessPolicyWindow|cudaAccessPolicyWindow|cudaLimitPersistingL2CacheSize"
                r"|cudaDeviceSetLimit|cudaCtxResetPersistingL2Cache)\b")),
    (Check.STREAMS, "binds a library handle to a stream", re.compile(r"\b(cublasSetStream\w*|cudnnSetStream)\b")),
    (Check.THREADS, "starts threads: work after return escapes the timer",
     re.compile(r"\b(std::thread|std::jthread|pthread_create|std::async)\b|\.detach\s*\(")),
    (Check.FAST_MATH, "enables fast-math, which computes results the reference never does (a kernel that looked "
     "honest was off by 0.24 under -ffast-math): build without the flag, -O3 keeps IEEE semantics and still "
     "vectorises",
     re.compile(r"(-ffast-math|-?-use_fast_math|-Ofast|fast-math\"?\)|-funsafe-math-optimizations)")),
    (Check.PYTHON_CAPI, "reaches the Python interpreter from C++ (code, frames, imports, attributes): the harness "
     "lives in that interpreter",
     re.compile(r"\b(PyRun_\w+|PyImport_\w+|PyFrame_\w+|PyEval_\w+|PyThreadState_\w+|PyObject_SetAttr\w*"
                r"|PyObject_GetAttr\w*|PyDict_SetItem\w*|PySys_\w+|Py_CompileString\w*|PyModule_GetDict"
                r"|py::module_?::import|py::exec|py::eval|pybind11::module_?::import|pybind11::exec|pybind11::eval)\b")),
    (Check.PROFILER_HOOK, "installs an ATen/profiler callback: code that runs inside every PyTorch operator, the "
     "reference's included",
     re.compile(r"\b(addGlobalCallback|addThreadLocalCallback|RecordFunctionCallback|at::RecordFunction"
                r"|ThreadLocalDebugInfo|c10::impl::tls_\w+|setGlobalCallback)\b")),
    (Check.OPERATOR_OVERRIDE, "registers kernels for PyTorch's own operators (aten): it would replace the reference's "
     "implementation", re.compile(r"\bTORCH_LIBRARY_(IMPL|FRAGMENT)\s*\(\s*(aten|_)\b|\bDispatcher::singleton\b")),
    (Check.INCLUDE, "includes a file by absolute or parent path: builds read only their own sources and the "
     "toolchain's", re.compile(r'#\s*include\s*[<"](/|[^>"]*\.\./)')),
    (Check.IO, "file, process, network or environment access from C++",  # not torch::stable::clone, a tensor's copy
     re.compile(r"(?<![.>])(?<!stable::)(?<!torch::)(?<!\bat::)\b(fopen|fopen64|freopen"
                r"|std::ofstream|std::ifstream|std::fstream|socket|connect|popen|system|getenv|secure_getenv"
                r"|dlopen|dlsym|fork|vfork|execv\w*|execl\w*|posix_spawn\w*|clone|syscall|ptrace|mmap|mprotect|kill|setsid|prctl|unshare|setns|mount)\s*\(")),
]
_COMPUTE_OPS = (r"matmul|mm|bmm|addmm|baddbmm|linear|conv\w*|convolution|relu\w*|gelu|silu|sigmoid|tanh|softmax"
                r"|log_softmax|layer_norm|batch_norm|group_norm|instance_norm|\w*pool\w*|sum|mean|amax|amin|cumsum"
                r"|exp|log|sqrt|rsqrt|pow|einsum|\w*_loss|cross_entropy|kl_div|dropout|embedding|lstm|gru|rnn\w*"
                r"|scaled_dot_product_attention|norm|var|std|argmax|argmin|topk|sort|where|clamp|erf|hardtanh"
                r"|leaky_relu|elu|selu|mish|softplus|softsign|addcmul|addcdiv|mul|add|sub|div|max|min|subtract|sum_out")
# PyTorch's operators reached by name: at::sum(...), torch::matmul(...), and the stable ABI's torch::stable::amax(...)
# (torch/csrc/stable/ops.h, the light contract's own header), called or taken by address (`&torch::stable::sum`)
_TORCH_COMPUTE = re.compile(rf"\b(?:torch|at)::(?:native::|stable::)?({_COMPUTE_OPS})\b(?!\s*::)(?=\s*[(;,)])")
# the same operators under another name: `namespace ts = torch::stable;` then `ts::sum(`, `using namespace
# torch::stable;` or `using torch::stable::amax;` then `amax(`, the C shim (`aoti_torch_aten_amax`,
# `aoti_torch_cpu_mm_out`) and the boxed dispatcher (`aoti_torch_call_dispatcher("aten::sum", ...)`)
_NAMESPACE_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*(?:::)?(?:torch|at)(?:::(?:stable|native))?\s*;")
_USING_DIRECTIVE = re.compile(r"\busing\s+namespace\s+(?:::)?(?:torch|at)(?:::(?:stable|native))?\s*;")
_USING_DECLARATION = re.compile(r"\busing\s+(?:::)?(?:torch|at)::(?:stable::|native::)?(\w+)\s*;")
_UNQUALIFIED_OPS = re.compile(r"amax|amin|sum|sum_out|subtract|matmul|mm|bmm|addmm|baddbmm|linear|conv\w*d|softmax"
                              r"|log_softmax|layer_norm|einsum|cumsum|mean|argmax|argmin|topk")
_SHIM_COMPUTE = re.compile(rf"\baoti_torch_(?:aten|cpu|cuda)_(?:{_COMPUTE_OPS})(?:_out)?\s*\(")
_DISPATCHER_COMPUTE = re.compile(rf"call_dispatcher\s*\(\s*\"aten::(?:{_COMPUTE_OPS})(?:\.\w+)?\"")
_DEFINED_FUNCTIONS = re.compile(r"\b[\w:<>]+[\s*&]+(\w+)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*"
                                r"(?:const\s*)?\{")
_CALL_CONTEXT = re.compile(r"(?:[=(,;{}?:!&|+\-*/<>\[]|\breturn)\s*$")
_METHOD_COMPUTE = re.compile(rf"\.\s*({_COMPUTE_OPS})\s*\(")
_LIBRARY = re.compile(r"\b(cublas\w+|cublasLt\w+|cudnn\w+|cutlass::|cute::)")
_DOWNCAST = re.compile(r"\b(__float2half\w*|__half2float|__nv_bfloat16|__float2bfloat16\w*|__half2?|half2?)\b")


_OWN_LIBRARY = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,")
_OWN_OPS = re.compile(r"\.\s*def\s*\(\s*\"(?:\w+::)?(\w+)[(\"]")


# `using namespace std;` (or `using std::thread;`) then `thread t(...)`, `jthread{...}`, `async(...)`: the same
# threads under the names the directive brings in
_STD_DIRECTIVE = re.compile(r"\busing\s+(?:namespace\s+(?:::)?std\s*;|(?:::)?std::(?:thread|jthread|async)\s*;)")
_STD_NAMESPACE_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*(?:::)?std\s*;")
_UNQUALIFIED_THREADS = re.compile(r"(?<![\w:.>])(?:j?thread\s*(?:\w+\s*)?[({]|async\s*\()")


def _std_threads(code: str) -> int | None:
    """Where a thread is started through a using-directive or a namespace alias of std, else None."""
    for alias in _STD_NAMESPACE_ALIAS.findall(code):
        match = re.search(rf"\b{alias}::(?:j?thread|async)\b", code)
        if match:
            return match.start()
    if _STD_DIRECTIVE.search(code):
        match = _UNQUALIFIED_THREADS.search(code)
        if match:
            return match.start()
    return None


def own_namespaces(code: str) -> set[str]:
    """Operator namespaces the candidate's C++ defines (TORCH_LIBRARY(ns, m), the stable STABLE_TORCH_LIBRARY):
    torch.ops.<ns>.<op> then calls its own kernel."""
    return set(_OWN_LIBRARY.findall(code)) - {"aten", "_", "prim", "prims"}


def own_ops(code: str) -> dict[str, list[str]]:
    """Each own namespace with the operators its C++ defines (`m.def("relu(Tensor x) -> Tensor")`)."""
    names = sorted(dict.fromkeys(_OWN_OPS.findall(code)))
    return {namespace: names for namespace in sorted(own_namespaces(code))}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def string_constants(tree: ast.AST) -> str:
    """Every string literal in the Python file except docstrings, joined: the C++/CUDA sources and flags."""
    skip = _docstring_nodes(tree)
    parts = [n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]
    return "\n".join(parts)


def strip_comments(code: str) -> str:
    return _STRING_LITERALS.sub('""', _COMMENTS.sub(" ", code))


def _line_of(code: str, position: int) -> str:
    start = code.rfind("\n", 0, position) + 1
    end = code.find("\n", position)
    return code[start:end if end >= 0 else None].strip()[:160]


def scan_cpp(code: str, strict: bool) -> list[Any]:
    """Findings for C++/CUDA text. Attacks on the harness are fatal; library compute is fatal only if strict."""
    flags_and_code = code
    code = strip_comments(code)
    findings: list[Finding] = []
    for check, message, pattern in _FATAL_PATTERNS:
        text = {Check.FAST_MATH: flags_and_code, Check.INCLUDE: _COMMENTS.sub(" ", flags_and_code)}.get(check, code)
        match = pattern.search(text)
        if match:
            findings.append(Finding(check, f"{message}: `{_line_of(text, match.start())}`"))
    unqualified = _std_threads(code)
    if unqualified is not None and not any(f.check == Check.THREADS for f in findings):
        findings.append(Finding(Check.THREADS, f"starts threads: work after return escapes the timer: "
                                f"`{_line_of(code, unqualified)}`"))
    for pattern, what in ((_TORCH_COMPUTE, "calls PyTorch's own operator"), (_METHOD_COMPUTE, "calls a tensor op"),
                          (_LIBRARY, "calls a vendor library (cuBLAS/cuDNN/CUTLASS)")):
        match = pattern.search(code)
        if match:
            findings.append(Finding(Check.TORCH_COMPUTE if pattern is not _LIBRARY else Check.LIBRARY_COMPUTE,
                                    f"C++ {what} `{match.group(0).strip()}` in `{_line_of(code, match.start())}`",
                                    fatal=strict))
    if not any(f.check == Check.TORCH_COMPUTE for f in findings):
        renamed = _renamed_torch_compute(code, _COMMENTS.sub(" ", flags_and_code))
        if renamed is not None:
            text, line, form = renamed
            findings.append(Finding(Check.TORCH_COMPUTE, f"C++ calls PyTorch's own operator {form}: `{text}` in "
                                    f"`{line}`", fatal=strict))
    match = _DOWNCAST.search(code)
    if match:
        findings.append(Finding(Check.PRECISION, f"C++ computes in reduced precision (`{match.group(0)}`)",
                                fatal=strict))
    return findings


def _renamed_torch_compute(code: str, with_strings: str) -> tuple[str, str, str] | None:
    """A PyTorch operator reached under another name than `at::`/`torch::`/`torch::stable::` (see the patterns
    above): (the matched text, its line, the form). `code` has its string literals blanked, `with_strings` not
    (the dispatcher takes the operator's name as a string)."""
    for alias in _NAMESPACE_ALIAS.findall(code):
        match = re.search(rf"\b{re.escape(alias)}::({_COMPUTE_OPS})\b(?=\s*[(;,)])", code)
        if match:
            return match.group(0), _line_of(code, match.start()), f"through the namespace alias `{alias}`"
    match = _unqualified_compute(code)
    if match:
        return match.group(1), _line_of(code, match.start()), "through a `using` of its namespace"
    match = _SHIM_COMPUTE.search(code)
    if match:
        return match.group(0).rstrip("( "), _line_of(code, match.start()), "through its C shim"
    match = _DISPATCHER_COMPUTE.search(with_strings)
    if match:
        return match.group(0), _line_of(with_strings, match.start()), "through the dispatcher"
    return None


def _unqualified_compute(code: str) -> re.Match[str] | None:
    """After `using namespace torch::stable;` (or `at`), or `using torch::stable::amax;`: a call of one of those
    operators by its bare name, in a call's position (not a declaration), and not a function the code defines."""
    imported = {name for name in _USING_DECLARATION.findall(code) if _UNQUALIFIED_OPS.fullmatch(name)}
    if not (imported or _USING_DIRECTIVE.search(code)):
        return None
    names = _UNQUALIFIED_OPS.pattern if _USING_DIRECTIVE.search(code) else "|".join(sorted(imported))
    defined = set(_DEFINED_FUNCTIONS.findall(code))
    for match in re.finditer(rf"(?<![\w.:>])({names})\s*\(", code):
        if match.group(1) not in defined and _CALL_CONTEXT.search(code[max(0, match.start() - 80):match.start()]):
            return match
    return None


def scan_built_sources(builds: Iterable[dict[str, Any]], strict: bool) -> list[Any]:
    """Scan what was actually compiled (sources assembled at run time escape the Python-level scan)."""
    return scan_cpp("\n".join(b.get("source_text", "") for b in builds), strict)
