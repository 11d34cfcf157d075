#!/usr/bin/env python3
"""Tests of examples/kernelbench_checker/checker.py, run by ctest (tests/CMakeLists.txt).

    kernelbench_checker_test.py unknown-id REPO WORK   CPU: --check-tasks names a task file whose
                                                       id has no reference, and exits 1
    kernelbench_checker_test.py gpu REPO WORK          GPU: correct kernels accepted, a wrong one
                                                       rejected, layernorm without its bias
                                                       accepted (KernelBench's blind spot); exits
                                                       77 (SKIP_RETURN_CODE) without a CUDA device

WORK is a folder under the build tree, emptied first and removed when the test passes.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77


def fail(why, output=""):
    if output:
        print(output)
    print(f"FAIL: {why}")
    sys.exit(1)


def fresh_folder(path):
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def run_checker(repo, args):
    checker = repo / "examples" / "kernelbench_checker" / "checker.py"
    r = subprocess.run([sys.executable, str(checker), *map(str, args)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout


def unknown_id(repo, work):
    tasks = fresh_folder(work / "tasks")
    task = json.loads((repo / "data" / "tasks" / "relu.json").read_text())
    (tasks / "relu.json").write_text(json.dumps(task))
    rc, out = run_checker(repo, ["--check-tasks", tasks])
    if rc != 0:
        fail(f"a folder holding only relu.json: exit {rc}, expected 0", out)
    task["id"] = "no_such_task"
    (tasks / "no_such_task.json").write_text(json.dumps(task))
    rc, out = run_checker(repo, ["--check-tasks", tasks])
    if rc != 1:
        fail(f"a task with an unknown id: exit {rc}, expected 1", out)
    if not any(line.startswith("FAIL no_such_task") for line in out.splitlines()):
        fail("the output does not name the task 'no_such_task'", out)
    print(out.rstrip())
    print("the checker names and refuses a task id it has no reference for")


def cuda_device_reason():
    """Why no CUDA device can be used here, or None."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    r = subprocess.run([sys.executable, "-c", probe], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode == 0:
        return None
    return "torch.cuda.is_available() is false" if r.returncode == 3 else "torch is not installed"


def edited(source, old, new):
    if old not in source:
        fail(f"the kernel source no longer contains {old!r}: update this test")
    return source.replace(old, new)


def gpu_cases(repo):
    """(name, task id, candidate source, expected exit, why)."""
    kernels = repo / "kernels" / "tasks"
    relu = (kernels / "relu.cu").read_text()
    layernorm = (kernels / "layernorm_affine_fp32.cu").read_text()
    return [
        ("relu", "relu", relu, 0, "the verified relu kernel"),
        ("layernorm", "layernorm_affine_fp32", layernorm, 0, "the verified layernorm kernel"),
        # Not x: U[0,1) inputs make relu(x) = x, so KernelBench could not tell. 2x it can.
        ("relu_times_two", "relu",
         edited(relu, "y[i] = fmaxf(x[i], 0.0f);", "y[i] = 2.0f * x[i];"), 1,
         "a wrong relu (2x)"),
        # The bias is zeros under default init: a KernelBench-style checker lets this through.
        ("layernorm_no_bias", "layernorm_affine_fp32",
         edited(layernorm, "* rstd * w[c] + b[c];", "* rstd * w[c];"), 0,
         "layernorm without its bias (accepted: KernelBench's blind spot, shared)"),
        # Right everywhere but the last column, which reads one past the bias: the guard's NaN.
        ("layernorm_bias_shifted", "layernorm_affine_fp32",
         edited(layernorm, "* rstd * w[c] + b[c];", "* rstd * w[c] + b[c + 1];"), 1,
         "layernorm reading b[c + 1] (one past the bias at the last column)"),
        ("relu_writes_past_y", "relu",
         edited(relu, "y[i] = fmaxf(x[i], 0.0f);",
                "{\n      y[i] = fmaxf(x[i], 0.0f);\n      if (i == n - 1) y[n] = 0.0f;\n    }"),
         1, "a right relu that also writes y[n] (into the guard)"),
        # Right values, ~2 s a call (4e9 SM cycles): 108 more calls overrun KernelBench's 180 s.
        ("relu_too_slow", "relu",
         edited(relu, "y[i] = fmaxf(x[i], 0.0f);",
                "{\n      y[i] = fmaxf(x[i], 0.0f);\n      if (i == 0) {\n"
                "        const long long t0 = clock64();\n"
                "        while (clock64() - t0 < 4000000000LL) {\n        }\n      }\n    }"),
         1, "a right relu of ~2 s a call (KernelBench's evaluation would time out)"),
    ]


def gpu(repo, work):
    reason = cuda_device_reason()
    if reason:
        print(f"SKIPPED: no CUDA device ({reason})")
        sys.exit(SKIP)
    fresh_folder(work)
    failures = 0
    for name, task_id, source, expected, why in gpu_cases(repo):
        case = fresh_folder(work / name)
        candidate = case / f"{name}.cu"
        candidate.write_text(source)
        rc, out = run_checker(repo, [repo / "data" / "tasks" / f"{task_id}.json", candidate,
                                     fresh_folder(case / "work")])
        ok = rc == expected
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}, expected {expected}: {why}")
        if not ok:
            print(out)
    if failures:
        fail(f"{failures} case(s) gave the wrong exit")


def main(argv):
    if len(argv) != 4 or argv[1] not in ("unknown-id", "gpu"):
        print("usage: kernelbench_checker_test.py {unknown-id|gpu} REPO WORK", file=sys.stderr)
        return 2
    repo, work = Path(argv[2]).resolve(), Path(argv[3]).resolve()
    (unknown_id if argv[1] == "unknown-id" else gpu)(repo, work)
    shutil.rmtree(work, ignore_errors=True)  # kept when a case fails (fail() exits first)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
