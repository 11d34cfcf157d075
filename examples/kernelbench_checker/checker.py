#!/usr/bin/env python3
"""A KernelBench-style reward checker for kernelgate candidates, outside kernelgate.

    checker.py TASK_JSON CANDIDATE_CU WORKDIR   judge one candidate: exit 0 accept, 1 reject,
                                                2 checker error (bad usage, no torch, no GPU)
    checker.py --check-tasks DIR                without torch: every DIR/*.json has a reference
                                                here whose inputs match the task's

The rule is KernelBench's as kernelgate's built-in `kernelbench` protocol models it
(oracles/protocol.cpp): the task's first shape, 5 trials of fresh inputs (activations U[0,1),
module parameters at their default init: weights 1, biases 0), the PyTorch reference on the GPU,
torch.allclose(ref, cand) with atol = rtol = 1e-4 for float32 outputs and 1e-2 for float16 and
bfloat16 outputs. See README.md next to this file.
"""

import ctypes
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ACCEPT, REJECT, CHECKER_ERROR = 0, 1, 2

REPO_ROOT = Path(__file__).resolve().parents[2]
ABI_DIR = REPO_ROOT / "kernels" / "abi"

TRIALS = 5  # KernelBench's scripts/eval_from_generations.py: num_correct_trials = 5
FP32_TOL, LOW_PRECISION_TOL = 1e-4, 1e-2  # KernelBench's get_tolerance_for_precision
COMPILE_TIMEOUT_S = 300  # kernelgate's compile_options default
IN_KG_RUN = "in_kg_run"  # a marker file in the workdir while kg_run runs
# KernelBench's scripts/eval_from_generations.py: one evaluation (compile, the correctness trials,
# then 3 warm-up and num_perf_trials = 100 timed calls) has timeout = 180 s; one that runs past it
# has no result, so a kernel too slow to finish them is not counted correct.
EVAL_BUDGET_S = 180
PERF_CALLS = 3 + 100
# Each input and output sits between 0xff guards of max(this, its size) bytes a side, as
# kernelgate's audit places its trial buffers (KERNELGATE_AUDIT_GUARD, default 2 MiB): a read a
# little out of bounds gets NaN in both, and a write there rejects in both.
GUARD_MIN_BYTES = 2 << 20

# kernels/abi/kg_candidate.h: enum kg_dtype.
KG_DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 4, "int64": 5}
LOW_PRECISION = {"float16", "bfloat16"}
FLOATING = {"float32", "float16", "bfloat16"}
KG_MAX_DIMS = 8

# Imported on first use (import_torch), so that --check-tasks runs where torch is not installed.
torch = None
F = None


class CheckerError(Exception):
    """The checker cannot judge (exit 2): bad usage, a bad task file, no torch, no GPU."""


class Rejected(Exception):
    """The candidate is wrong (exit 1): compile failure, nonzero return, CUDA error, mismatch."""


# --- task files (no torch) --------------------------------------------------------------------


def load_task(path):
    try:
        with open(path, encoding="utf-8") as f:
            task = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckerError(f"cannot read task file {path}: {e}") from e
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        raise CheckerError(f"{path}: not a task file (no string 'id')")
    try:
        well_formed = isinstance(task["shapes"][0]["dims"], dict) and all(
            isinstance(t["name"], str) and isinstance(t["shape"], list)
            for t in task["inputs"] + task["outputs"])
    except (KeyError, IndexError, TypeError):
        well_formed = False
    if not well_formed:
        raise CheckerError(f"{path}: not a task file (shapes[0].dims, inputs and outputs with "
                           "name and shape)")
    return task


def resolve_dim(dim, dims):
    """workloads/task.cpp resolve_dim: a whole number, or a symbol of the shape. The task schema
    allows only these two forms in "shape" and "upper" (no arithmetic: that is flops/min_bytes)."""
    text = str(dim)
    if text[:1].isdigit():
        if not (text.isascii() and text.isdigit()):
            raise CheckerError(f"dimension '{text}' is not a whole number")
        return int(text)
    if text not in dims:
        raise CheckerError(f"dimension '{text}' is not defined by the shape")
    return int(dims[text])


