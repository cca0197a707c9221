"""CPU profile of running server processes for `orbitmq bench rocketmq --profile` (issue 24).

Issue 24 asks for "the slowest path and where its time goes (profile of both sides)". The bench
runs the slowest path (grpc.aio sends through the proxy) once more, untimed, while this module
samples the proxy and the broker of the side under load:

- OrbitMQ's processes (Python): py-spy (``pip install -e '.[bench]'``) records every thread
  (and forked workers: ``--subprocesses``) without pausing them (``--nonblocking``) as collapsed
  stacks (``--format raw``). Time in C called from Python (grpc's Cython core, the accelerators,
  protobuf's upb) is counted against the innermost Python frame that called it: ``Handle._run``
  of asyncio/events.py is grpc.aio's C callbacks, ``Thread.run`` grpc's C-core poller thread.
  --nonblocking cannot always tell a thread blocked in C from a running one, so leaves that are a
  wait (selectors' select, a lock's wait, a pool worker's queue; epoll_wait and the like with
  ``native``) are left out and counted as "waiting". ``native`` (``--native``) unwinds the C
  frames too, pausing the process for each sample.
- Apache's JVMs: JDK Flight Recorder (``jcmd PID JFR.start settings=profile
  method-profiling=max``: a sample a millisecond, ``JFR.stop``, then ``jfr print --events
  jdk.ExecutionSample --json``). jdk.ExecutionSample samples the threads running Java code only:
  a thread in a native method (epoll, a socket write) is a jdk.NativeMethodSample and not
  counted, nor are the JIT and GC threads.

Self time is the innermost frame of each sample; it is summed by function (method) and by package
(Python: the top-level module or orbitmq.<subpackage>; Java: the first three parts of the
package name, four under org.apache), as percentages of the (not waiting) samples.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orbitmq.bench.memory import tree_rss_mib

TOP = 12  # self-time entries kept per process
PY_SPY_RATE = 100  # samples per second per thread


def py_spy_binary() -> str | None:
    """py-spy beside this interpreter (the venv's, from the bench extra), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def raw_stacks(text: str) -> Iterator[tuple[list[str], int]]:
    """(frames outermost first, samples) of each line of py-spy's ``--format raw`` output
    ("frame;frame;... count"); a process frame's command line may hold newlines, so lines that do
    not end in a count are skipped."""
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            yield stack.split(";"), int(count)


# "func (path:line)" of py-spy's frames (--full-filenames); a process frame ("process 12:...") has none.
_PY_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>.*?)(?::(?P<line>\d+))?\)$")
_STDLIB = re.compile(r"/python3\.\d+/(?!site-packages/)(?P<rel>.*)$")
# A --native frame's shared object: libc.so.6, cygrpc.cpython-311-x86_64-linux-gnu.so, _message.abi3.so.
_NATIVE = re.compile(r"(?:^|/)(?P<lib>[^/]+?)(?:\.cpython-[^/]*|\.abi3)?\.so(?:\.[\d.]+)?$")


def python_package(path: str) -> str:
    """The package a sampled frame's file belongs to: orbitmq.<subpackage> for the project's own
    (folders linked under one orbitmq package: scripts/link_tree.py), the top-level module below
    site-packages (google.protobuf, google._upb for protobuf), the standard library's top-level
    module; with --native, the shared library (or CPython's C) a native frame runs in."""
    native = _NATIVE.search(path)
    if "/Python-3." in path or (native and native.group("lib").startswith("libpython")):
        return "CPython (C)"
    if path.endswith(".pyx"):  # the project's Cython accelerators (setup.py's _accelerators)
        return f"{Path(path).stem} (Cython)"
    if "/orbitmq/" in path:
        rest = path.rsplit("/orbitmq/", 1)[1].split("/")
        return "orbitmq." + rest[0].removesuffix(".py").split(".")[0] + (" (C)" if native else "")
    if "/site-packages/" in path:
        parts = path.rsplit("/site-packages/", 1)[1].split("/")
        top = f"google.{parts[1]}" if parts[0] == "google" and len(parts) > 2 else parts[0].split(".")[0]
        return top + (" (C)" if native else "")
    if native:
        return "native " + native.group("lib")
    stdlib = _STDLIB.search(path)
    if stdlib:
        return "stdlib " + stdlib.group("rel").split("/")[0].removesuffix(".py")
    if path.startswith("<frozen"):
        return "stdlib (frozen)"
    return Path(path).stem or path


def _short_path(path: str) -> str:
    if "/Python-3." in path or path.endswith(".pyx"):
        return ("CPython " if "/Python-3." in path else "") + Path(path).name
    native = _NATIVE.search(path)
    if native:
        return native.group("lib")
    for marker in ("/orbitmq/", "/site-packages/"):
        if marker in path:
            return ("orbitmq/" if marker == "/orbitmq/" else "") + path.rsplit(marker, 1)[1]
    stdlib = _STDLIB.search(path)
    return stdlib.group("rel") if stdlib else path


