"""A trainscaler server for the CI scripts that talk to one (.ci/docs-examples,
.ci/python-client): built if need be, started in a fresh directory on free loopback ports
with a new SQLite database, stopped on exit."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary():
    """The debug binary, built quietly (`TRAINSCALER_BIN` names another)."""
    path = os.environ.get("TRAINSCALER_BIN")
    if not path:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "trainscaler"], cwd=ROOT, check=True)
        # Where cargo put it: CARGO_TARGET_DIR when set (relative to the repository, where
        # cargo ran), else target/.
        path = str(ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "debug" / "trainscaler")
    return path


def wait_ready(url, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


class Server:
    """`with Server(path) as s:` gives `s.url`, `s.port`, `s.token`, `s.work` (its directory,
    with `catalog/` and `examples/` linked in) and `s.env` (the environment it runs with)."""

    def __init__(self, path, prefix="trainscaler-ci-"):
        self.binary = path
        self.work = Path(tempfile.mkdtemp(prefix=prefix))
        for name in ("catalog", "examples"):
            os.symlink(ROOT / name, self.work / name)
        self.port, grpc = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        for k in [k for k in env if k.startswith(("TRAINSCALER_", "AWS_", "ALIBABA_CLOUD_"))]:
            del env[k]  # the defaults, as a new user has them
        env.pop("DATABASE_URL", None)
        env.update(
            TRAINSCALER_BIND=f"127.0.0.1:{self.port}",
            TRAINSCALER_GRPC_BIND=f"127.0.0.1:{grpc}",
            TRAINSCALER_LOG_FORMAT="json",
        )
        self.env = env
        self.log_path = self.work / "server.log"
        self.proc = None
        self.token = None

    def __enter__(self):
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, "serve"], cwd=self.work, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        if not wait_ready(self.url, self.proc):
            self.stop()
            print(self.log_path.read_text(), file=sys.stderr)
            sys.exit("the server did not become ready")
        self.token = (self.work / "data" / "admin.key").read_text().strip()
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()

    def __exit__(self, kind, value, tb):
        self.stop()
        if kind is None:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print(f"server log: {self.log_path}", file=sys.stderr)
        return False