def first_shape_dims(task):
    # KernelBench checks one problem size; kernelgate's peer protocols without tail_shape check
    # only shapes[0] as well.
    return task["shapes"][0]["dims"]


def resolve_shape(tensor, dims):
    return [resolve_dim(d, dims) for d in tensor["shape"]]


def role_of(tensor):
    return tensor.get("role", "activation")  # suite/task_catalog.cpp's default


# --- references: one function per task id, mirroring kernels/task_torch_refs.cpp -------------
#
# Each function takes the task's inputs by name, in the task file's order, plus `params` (the
# task's "params" object), and returns the outputs in order. The decorator records the op the
# task file must name, the roles its inputs must have, its output names, and the params it reads
# without a default, so --check-tasks can hold every task file to its function.

REFERENCES = {}


def reference(op, roles, outputs, needs=()):
    def register(fn):
        names = [p for p in inspect.signature(fn).parameters if p != "params"]
        assert len(names) == len(roles), f"{fn.__name__}: {len(names)} inputs, {len(roles)} roles"
        REFERENCES[fn.__name__] = {
            "fn": fn,
            "op": op,
            "inputs": names,
            "roles": list(roles),
            "outputs": list(outputs),
            "needs": list(needs),
        }
        return fn

    return register


def rmsnorm(x, weight, eps):
    # HF / Qwen3: float32 math on the input, cast back, then times the weight in its dtype.
    xf = x.float()
    n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return n * weight