def _shares(counts: dict[str, int], total: int, limit: int | None = None) -> list[dict[str, Any]]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"name": k, "pct": 100.0 * v / total, "samples": v} for k, v in ranked[:limit]]


def summarise_py_spy(text: str, top: int = TOP) -> dict[str, Any]:
    """Self samples of py-spy raw output by function (line numbers dropped) and by package, as
    percentages of the samples that were not waiting (``waiting_pct``: the rest; py-spy
    --nonblocking cannot always tell a thread blocked in C from a running one)."""
    functions: dict[str, int] = {}
    packages: dict[str, int] = {}
    waiting = 0
    for frames, count in raw_stacks(text):
        match = _PY_FRAME.match(frames[-1]) if frames else None
        if match is None:  # a process or thread frame alone: no Python frame was sampled
            name, package = frames[-1] if frames else "?", "other"
        else:
            func, path = match.group("func"), match.group("path")
            if _is_wait(func, path):
                waiting += count
                continue
            if func.startswith("0x"):  # a native frame without a symbol
                func = "[no symbol]"
            name, package = f"{func} ({_short_path(path)})", python_package(path)
        functions[name] = functions.get(name, 0) + count
        packages[package] = packages.get(package, 0) + count
    busy = sum(functions.values())
    total = busy + waiting
    return {"samples": total, "busy_samples": busy, "waiting_pct": 100.0 * waiting / (total or 1),
            "top": _shares(functions, busy or 1, top), "packages": _shares(packages, busy or 1)}


# Leaves that are a thread waiting, not running: the event loop's epoll, a worker's queue, a lock
# (Python frames), and the same waits in libc (--native frames).
_PY_WAITS = (("select", "selectors.py"), ("wait", "threading.py"), ("_worker", "concurrent/futures/thread.py"),
             ("get", "queue.py"))
_NATIVE_WAITS = ("epoll_wait", "epoll_pwait", "poll", "ppoll", "select", "pselect", "pthread_cond_wait",
                 "pthread_cond_timedwait", "nanosleep", "clock_nanosleep", "__futex_abstimed_wait_common")


def _is_wait(func: str, path: str) -> bool:
    if _NATIVE.search(path):
        return func in _NATIVE_WAITS
    method = func.rsplit(".", 1)[-1]
    return any(method == name and path.endswith(file) for name, file in _PY_WAITS)


def java_package(class_name: str) -> str:
    """A Java class's package cut to three parts (io.netty.buffer, java.util.concurrent), four
    under org.apache (org.apache.rocketmq.proxy)."""
    parts = class_name.replace("/", ".").split(".")[:-1]
    if not parts:
        return "(default package)"
    return ".".join(parts[:4] if parts[:2] == ["org", "apache"] else parts[:3])


def summarise_jfr(doc: dict[str, Any], top: int = TOP) -> dict[str, Any]:
    """Self samples of ``jfr print --events jdk.ExecutionSample --json`` by method and package:
    the first frame of each stack trace is the running one."""
    methods: dict[str, int] = {}
    packages: dict[str, int] = {}
    for event in doc.get("recording", {}).get("events", []):
        values = event.get("values", {})
        if values.get("sampledThread", {}).get("javaName") == "Attach Listener":  # jcmd's own
            continue
        frames = (values.get("stackTrace") or {}).get("frames") or []
        if not frames:
            continue
        method = frames[0].get("method") or {}
        cls = ((method.get("type") or {}).get("name") or "?").replace("/", ".")
        name = f"{cls}.{method.get('name', '?')}"
        methods[name] = methods.get(name, 0) + 1
        package = java_package(cls)
        packages[package] = packages.get(package, 0) + 1
    total = sum(methods.values())
    return {"samples": total, "top": _shares(methods, total or 1, top), "packages": _shares(packages, total or 1)}


# ---- capture ----------------------------------------------------------------------------------

class PySpyCapture:
    """py-spy recording one Python process (and its forked workers) until :meth:`stop`."""

    tool = "py-spy"

    def __init__(self, pid: int, out: Path, rate: int = PY_SPY_RATE, native: bool = False) -> None:
        self.pid, self.out, self.rate, self.native = pid, out, rate, native
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = py_spy_binary()
        if exe is None:
            raise RuntimeError("--profile needs py-spy: pip install -e '.[bench]'")
        # --native unwinds the C frames too (grpc's core, libc's syscalls), which needs the process
        # paused for each sample: that run is slower, and its rate says so.
        mode = ["--native"] if self.native else ["--nonblocking"]
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(self.pid), "--subprocesses", *mode, "--full-filenames",
             "--rate", str(self.rate), "--format", "raw", "--output", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:  # Ctrl-C: py-spy writes what it sampled and exits
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def summary(self) -> dict[str, Any]:
        try:
            text = self.out.read_text(errors="replace")
        except OSError:
            err = self.proc.stderr.read().decode(errors="replace")[-500:] if self.proc and self.proc.stderr else ""
            return {"tool": self.tool, "samples": 0, "top": [], "packages": [], "error": f"no output: {err}"}
        finally:
            if self.proc is not None and self.proc.stderr is not None:
                self.proc.stderr.close()
        return {"tool": self.tool + (" --native" if self.native else ""), **summarise_py_spy(text)}


