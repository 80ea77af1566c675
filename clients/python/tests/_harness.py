"""Real leaf nodes for the tests: a single plaintext node, or a 3-node TLS cluster started the way
deploy/local-cluster.sh starts one. Ports are picked by binding port 0; data lives in temporary
directories; every process is killed (SIGKILL) when its test ends."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import httpx

REPO = Path(__file__).resolve().parents[3]
BUILD_HINT = "build it with `cargo build -p leaf-node --bin leaf` (or point LEAF_BIN at a leaf binary)"


def leaf_bin() -> str:
    """The node binary: $LEAF_BIN, else <repo>/target/debug/leaf; raises if it is missing."""
    path = Path(os.environ.get("LEAF_BIN") or REPO / "target" / "debug" / "leaf")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(f"no leaf binary at {path}: {BUILD_HINT}")
    return str(path)


_GIVEN: set = set()


def free_port() -> int:
    """A free loopback port never handed out before by this process: the kernel may hand a port
    it just released to the next bind, and two nodes given one port make a broken cluster."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 30.0, every: float = 0.05) -> None:
    """Polls ``cond`` until it holds; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Node:
    """One `leaf serve` process."""

    def __init__(self, node_id: int, port: int, data_dir: Path, log: Path, args: List[str], env: Dict[str, str]):
        self.id = node_id
        self.port = port
        self.data_dir = data_dir
        self.log = log
        self.args = args
        self.env = env
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=self.env)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


class Deployment:
    """Nodes sharing one temp dir, token and (for a cluster) CA."""

    def __init__(self, scheme: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="leaf-py-"))
        self.scheme = scheme
        self.token = secrets.token_hex(16)
        self.secret = secrets.token_hex(16)
        self.nodes: Dict[int, Node] = {}
        self.ca: Optional[str] = None
        self._http: Optional[httpx.Client] = None

    # -- plumbing ---------------------------------------------------------------------------

    def http(self) -> httpx.Client:
        if self._http is None:
            verify = ssl.create_default_context(cafile=self.ca) if self.ca else True
            self._http = httpx.Client(verify=verify, trust_env=False, timeout=2.0)
        return self._http

    def url(self, node_id: int) -> str:
        return f"{self.scheme}://127.0.0.1:{self.nodes[node_id].port}"

    @property
    def urls(self) -> List[str]:
        return [self.url(i) for i in sorted(self.nodes)]

    def health(self, node_id: int) -> Optional[dict]:
        try:
            r = self.http().get(self.url(node_id) + "/health")
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def wait_ready(self, ids: Optional[List[int]] = None, timeout: float = 60.0) -> None:
        ids = ids or sorted(self.nodes)

        def ready() -> bool:
            for i in ids:
                if not self.nodes[i].alive():
                    raise AssertionError(f"node {i} exited:\n{self.nodes[i].log_tail()}")
            return all(self.health(i) is not None for i in ids)

        wait_for(f"nodes {ids} ready", ready, timeout)

    def leader_among(self, ids: List[int]) -> Optional[int]:
        """The leader every node of ``ids`` that answers agrees on and reports ready, if any."""
        seen = set()
        for i in ids:
            h = self.health(i)
            if h is None:
                return None
            seen.add(h.get("leader_id"))
        if len(seen) == 1:
            (leader,) = seen
            if leader in ids:
                return leader
        return None

    def wait_leader_among(self, ids: List[int], timeout: float = 30.0) -> int:
        found: List[int] = []

        def has() -> bool:
            l = self.leader_among(ids)
            if l is not None:
                found.append(l)
            return l is not None

        wait_for(f"a leader among {ids}", has, timeout)
        return found[-1]

    def close(self) -> None:
        for n in self.nodes.values():
            n.kill()
        if self._http is not None:
            self._http.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(f"===== node {i} ({n.log}) =====\n{n.log_tail()}" for i, n in sorted(self.nodes.items()))

    def _env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(LEAF_ADMIN_TOKEN=self.token, LEAF_CLUSTER_SECRET=self.secret, RUST_LOG="info,openraft=warn")
        return env


def start_single() -> Deployment:
    """One plaintext node with an admin token; it creates the tag `leaf-segment-test`."""
    binary = leaf_bin()
    d = Deployment("http")
    port = free_port()
    data = d.dir / "node1"
    args = [binary, "serve", "--data-dir", str(data), "--http-addr", f"127.0.0.1:{port}"]
    node = Node(1, port, data, d.dir / "node1.log", args, d._env())
    d.nodes[1] = node
    try:
        node.start()
        d.wait_ready(timeout=30)
    except BaseException:
        print(d.logs())
        d.close()
        raise
    return d


def start_cluster(n: int = 3) -> Deployment:
    """``n`` nodes with TLS (certificates from `leaf certs bundle`), as local-cluster.sh does."""
    binary = leaf_bin()
    d = Deployment("https")
    tls = d.dir / "tls"
    certs = [binary, "certs", "bundle", "--dir", str(tls)]
    for i in range(1, n + 1):
        certs += ["--node", f"{i}=127.0.0.1,localhost"]
    subprocess.run(certs, check=True, capture_output=True, timeout=60)
    d.ca = str(tls / "ca.pem")
    ports = {i: free_port() for i in range(1, n + 1)}
    peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in ports.items())
    for i, port in ports.items():
        data = d.dir / f"node{i}"
        args = [
            binary, "serve", "--node-id", str(i), "--http-addr", f"127.0.0.1:{port}", "--data-dir", str(data),
            "--peers", peers, "--tls-cert", str(tls / f"node-{i}.pem"), "--tls-key", str(tls / f"node-{i}-key.pem"),
            "--tls-ca", str(tls / "ca.pem"),
        ]
        d.nodes[i] = Node(i, port, data, d.dir / f"node{i}.log", args, d._env())
    try:
        for node in d.nodes.values():
            node.start()
        d.wait_ready(timeout=60)
        d.wait_leader_among(sorted(d.nodes))
    except BaseException:
        print(d.logs())
        d.close()
        raise
    return d