def rope(x, positions, theta):
    # Rotate-half RoPE; angles in float64, cos/sin rounded to x's dtype (as the LibTorch ref).
    d = x.shape[-1]
    inv = torch.pow(theta, -torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    ang = positions.to(torch.float64).unsqueeze(-1) * inv
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def attention_decode(q, k_cache, v_cache, scale):
    # q [B, HQ, D]; k, v [B, HK, S, D]; query head h reads kv head h / (HQ / HK); float32 math
    # rounded once to q's dtype, as F.scaled_dot_product_attention computes it.
    group = q.shape[1] // k_cache.shape[1]
    k = k_cache.float().repeat_interleave(group, 1)
    v = v_cache.float().repeat_interleave(group, 1)
    s = torch.matmul(q.float().unsqueeze(2), k.transpose(-1, -2)) * scale
    return torch.matmul(torch.softmax(s, -1), v).squeeze(2).to(q.dtype)


@reference("abs", ["activation"], ["y"])
def abs_fp32(x, params):
    return [torch.abs(x)]


@reference("argmax_lastdim", ["activation"], ["index"])
def argmax_lastdim(x, params):
    return [x.argmax(-1)]


@reference("bmm", ["activation", "matrix"], ["c"])
def bmm_bf16(a, b, params):
    return [torch.bmm(a, b)]


@reference("cross_entropy", ["activation", "indices"], ["loss"])
def cross_entropy_mean(logits, target, params):
    return [F.cross_entropy(logits, target)]


@reference("cumsum_lastdim", ["activation"], ["y"])
def cumsum_lastdim(x, params):
    return [x.cumsum(-1)]


@reference("embedding", ["activation", "indices"], ["y"])
def embedding_gather_bf16(table, index, params):
    return [F.embedding(index, table)]


@reference("exp", ["activation"], ["y"])
def exp_fp32(x, params):
    return [torch.exp(x)]


@reference("add_layernorm", ["activation", "activation", "weight", "bias"], ["h", "y"])
def fused_add_layernorm(x, residual, weight, bias, params):
    h = x + residual
    return [h, F.layer_norm(h, (h.shape[-1],), weight, bias, params.get("eps", 1e-5))]


@reference("attention_decode_step", ["activation"] * 3, ["o"], needs=["scale"])
def fused_attention_decode_step(q, k_cache, v_cache, params):
    return [attention_decode(q, k_cache, v_cache, params["scale"])]


@reference("bias_residual", ["activation", "bias", "activation"], ["y"])
def fused_bias_dropout_free_residual(x, bias, residual, params):
    return [x + bias + residual]


@reference("linear_residual", ["activation", "matrix", "bias", "activation"], ["y"])
def fused_linear_residual(x, w, bias, residual, params):
    return [F.linear(x, w, bias) + residual]


@reference("masked_scaled_softmax", ["activation", "mask"], ["y"], needs=["scale"])
def fused_masked_scaled_softmax(x, mask, params):
    # mask [B, S] -> [B, 1, 1, S]; rows with every key masked are NaN in torch -> 0.
    keep = mask.ne(0).unsqueeze(1).unsqueeze(1)
    s = (x * params["scale"]).masked_fill(keep.logical_not(), float("-inf"))
    return [torch.nan_to_num(torch.softmax(s, -1), nan=0.0)]


@reference("rmsnorm_qk_per_head", ["activation", "activation", "weight", "weight"],
           ["q_out", "k_out"])
def fused_rmsnorm_qk_per_head(q, k, q_weight, k_weight, params):
    eps = params.get("eps", 1e-6)
    return [rmsnorm(q, q_weight, eps), rmsnorm(k, k_weight, eps)]


@reference("rope_qk", ["activation", "activation", "indices"], ["q_out", "k_out"])
def fused_rope_qk(q, k, positions, params):
    theta = params.get("theta", 1e6)
    pos = positions.unsqueeze(-1)  # [T, 1]: broadcast over heads
    return [rope(q, pos, theta), rope(k, pos, theta)]


@reference("scale_bias_tanh", ["activation", "bias"], ["y"], needs=["scale"])
def fused_scale_bias_tanh(x, bias, params):
    return [torch.tanh(x * params["scale"] + bias)]


@reference("silu_gate_mul", ["activation", "activation"], ["y"])
def fused_silu_gate_mul(gate, up, params):
    return [F.silu(gate) * up]


@reference("softmax_cross_entropy", ["activation", "indices"], ["loss"])
def fused_softmax_cross_entropy(logits, targets, params):
    return [F.cross_entropy(logits.float(), targets, reduction="none")]


@reference("gelu_tanh", ["activation"], ["y"])
def gelu_tanh(x, params):
    return [F.gelu(x, approximate="tanh")]


@reference("gemm_bias_gelu", ["activation", "matrix", "bias"], ["y"])
def gemm_bias_gelu(x, w, bias, params):
    return [F.gelu(F.linear(x, w, bias), approximate=params.get("approximate", "none"))]


@reference("gemm_bias_relu", ["activation", "matrix", "bias"], ["y"])
def gemm_bias_relu(x, w, bias, params):
    return [torch.relu(F.linear(x, w, bias))]


@reference("gemm_bias_silu", ["activation", "matrix", "bias"], ["y"])
def gemm_bias_silu(x, w, bias, params):
    return [F.silu(F.linear(x, w, bias))]


@reference("gemv", ["matrix", "activation"], ["y"])
def gemv_bf16(w, x, params):
    return [torch.mv(w, x)]


@reference("group_norm", ["activation", "weight", "bias"], ["y"], needs=["groups"])
def groupnorm_affine_fp32(x, weight, bias, params):
    return [F.group_norm(x, int(params["groups"]), weight, bias, params.get("eps", 1e-5))]


@reference("layer_norm", ["activation", "weight", "bias"], ["y"])
def layernorm_affine_fp32(x, weight, bias, params):
    return [F.layer_norm(x, (x.shape[-1],), weight, bias, params.get("eps", 1e-5))]


@reference("log_softmax", ["activation"], ["y"])
def log_softmax_lastdim(x, params):
    return [torch.log_softmax(x, -1)]


@reference("matmul", ["activation", "matrix"], ["c"])
def matmul_bf16(a, b, params):
    return [torch.matmul(a, b)]


@reference("matmul", ["activation", "matrix"], ["c"])
def matmul_skinny_bf16(a, b, params):
    return [torch.matmul(a, b)]


@reference("max_lastdim", ["activation"], ["y"])
def max_lastdim(x, params):
    return [x.max(-1).values]


@reference("mean_lastdim", ["activation"], ["y"])
def mean_lastdim(x, params):
    return [x.mean(-1)]


@reference("min_lastdim", ["activation"], ["y"])
def min_lastdim(x, params):
    return [x.min(-1).values]


@reference("mse_loss", ["activation", "activation"], ["loss"])
def mse_loss_mean(pred, target, params):
    return [F.mse_loss(pred, target)]


@reference("attention_decode_step", ["activation"] * 3, ["o"], needs=["scale"])
def qwen3_decode_attention_splitkv(q, k_cache, v_cache, params):
    return [attention_decode(q, k_cache, v_cache, params["scale"])]


@reference("linear", ["activation", "matrix"], ["y"])
def qwen3_decode_linear_bf16(x, w, params):
    return [F.linear(x, w)]


@reference("relu", ["activation"], ["y"])
def relu(x, params):
    return [torch.relu(x)]


@reference("relu_squared", ["activation"], ["y"])
def relu_squared(x, params):
    return [torch.relu(x).square()]


@reference("residual_add_rmsnorm", ["activation", "activation", "weight"], ["h", "y"])
def residual_add_rmsnorm(x, residual, weight, params):
    h = x + residual
    return [h, rmsnorm(h, weight, params.get("eps", 1e-6))]


@reference("rmsnorm", ["activation", "weight"], ["y"])
def rmsnorm_weight(x, weight, params):
    return [rmsnorm(x, weight, params.get("eps", 1e-6))]


@reference("rope_half", ["activation"], ["y"])
def rope_qwen3_fp32(x, params):
    pos = torch.arange(x.shape[-2], dtype=torch.int64, device=x.device)
    return [rope(x, pos, params.get("theta", 1e6))]


@reference("sdpa", ["activation"] * 3, ["o"])
def sdpa_fp32(q, k, v, params):
    scale = params.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    return [torch.matmul(torch.softmax(s, -1), v)]


@reference("silu", ["activation"], ["y"])
def silu(x, params):
    return [F.silu(x)]


@reference("softmax", ["activation"], ["y"])
def softmax_lastdim(x, params):
    return [torch.softmax(x, -1)]


@reference("softplus", ["activation"], ["y"])
def softplus(x, params):
    return [F.softplus(x)]


@reference("sum_lastdim", ["activation"], ["y"])
def sum_lastdim(x, params):
    return [x.sum(-1)]


@reference("transpose_2d", ["activation"], ["y"])
def transpose_2d_fp32(x, params):
    return [x.t().contiguous()]


# --- task <-> reference agreement (no torch) ---------------------------------------------------


def task_problems(task):
    """Why this checker cannot judge `task`, as a list of lines (empty: it can)."""
    ref = REFERENCES.get(task["id"])
    if ref is None:
        return [f"no reference function for task id '{task['id']}'"]
    problems = []
    if task.get("op") != ref["op"]:
        problems.append(f"op '{task.get('op')}', the reference computes '{ref['op']}'")
    names = [t.get("name") for t in task["inputs"]]
    roles = [role_of(t) for t in task["inputs"]]
    if names != ref["inputs"]:
        problems.append(f"inputs {names}, the reference takes {ref['inputs']}")
    elif roles != ref["roles"]:
        problems.append(f"input roles {roles}, the reference expects {ref['roles']}")
    outputs = [t.get("name") for t in task["outputs"]]
    if outputs != ref["outputs"]:
        problems.append(f"outputs {outputs}, the reference returns {ref['outputs']}")
    params = task.get("params") or {}
    problems += [f"params lack '{p}'" for p in ref["needs"] if p not in params]
    for t in task["inputs"] + task["outputs"]:
        if t.get("dtype") not in KG_DTYPE_CODES:
            problems.append(f"{t.get('name')}: dtype '{t.get('dtype')}' is not in the ABI")
    return problems + shape_problems(task)


def shape_problems(task):
    dims = first_shape_dims(task)
    problems = []
    for t in task["inputs"] + task["outputs"]:
        try:
            shape = resolve_shape(t, dims)
            if len(shape) > KG_MAX_DIMS:
                problems.append(f"{t['name']}: {len(shape)} dimensions, the ABI holds 8")
            if role_of(t) == "indices" and resolve_dim(t.get("upper", ""), dims) < 1:
                problems.append(f"{t['name']}: upper bound below 1")
        except CheckerError as e:
            problems.append(f"{t.get('name')}: {e}")
    return problems


def describe_shapes(task):
    dims = first_shape_dims(task)

    def show(tensors):
        return ", ".join(f"{t['name']}{resolve_shape(t, dims)}" for t in tensors)

    return f"{show(task['inputs'])} -> {show(task['outputs'])}"


def check_tasks(folder):
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        print(f"no task files in {folder}", file=sys.stderr)
        return CHECKER_ERROR
    failed = 0
    for f in files:
        try:
            task = load_task(f)
            problems = task_problems(task)
        except CheckerError as e:
            problems, task = [str(e)], {"id": f.stem}
        if problems:
            failed += 1
            print(f"FAIL {task['id']} ({f.name}): " + "; ".join(problems))
        else:
            print(f"ok   {task['id']}: {task['op']}: {describe_shapes(task)}")
    print(f"{len(files) - failed} of {len(files)} tasks covered")
    return ACCEPT if failed == 0 else REJECT


# --- torch, inputs and references on the GPU ---------------------------------------------------


def import_torch():
    global torch, F
    try:
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError as e:
        raise CheckerError(f"torch is not installed: {e}") from e
    if not torch_module.cuda.is_available():
        raise CheckerError("no CUDA device (torch.cuda.is_available() is false)")
    torch, F = torch_module, functional
    # kernelgate's reference accumulates half-precision products in float32 and rounds once,
    # and never uses TF32: keep cuBLAS from doing less.
    torch.backends.cuda.matmul.allow_tf32 = False
    for half in ("bf16", "fp16"):
        flag = f"allow_{half}_reduced_precision_reduction"
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)


