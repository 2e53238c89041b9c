"""`podgroup-operator dev-cluster up | down | status | env`: a real control plane on loopback.

etcd, kube-apiserver and kube-controller-manager (v1.20.2 from Debian's kubernetes source
package, built once and cached outside the repository) run as plain processes. Everything the
cluster needs lives in one state directory: certificates, tokens, the kubeconfig, logs, and a
`cluster.json` that records ports and PIDs so that `down` stops exactly what `up` started.

The kubeconfig written here carries a marker extension; `podgroup-operator run` recognises it
and serves admission webhooks on 127.0.0.1, where this apiserver can call them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from email.message import Message
from pathlib import Path

import yaml

from podgroup_operator.local import (  # re-exported: the dev tools import them from here
    DEV_CLUSTER_MARKER,
    free_port,
)
from podgroup_operator.tls import make_rsa_key_pair, make_serving_cert

KUBERNETES_VERSION = "v1.20.2"
CACHE_ROOT = Path(
    os.environ.get("PODGROUP_OPERATOR_CACHE", Path.home() / ".cache" / "podgroup-operator")
)
BINARIES = CACHE_ROOT / f"kubernetes-{KUBERNETES_VERSION}"
DEFAULT_STATE_DIR = CACHE_ROOT / "dev-cluster"
BUILD_SCRIPT = Path(__file__).with_name("build-kubernetes.sh")

SERVICE_CIDR = "10.96.0.0/16"

IDENTITIES = {
    # user: (groups) — tokens are generated per cluster; `env`/the state file hand them out.
    "admin": ("system:masters",),
    "system:kube-controller-manager": (),
    "podgroup-operator": ("podgroup-operators",),
    "developer": ("developers",),
}
"""Static-token identities: an admin, the controller manager, and non-admins for RBAC tests."""


@dataclass
class ClusterState:
    """What `up` started: enough for `down`, `status`, tests and the operator to find it."""

    state_dir: str
    apiserver_port: int
    etcd_port: int
    etcd_data: str
    pids: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return Path(self.state_dir) / "kubeconfig"

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig for one of IDENTITIES (written by `up`)."""
        return Path(self.state_dir) / f"kubeconfig-{user.replace(':', '-')}"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "cluster.json"


def load_state(state_dir: Path = DEFAULT_STATE_DIR) -> ClusterState | None:
    path = _state_file(state_dir)
    if not path.exists():
        return None
    return ClusterState(**json.loads(path.read_text()))


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: it has ended and waits to be reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); look at its state.
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields and fields[0] == "Z":
            return False
    return True


CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager")
SCHEDULER = "kube-scheduler"
"""Built only on request (`dev-cluster build --with-scheduler`, which `make control-plane` runs):
for `bench scale --versus` and the test that holds our filters to kube-scheduler's."""


def ensure_binaries(*, with_scheduler: bool = False) -> Path:
    """Build the control plane (and kube-scheduler if asked) once; later calls return at once."""
    binaries = BINARIES / "bin"
    wanted = [*CONTROL_PLANE, *([SCHEDULER] if with_scheduler else [])]
    if any(not (binaries / name).exists() for name in wanted):
        subprocess.run(["bash", str(BUILD_SCRIPT), str(BINARIES), *wanted], check=True)
    if shutil.which("etcd") is None:
        # The cache may survive on a machine whose packages were reset.
        root = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run([*root, "apt-get", "update", "-qq"], check=True)
        subprocess.run(
            [
                *root,
                "env",
                "DEBIAN_FRONTEND=noninteractive",
                "apt-get",
                "install",
                "-y",
                "-qq",
                "etcd-server",
            ],
            check=True,
        )
    return binaries