class JfrCapture:
    """A JDK Flight Recorder recording (settings=profile) of one JVM through jcmd."""

    tool = "JFR"

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.error: str | None = None

    def _jcmd(self, *command: str) -> None:
        run = subprocess.run(["jcmd", str(self.pid), *command], capture_output=True, text=True, timeout=60,
                             check=False)
        if run.returncode != 0 or "Could not" in run.stdout or "Exception" in run.stdout:
            raise RuntimeError(f"jcmd {self.pid} {' '.join(command)}: {run.stdout.strip()} {run.stderr.strip()}")

    def start(self) -> None:
        self._jcmd("JFR.start", "name=bench", "settings=profile", "method-profiling=max", f"filename={self.out}")

    def stop(self) -> None:
        try:
            self._jcmd("JFR.stop", "name=bench")
        except RuntimeError as e:
            self.error = str(e)

    def summary(self) -> dict[str, Any]:
        if self.error is None:
            run = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample", "--json", str(self.out)],
                                 capture_output=True, text=True, timeout=300, check=False)
            if run.returncode == 0:
                return {"tool": self.tool, **summarise_jfr(json.loads(run.stdout))}
            self.error = f"jfr print: {run.stderr.strip()[-500:]}"
        return {"tool": self.tool, "samples": 0, "top": [], "packages": [], "error": self.error}


def profile_load(kind: str, pids: dict[str, int], load: Callable[[], float], seconds: float,
                 out_dir: Path, native: bool = False) -> dict[str, Any]:
    """Run ``load`` (-> msgs/s; lasting ``seconds``) while each process of ``pids`` is sampled
    (JFR for Apache's JVMs, py-spy for OrbitMQ's, ``native``: with its C frames); print and return
    each process's summary and the profiled load's rate, which is not a timed figure (the
    profilers cost the servers CPU)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    captures: dict[str, PySpyCapture | JfrCapture] = {
        name: JfrCapture(pid, out_dir / f"{kind}-{name}.jfr") if kind == "apache"
        else PySpyCapture(pid, out_dir / f"{kind}-{name}.txt", native=native) for name, pid in pids.items()}
    started: list[PySpyCapture | JfrCapture] = []
    rss_before = {name: tree_rss_mib(pid) or 0.0 for name, pid in pids.items()}
    try:
        for capture in captures.values():
            capture.start()
            started.append(capture)
        time.sleep(0.5)  # py-spy attaches and JFR's first chunk begins before the load does
        rate = load()
    finally:
        for capture in started:
            capture.stop()
    # The run is inside the bench's peak-RSS sampling: what recording added (JFR's buffers in a
    # JVM) is kept beside the profile, so a peak-RSS figure of a --profile run can be read.
    rss_growth = {name: (tree_rss_mib(pid) or 0.0) - rss_before[name] for name, pid in pids.items()}
    result: dict[str, Any] = {"load": "grpc_sends", "seconds": seconds, "untimed_msgs_per_s": rate}
    print(f"  profile of an extra, untimed grpc_sends run ({seconds:g} s, {rate:,.0f} msgs/s while profiled; "
          f"not the table's figure):", flush=True)
    for name, capture in captures.items():
        summary = result[name] = {**capture.summary(), "rss_growth_mib": rss_growth[name]}
        print(format_summary(name, summary), flush=True)
    return result


def format_summary(name: str, summary: dict[str, Any]) -> str:
    """A process's top self-time entries and its split by package, for the bench's output."""
    waiting = f", {summary['waiting_pct']:.0f}% waiting left out" if summary.get("waiting_pct") else ""
    head = (f"    {name} ({summary['tool']}, {summary['samples']:,} samples{waiting}, self time; RSS "
            f"{summary.get('rss_growth_mib', 0.0):+.0f} MiB over the run)")
    if summary.get("error"):
        return f"{head}: not measured: {summary['error']}"
    lines = [head + ":"]
    lines += [f"      {e['pct']:5.1f}%  {e['name']}" for e in summary["top"]]
    split = ", ".join(f"{e['name']} {e['pct']:.1f}%" for e in summary["packages"][:10])
    lines.append(f"      by package: {split}")
    return "\n".join(lines)