def torch_dtype(name):
    return getattr(torch, name)


def make_input(t, dims):
    """One input drawn by role as kernelgate's make_task_inputs draws it for KernelBench
    (uniform01_activations, identity_params): generated in float32 (or int64), then cast."""
    shape, role, dev = resolve_shape(t, dims), role_of(t), "cuda"
    if role == "weight":  # default module init: LayerNorm/RMSNorm weight 1
        x = torch.ones(shape, device=dev)
    elif role == "bias":  # ... and bias 0
        x = torch.zeros(shape, device=dev)
    elif role == "matrix":
        x = torch.randn(shape, device=dev) / math.sqrt(shape[-1])
    elif role == "positive":
        x = 0.5 + 1.5 * torch.rand(shape, device=dev)
    elif role == "mask":
        x = torch.randint(0, 2, shape, device=dev)
    elif role == "indices":
        x = torch.randint(0, resolve_dim(t["upper"], dims), shape, device=dev)
    else:  # activation, uniform01: KernelBench's get_inputs() draws torch.rand
        x = torch.rand(shape, device=dev)
    return x.to(torch_dtype(t["dtype"])).contiguous()


def run_reference(task, inputs):
    """The reference outputs, cast to the output dtypes, a 0-d loss as the task's ["1"]."""
    fn = REFERENCES[task["id"]]["fn"]
    try:
        with torch.no_grad():
            outs = fn(*inputs, params=task.get("params") or {})
            outs = [o.reshape(1) if o.dim() == 0 else o for o in outs]
            outs = [o.to(torch_dtype(t["dtype"])).contiguous()
                    for o, t in zip(outs, task["outputs"])]
        torch.cuda.synchronize()
    except Exception as e:  # a reference that fails is this checker's fault, not the candidate's
        raise CheckerError(f"the reference of {task['id']} failed: {e}") from e
    return outs