def _write_kubeconfig(path: Path, server: str, ca: Path, user: str, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "dev", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": user}}],
        "current-context": "dev",
        "extensions": [
            {
                "name": DEV_CLUSTER_MARKER,
                "extension": {"apiVersion": "v1", "kind": "Config", "preferences": {}},
            }
        ],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def _spawn(name: str, argv: list[str], state_dir: Path) -> int:
    log = (state_dir / "logs" / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    return proc.pid


def api_get(
    state: ClusterState, path: str, *, token: str | None = None, timeout: float = 10.0
) -> tuple[int, Message, bytes]:
    """GET `path` from the dev cluster's API server: (HTTP status, headers, body), a refusal
    included; as its admin unless `token` says who. For what the typed client does not read:
    `/readyz`, the API server's own `/metrics`, the headers of an answer."""
    context = ssl.create_default_context(cafile=str(Path(state.state_dir) / "pki" / "ca.crt"))
    request = urllib.request.Request(
        f"{state.server}{path}",
        headers={"Authorization": f"Bearer {token or state.tokens['admin']}"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers, refused.read()


def _wait_ready(state: ClusterState, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        for name, pid in state.pids.items():
            if not alive(pid):
                log = Path(state.state_dir) / "logs" / f"{name}.log"
                lines = log.read_text(errors="replace").splitlines() if log.exists() else []
                # klog's fatal lines (F1122 ...) say why; a goroutine dump follows them.
                fatal = [line for line in lines if re.match(r"^F\d{4} ", line)][:3]
                raise RuntimeError(
                    f"{name} exited during start-up; fatal: {fatal}; last log lines:\n"
                    + "\n".join(lines[-20:])
                )
        try:
            status = api_get(state, "/readyz", timeout=2)[0]
            if status == 200:
                return
            last_error = f"/readyz answered {status}"
        except OSError as exc:
            last_error = str(exc)
        time.sleep(0.3)
    raise TimeoutError(f"kube-apiserver not ready after {timeout:.0f}s: {last_error}")


def _record_and_wait(state: ClusterState, state_dir: Path, timeout: float) -> None:
    """Save what runs (so `down` finds it), then wait for /readyz; on failure stop it all."""
    _state_file(state_dir).write_text(json.dumps(asdict(state), indent=2))
    try:
        _wait_ready(state, timeout)
    except Exception:
        down(state_dir)
        raise


def up(
    state_dir: Path = DEFAULT_STATE_DIR,
    timeout: float = 90.0,
    *,
    priority_and_fairness: bool = False,
) -> ClusterState:
    """Start etcd, kube-apiserver and kube-controller-manager; return once /readyz answers.

    API Priority and Fairness is off unless asked for (a test of the install's FlowSchemas asks):
    every benchmark figure of the project was measured under the plain in-flight limits below."""
    existing = load_state(state_dir)
    if existing and all(alive(pid) for pid in existing.pids.values()):
        return existing
    if existing:
        down(state_dir)
    binaries = ensure_binaries()
    state_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("logs", "pki"):
        (state_dir / sub).mkdir(exist_ok=True)
    pki = state_dir / "pki"
    serving = make_serving_cert(
        pki, "apiserver", ["127.0.0.1", "localhost", "kubernetes.default.svc"]
    )
    make_rsa_key_pair(pki / "sa.key", pki / "sa.pub")

    shm = Path("/dev/shm")
    etcd_parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else state_dir
    etcd_data = Path(etcd_parent, f"podgroup-operator-etcd-{abs(hash(str(state_dir.resolve()))):x}")
    shutil.rmtree(etcd_data, ignore_errors=True)

    state = ClusterState(
        state_dir=str(state_dir),
        apiserver_port=free_port(),
        etcd_port=free_port(),
        etcd_data=str(etcd_data),
        tokens={user: secrets.token_hex(16) for user in IDENTITIES},
    )
    with (state_dir / "tokens.csv").open("w") as tokens:
        for user, groups in IDENTITIES.items():
            tokens.write(f'{state.tokens[user]},{user},{user},"{",".join(groups)}"\n')
    (state_dir / "tokens.csv").chmod(0o600)
    for user, token in state.tokens.items():
        _write_kubeconfig(state.kubeconfig_for(user), state.server, serving.cafile, user, token)
    shutil.copy(state.kubeconfig_for("admin"), state.kubeconfig)

    peer_port = free_port()
    etcd_url = f"http://127.0.0.1:{state.etcd_port}"
    state.pids["etcd"] = _spawn(
        "etcd",
        [
            "etcd",
            "--name=dev",
            f"--data-dir={etcd_data}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=dev=http://127.0.0.1:{peer_port}",
            "--log-level=warn",
        ],
        state_dir,
    )
    state.pids["kube-apiserver"] = _spawn(
        "kube-apiserver",
        [
            str(binaries / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={state.apiserver_port}",
            "--insecure-port=0",
            f"--tls-cert-file={serving.certfile}",
            f"--tls-private-key-file={serving.pkeyfile}",
            f"--client-ca-file={serving.cafile}",
            f"--token-auth-file={state_dir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--api-audiences=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--enable-priority-and-fairness={str(priority_and_fairness).lower()}",
            "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000",
            "--v=1",
        ],
        state_dir,
    )
    # The controller manager gives up when the apiserver is not healthy to it within seconds,
    # and its RBAC roles exist only once the apiserver has bootstrapped them: on a busy machine
    # that took longer ("cannot get path /healthz"). Start it once /readyz answers.
    _record_and_wait(state, state_dir, timeout)
    cm_kubeconfig = state.kubeconfig_for("system:kube-controller-manager")
    state.pids["kube-controller-manager"] = _spawn(
        "kube-controller-manager",
        [
            str(binaries / "kube-controller-manager"),
            f"--kubeconfig={cm_kubeconfig}",
            f"--authentication-kubeconfig={cm_kubeconfig}",
            f"--authorization-kubeconfig={cm_kubeconfig}",
            "--leader-elect=false",
            # No pod network here: node IPAM would wait for CIDRs forever.
            "--controllers=*,-nodeipam",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={serving.cafile}",
            "--use-service-account-credentials=true",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--port=0",
            # Quicker node health verdicts than production, so fault tests run in seconds.
            "--node-monitor-period=2s",
            "--node-monitor-grace-period=16s",
            # The PV controller retries a claim it could not bind at once (about one pre-bound
            # claim in three here, its cache a step behind) at this period: 15 s by default,
            # which each such claim in the tests waited out.
            "--pvclaimbinder-sync-period=2s",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--v=1",
        ],
        state_dir,
    )
    _record_and_wait(state, state_dir, timeout)
    return state


def _stop(pid: int, grace: float) -> bool:
    """SIGTERM, then SIGKILL after `grace` seconds; False if it was not running."""
    if not alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


def start_kube_scheduler(
    kubeconfig: Path, state_dir: Path, *, qps: int = 2000
) -> subprocess.Popen[bytes]:
    """kube-scheduler (built with `ensure_binaries(with_scheduler=True)`) against the cluster
    of `kubeconfig`, logging to `state_dir/kube-scheduler.log`; the caller stops it.

    `qps` and the same burst: client-go's default of 50 would make the API client, not the
    scheduler, what `bench scale --versus` measures. No leader election: one instance.
    """
    config = state_dir / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": qps},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    return subprocess.Popen(
        [
            str(BINARIES / "bin" / SCHEDULER),
            f"--config={config}",
            "--port=0",
            f"--secure-port={free_port()}",
            "--bind-address=127.0.0.1",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "-v=1",
        ],
        stdout=(state_dir / "kube-scheduler.log").open("ab"),
        stderr=subprocess.STDOUT,
    )


def restart_apiserver(
    state_dir: Path = DEFAULT_STATE_DIR,
    down_seconds: float = 0.0,
    timeout: float = 90.0,
    *,
    kill: bool = False,
) -> ClusterState:
    """Stop kube-apiserver, keep it down `down_seconds`, start it again with the same arguments.

    What a control-plane upgrade or a crashed apiserver does to its clients: connections
    refused, then watches to resume. The controller manager goes down and comes back with it
    (it exits when the apiserver stays away). With `kill`, both get SIGKILL at once (a crash:
    no request is finished). Returns once /readyz answers again.
    """
    state = load_state(state_dir)
    if state is None:
        raise RuntimeError(f"no dev cluster in {state_dir}")
    restarted = [name for name in CONTROL_PLANE if name in state.pids]
    argv = {name: _cmdline(state.pids[name]) for name in restarted}
    for name in reversed(restarted):
        pid = state.pids.pop(name)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _stop(pid, grace=10.0)
    time.sleep(down_seconds)
    for name in restarted:  # the apiserver first, ready before the controller manager
        state.pids[name] = _spawn(name, argv[name], state_dir)
        _record_and_wait(state, state_dir, timeout)
    return state


def _cmdline(pid: int) -> list[str]:
    """The arguments a running process was started with."""
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def down(state_dir: Path = DEFAULT_STATE_DIR, grace: float = 10.0) -> list[str]:
    """Stop every process `up` started (by PID), remove etcd's data; return what was stopped."""
    state = load_state(state_dir)
    if state is None:
        return []
    stopped = []
    # Reverse start order: the controller manager first, etcd last.
    for name, pid in reversed(list(state.pids.items())):
        if _stop(pid, grace):
            stopped.append(f"{name} (pid {pid})")
    shutil.rmtree(state.etcd_data, ignore_errors=True)
    _state_file(state_dir).unlink(missing_ok=True)
    return stopped


def status(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, object]:
    """What runs: each process with its PID and whether it is alive."""
    state = load_state(state_dir)
    if state is None:
        return {"running": False, "state_dir": str(state_dir)}
    processes = {name: {"pid": pid, "alive": alive(pid)} for name, pid in state.pids.items()}
    return {
        "running": all(p["alive"] for p in processes.values()),
        "state_dir": str(state_dir),
        "server": state.server,
        "kubeconfig": str(state.kubeconfig),
        "processes": processes,
    }