# --- the candidate: compile, load, call --------------------------------------------------------


def find_nvcc():
    for nvcc in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if nvcc and os.access(nvcc, os.X_OK):
            return nvcc
    raise CheckerError("no nvcc: set NVCC, put nvcc on PATH, or install /usr/local/cuda")


def cuda_lib_dir(nvcc):
    root = Path(nvcc).resolve().parent.parent
    for d in (root / "lib64", root / "targets" / "x86_64-linux" / "lib", root / "lib"):
        if d.is_dir():
            return d
    return None


def nvcc_flags(nvcc):
    # sandbox/candidate_compiler.cpp candidate_nvcc_flags(), so that a mutant that fails to
    # compile there fails here too.
    flags = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo",
             "-gencode=arch=compute_90a,code=sm_90a", "--cudart=shared"]
    lib = cuda_lib_dir(nvcc)
    if lib:
        flags += ["-Xlinker", f"-rpath={lib}"]
    return flags + [f"-I{ABI_DIR}"]


def compile_candidate(candidate, workdir):
    """The candidate's shared object in workdir; Rejected if it does not compile."""
    nvcc = find_nvcc()
    source, shared_object = workdir / "candidate.cu", workdir / "candidate.so"
    # A copy, as kernelgate compiles a copy in its cache: includes resolve the same way.
    shutil.copyfile(candidate, source)
    command = [nvcc, *nvcc_flags(nvcc), "-o", str(shared_object), str(source)]
    try:
        r = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise Rejected(f"compile error: nvcc ran past {COMPILE_TIMEOUT_S} s") from e
    log = r.stdout.decode(errors="replace")
    (workdir / "compile.log").write_text(log)
    if r.returncode != 0 or not shared_object.exists():
        tail = "\n".join(log.strip().splitlines()[-20:])
        raise Rejected(f"compile error (nvcc exit {r.returncode}):\n{tail}")
    return shared_object


class KgTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * KG_MAX_DIMS), ("strides", ctypes.c_int64 * KG_MAX_DIMS)]


def kg_tensors(tensors, dtypes):
    arr = (KgTensor * max(1, len(tensors)))()
    for k, (t, name) in enumerate(zip(tensors, dtypes)):
        arr[k].data = t.data_ptr()
        arr[k].dtype = KG_DTYPE_CODES[name]
        arr[k].ndim = t.dim()
        for d in range(t.dim()):
            arr[k].shape[d] = t.shape[d]
            arr[k].strides[d] = t.stride(d)  # in elements, as the ABI says
    return arr


def load_candidate(shared_object):
    try:
        lib = ctypes.CDLL(str(shared_object))
        run = lib.kg_run
    except (OSError, AttributeError) as e:
        raise Rejected(f"cannot load kg_run: {e}") from e
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.POINTER(KgTensor), ctypes.c_int, ctypes.POINTER(KgTensor),
                    ctypes.c_int, ctypes.c_void_p]
    return lib, run


class Guarded:
    """A tensor inside one allocation, between guards of 0xff bytes: `tensor` is the view the
    candidate gets, every byte of `buf` starts 0xff."""

    def __init__(self, shape, dtype):
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        self.guard = (max(GUARD_MIN_BYTES, nbytes) + 255) // 256 * 256  # keeps 256-B alignment
        self.nbytes = nbytes
        self.buf = torch.full((2 * self.guard + nbytes,), 0xFF, dtype=torch.uint8, device="cuda")
        self.tensor = self.buf[self.guard:self.guard + nbytes].view(dtype).view(shape)

    def guards_intact(self):
        return bool((self.buf[:self.guard] == 0xFF).all()) and \
            bool((self.buf[self.guard + self.nbytes:] == 0xFF).all())


def guarded_inputs(inputs):
    gs = []
    for x in inputs:
        g = Guarded(list(x.shape), x.dtype)
        g.tensor.copy_(x)
        gs.append(g)
    return gs


def poisoned_outputs(task, dims):
    # Every byte 0xff, as kernelgate fills them: NaN for floats, -1 for integers. An element the
    # candidate does not write stays wrong.
    return [Guarded(resolve_shape(t, dims), torch_dtype(t["dtype"])) for t in task["outputs"]]


def last_cuda_error(lib):
    # kernelgate's worker checks cudaGetLastError after the call; the candidate's runtime (linked
    # with --cudart=shared) is reachable through its handle.
    try:
        fn = lib.cudaGetLastError
    except AttributeError:
        return 0
    fn.restype = ctypes.c_int
    return fn()


def call_candidate(lib, run, task, inputs, outputs, trial, marker, deadline):
    """kg_run on the current stream, then the whole device synchronized; Rejected on a nonzero
    return, a CUDA error, an input written in place, a write into a guard, or a call too slow for
    KernelBench's evaluation budget (ending at `deadline`, time.monotonic()). `inputs` and
    `outputs` are Guarded."""
    pristine = [g.tensor.clone() for g in inputs]
    kin = kg_tensors([g.tensor for g in inputs], [t["dtype"] for t in task["inputs"]])
    kout = kg_tensors([g.tensor for g in outputs], [t["dtype"] for t in task["outputs"]])
    torch.cuda.synchronize()
    last_cuda_error(lib)  # clears what torch's own calls may have left: the check below is kg_run's
    left = max(0.0, deadline - time.monotonic())
    watchdog = threading.Timer(left, hung, args=(trial, left))
    watchdog.daemon = True
    start = time.monotonic()
    watchdog.start()
    try:
        marker.touch()  # judge_in_child: a death from here on is the candidate's
        rc = run(kin, len(inputs), kout, len(outputs), torch.cuda.current_stream().cuda_stream)
        marker.unlink()
        torch.cuda.synchronize()  # the whole device: work left on other streams counts too
    except Exception as e:  # an illegal address and the like surface here
        raise Rejected(f"trial {trial}: CUDA error while running kg_run: {one_line(e)}") from e
    finally:
        watchdog.cancel()
    seconds = time.monotonic() - start
    if rc != 0:
        raise Rejected(f"trial {trial}: kg_run returned {rc}")
    err = last_cuda_error(lib)
    if err != 0:
        raise Rejected(f"trial {trial}: cudaGetLastError() = {err} after kg_run")
    for t, g, p in zip(task["inputs"], inputs, pristine):
        # Inputs are read-only by the ABI (kernelgate: REWARD_HACK); compared as bytes.
        if not torch.equal(g.tensor.view(-1).view(torch.uint8), p.view(-1).view(torch.uint8)):
            raise Rejected(f"trial {trial}: kg_run modified input '{t['name']}' in place")
    for t, g in zip(task["inputs"] + task["outputs"], inputs + outputs):
        if not g.guards_intact():
            raise Rejected(f"trial {trial}: kg_run wrote outside its buffers (into the guard "
                           f"around '{t['name']}')")
    calls_left = TRIALS - 1 - trial + PERF_CALLS
    if time.monotonic() + seconds * calls_left > deadline:
        raise Rejected(f"trial {trial}: kg_run took {seconds:.2f} s: {calls_left} more calls at "
                       f"that rate run past KernelBench's {EVAL_BUDGET_S} s evaluation timeout")


def hung(trial, seconds):
    print(f"trial {trial}: kg_run did not finish in the {seconds:.1f} s left of KernelBench's "
          f"{EVAL_BUDGET_S} s evaluation timeout", flush=True)
    print("verdict: REJECT (timeout)", flush=True)
    os._exit(REJECT)


def one_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# --- comparison ----------------------------------------------------------------------------------


def compare(ref, cand, dtype):
    """(passed, max abs error over finite pairs, mismatches) of one output."""
    if list(ref.shape) != list(cand.shape):
        return False, float("inf"), ref.numel()
    if ref.numel() == 0:
        return True, 0.0, 0
    r, c = ref.double(), cand.double()
    diff = (r - c).abs()
    finite = torch.isfinite(diff)
    max_err = float(diff[finite].max()) if bool(finite.any()) else float("inf")
    if dtype not in FLOATING:  # integer outputs (argmax): exact
        close = r == c
    else:
        # torch.allclose(ref, cand): |ref - cand| <= atol + rtol * |cand|, equal_nan=False;
        # evaluated in float64 as kernelgate's comparator does.
        tol = LOW_PRECISION_TOL if dtype in LOW_PRECISION else FP32_TOL
        close = torch.isclose(r, c, rtol=tol, atol=tol, equal_nan=False)
    mismatches = int((~close).sum())
    return mismatches == 0, max_err, mismatches


def judge_trial(task, trial, refs, outputs):
    passed = True
    for t, ref, out in zip(task["outputs"], refs, outputs):
        ok, max_err, bad = compare(ref, out, t["dtype"])
        shape_note = "" if list(ref.shape) == list(out.shape) else (
            f", shape {list(out.shape)} but the reference has {list(ref.shape)}")
        print(f"trial {trial} output {t['name']}: max abs error {max_err:.3e}, "
              f"{bad} of {ref.numel()} elements outside tolerance{shape_note}: "
              f"{'pass' if ok else 'FAIL'}", flush=True)
        passed = passed and ok
    return passed


def run_trials(task, lib, run, marker, deadline):
    dims = first_shape_dims(task)
    for trial in range(TRIALS):
        torch.manual_seed(trial)  # fresh inputs per trial, as KernelBench's trial seeds
        inputs = [make_input(t, dims) for t in task["inputs"]]
        refs = run_reference(task, inputs)  # first, as KernelBench runs Model before ModelNew
        guarded = guarded_inputs(inputs)
        outputs = poisoned_outputs(task, dims)
        call_candidate(lib, run, task, guarded, outputs, trial, marker, deadline)
        if not judge_trial(task, trial, refs, [g.tensor for g in outputs]):
            raise Rejected(f"trial {trial}: an output is outside torch.allclose's tolerance")


def check_candidate(task_path, candidate, workdir):
    task = load_task(task_path)
    problems = task_problems(task)
    if problems:
        raise CheckerError(f"cannot judge task {task['id']}: " + "; ".join(problems))
    if not Path(candidate).is_file():
        raise CheckerError(f"cannot read candidate {candidate}")
    import_torch()
    find_nvcc()  # a missing compiler is this checker's problem, not a compile error
    deadline = time.monotonic() + EVAL_BUDGET_S  # KernelBench's timeout covers the compile too
    lib, run = load_candidate(compile_candidate(candidate, Path(workdir)))
    run_trials(task, lib, run, Path(workdir) / IN_KG_RUN, deadline)


def judge(task_path, candidate, workdir):
    """The child's work: the exit code of one judgement."""
    try:
        check_candidate(task_path, candidate, workdir)
    except CheckerError as e:
        print(f"checker error: {one_line(e)}", file=sys.stderr)
        return CHECKER_ERROR
    except Rejected as e:
        print(str(e))
        print("verdict: REJECT")
        return REJECT
    except Exception as e:  # a bug here must not read as a rejection (Python's own exit is 1)
        print(f"checker error: internal: {type(e).__name__}: {one_line(e)}", file=sys.stderr)
        return CHECKER_ERROR
    print(f"verdict: ACCEPT ({TRIALS} trials, every output within tolerance)")
    return ACCEPT


def judge_in_child(task_path, candidate, workdir):
    """kg_run runs in a child process: a candidate whose host code kills the process (a
    segfault in kg_run) is a rejection, as kernelgate's worker reports it a runtime error, and
    not a checker error. Only a death inside kg_run counts so: the child marks that span."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / IN_KG_RUN
    marker.unlink(missing_ok=True)
    child = [sys.executable, str(Path(__file__).resolve()), "--judge", task_path, candidate,
             str(workdir)]
    rc = subprocess.run(child, stdin=subprocess.DEVNULL).returncode
    if rc >= 0:
        return rc
    if marker.exists():
        print(f"kg_run killed the process (signal {-rc})")
        print("verdict: REJECT")
        return REJECT
    print(f"checker error: the checker died of signal {-rc}", file=sys.stderr)
    return CHECKER_ERROR


def main(argv):
    if len(argv) == 3 and argv[1] == "--check-tasks":
        return check_tasks(argv[2])
    if len(argv) == 5 and argv[1] == "--judge":
        sys.stdout.reconfigure(line_buffering=True)  # the trials' lines survive a crash
        code = judge(*argv[2:])
        # Skip interpreter teardown: after a CUDA error, torch's destructors may abort, and the
        # exit code must stay the verdict.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if len(argv) != 4 or argv[1].startswith("-"):
        print("usage: checker.py TASK_JSON CANDIDATE_CU WORKDIR | checker.py --check-tasks DIR",
              file=sys.stderr)
        return CHECKER_ERROR
    return judge_in_child(*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
