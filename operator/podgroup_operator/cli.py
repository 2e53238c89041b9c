"""`podgroup-operator`: run, crd, manifests, docs, webhooks, dev-cluster, sim-nodes, bench.

Sub-commands import their modules lazily, so `dev-cluster status` does not pay for Kopf and
`run` does not pay for the benchmark code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator import tuning
from podgroup_operator.api.names import is_dns_label, is_dns_subdomain

DOCS_REFERENCE_DIR = "docs/reference"
"""Where `docs reference` writes the pages by default (relative to the repository's root)."""
DEV_STATE_ENV = "PODGROUP_DEV_STATE"
"""The environment variable naming `dev-cluster`'s state directory when --state-dir is not given."""


def _dev_cluster(args: argparse.Namespace) -> int:
    from podgroup_operator.devcluster import cluster

    state_dir = Path(args.state_dir or os.environ.get(DEV_STATE_ENV) or cluster.DEFAULT_STATE_DIR)
    if args.action == "build":
        binaries = cluster.ensure_binaries(with_scheduler=args.with_scheduler)
        print(f"control plane binaries in {binaries}")
    elif args.action == "up":
        state = cluster.up(state_dir)
        print(f"dev cluster ready at {state.server} (state in {state.state_dir})", file=sys.stderr)
        print(f"export KUBECONFIG={state.kubeconfig}")
    elif args.action == "down":
        stopped = cluster.down(state_dir)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    elif args.action == "status":
        report = cluster.status(state_dir)
        print(json.dumps(report, indent=2))
        return 0 if report["running"] else 1
    elif args.action == "env":
        found = cluster.load_state(state_dir)
        if found is None:
            print("no dev cluster in " + str(state_dir), file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={found.kubeconfig}")
    return 0


def _crd(args: argparse.Namespace) -> int:
    from podgroup_operator.api.crd import render_crd

    _write_output(render_crd(args.kind), args.output)
    return 0


def _write_output(text: str, output: str) -> None:
    if output == "-":
        sys.stdout.write(text)
    else:
        Path(output).write_text(text)
        print(f"wrote {output}", file=sys.stderr)


def _manifests(args: argparse.Namespace) -> int:
    from podgroup_operator.manifests import render_cluster_webhooks

    _write_output(render_cluster_webhooks(), args.output)
    return 0


def _docs(args: argparse.Namespace) -> int:
    from podgroup_operator.reference import write_pages

    for path in write_pages(Path(args.output), build_parser()):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _webhooks(args: argparse.Namespace) -> int:
    """Install or remove the dev cluster's webhook configurations; one line per object."""
    import asyncio

    from podgroup_operator.adapters.kube import ApiError, KubeClient, KubeconfigError
    from podgroup_operator.manifests import install_local, uninstall_local

    ca_pem = b""
    if args.action == "install":
        if args.url is None:
            print("error: webhooks install needs --url https://HOST:PORT", file=sys.stderr)
            return 1
        if args.ca_file is not None:
            ca_path = Path(args.ca_file)
        elif args.cert_dir is not None:
            from podgroup_operator.tls import ensure_ca

            ca_path = ensure_ca(Path(args.cert_dir))
        else:
            print(
                "error: webhooks install needs --ca-file PATH or --cert-dir DIR "
                "(the CA the apiserver must trust for --url)",
                file=sys.stderr,
            )
            return 1
        try:
            ca_pem = ca_path.read_bytes()
        except OSError as exc:
            print(f"error: --ca-file: cannot read {ca_path}: {exc.strerror}", file=sys.stderr)
            return 1
        if b"-----BEGIN CERTIFICATE-----" not in ca_pem:
            print(f"error: --ca-file: {ca_path} holds no PEM certificate", file=sys.stderr)
            return 1

    async def act() -> list[str]:
        async with KubeClient.from_kubeconfig(args.kubeconfig, context=args.context) as kube:
            if args.action == "install":
                done = await install_local(kube, args.url, ca_pem)
                return [f"{written} (-> {args.url})" for written in done]
            return [str(written) for written in await uninstall_local(kube)]

    try:
        lines = asyncio.run(act())
    except KubeconfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(f"Error from server ({exc.reason or exc.status}): {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:  # aiohttp's connection errors are OSErrors
        print(f"error: cannot reach the API server: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _run(args: argparse.Namespace) -> int:
    from podgroup_operator.main import run

    return run(
        namespaces=args.namespace,
        webhook_mode=args.webhooks,
        webhook_host=args.webhook_host,
        webhook_port=args.webhook_port,
        liveness=args.liveness,
        leader_election=args.leader_elect,
        lease_namespace=args.leader_elect_namespace,
        metrics_address=args.metrics_address,
        webhook_certs=args.webhook_certs,
        cluster_cert_dir=args.cluster_cert_dir,
        log_level=args.log_level,
        log_format=args.log_format,
        scheduler_names=args.scheduler_name,
        write_process=args.write_process,
        bind_concurrency=args.bind_concurrency,
        gang_group_trust=args.gang_group_trust,
        nonstrict_hold_seconds=args.nonstrict_hold_seconds,
        provisioning_class=args.provisioning_class,
        dialect_crds=args.dialect_crds,
        reservation_timeout_seconds=args.reservation_timeout,
    )


def _bind_concurrency(value: str) -> int | None:
    """A `--bind-concurrency`: `auto` (None: paced by latency), or a whole number from 1 to
    tuning.MAX_BIND_CONCURRENCY."""
    if value == tuning.BIND_CONCURRENCY_AUTO:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= tuning.MAX_BIND_CONCURRENCY:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a bind concurrency: use {tuning.BIND_CONCURRENCY_AUTO} (the "
            f"default) or a whole number from 1 to {tuning.MAX_BIND_CONCURRENCY} "
            f"(e.g. {tuning.BIND_CONCURRENCY})"
        )
    return number


def _provisioning_class(value: str) -> str | None:
    """A `--provisioning-class`: a class name (cluster-autoscaler's two, or one another
    provisioner serves), or `none` (off)."""
    value = value.strip()
    if value == c.PROVISIONING_OFF:
        return None
    if not value or len(value) > 253 or any(ch.isspace() for ch in value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a provisioning class: use a name of at most 253 characters "
            f"without spaces, e.g. {c.ProvisioningClass.BEST_EFFORT_ATOMIC}, or "
            f"{c.PROVISIONING_OFF}"
        )
    return value


def _reservation_timeout(value: str) -> float:
    """A `--reservation-timeout`: a number of seconds from 1 to
    `tuning.MAX_RESERVATION_TIMEOUT_SECONDS`."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 1 <= number <= tuning.MAX_RESERVATION_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a reservation timeout: use a number of seconds from 1 to "
            f"{tuning.MAX_RESERVATION_TIMEOUT_SECONDS} "
            f"(default {tuning.RESERVATION_TIMEOUT_SECONDS})"
        )
    return number


def _hold_seconds(value: str) -> float:
    """A `--nonstrict-hold-seconds`: a number of seconds from 1 to
    `tuning.MAX_NONSTRICT_HOLD_SECONDS`."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 1 <= number <= tuning.MAX_NONSTRICT_HOLD_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a NonStrict hold: use a number of seconds from 1 to "
            f"{tuning.MAX_NONSTRICT_HOLD_SECONDS} (default {tuning.NONSTRICT_HOLD_SECONDS})"
        )
    return number


def _api_name(is_valid: Callable[[str], bool], what: str, rule: str) -> Callable[[str], str]:
    """An argparse type for a name the API will check: refused here with the rule, at once."""

    def checked(value: str) -> str:
        if not is_valid(value):
            raise argparse.ArgumentTypeError(f"{value!r} is not {what}: use {rule}")
        return value

    return checked


_scheduler_name = _api_name(
    is_dns_subdomain,  # how the API checks spec.schedulerName
    "a valid spec.schedulerName",
    "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (e.g. "
    "scheduler-plugins-scheduler)",
)
_namespace = _api_name(
    is_dns_label,
    "a namespace name",
    "at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit "
    "(e.g. team-a)",
)


def _namespace_set(value: str) -> str:
    """A `--gang-group-trust`: two or more namespace names, comma-separated."""
    names = [name.strip() for name in value.split(",")]
    for name in names:
        _namespace(name)
    if len(set(names)) < 2:
        raise argparse.ArgumentTypeError(
            f"{value!r} names fewer than two namespaces: list the namespaces that trust one "
            "another, comma-separated (e.g. team-a,team-a-eval)"
        )
    return ",".join(names)


def _sim_nodes(args: argparse.Namespace) -> int:
    from podgroup_operator.devcluster.simnodes import main as sim_main

    return sim_main(args)


def _interrupt_on_sigterm() -> None:
    """Make SIGTERM stop the command as Ctrl-C does.

    The benches start whole dev clusters, sim nodes and schedulers, and stop them in `finally`
    blocks, which Ctrl-C runs (inside `asyncio.run` it cancels the main task; outside it raises
    KeyboardInterrupt); SIGTERM's default action would end the process at once and leave them
    all running, as `timeout` or a CI job's cancel stops it. SIGTERM calls whichever SIGINT
    handler is current (asyncio's or Python's default), so it stops exactly as Ctrl-C would.

    When SIGINT is ignored, as a shell without job control ignores it for the commands it runs
    in the background (`bench scale ... &` in a script, or a job runner that does so), there is
    no handler to call: SIGTERM then raises KeyboardInterrupt itself (raising SIGINT would be
    ignored too).
    """
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def _dump_stacks(signum: int, frame: object) -> None:
    """Every thread's stack, then every asyncio task's, on stderr (SIGUSR1 in the benches).

    A test that gives up on a bench sends SIGUSR1 before it kills it: the tasks' stacks say which
    await never returned, which the main thread's stack (the event loop's select) cannot."""
    import asyncio  # here: the CLI's other commands start without it
    import faulthandler

    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # between event loops: the threads' stacks say it all
    for task in asyncio.all_tasks(loop):
        print(f"--- task {task.get_name()}, awaiting (outermost first):", file=sys.stderr)
        for awaiting in _await_chain(task.get_coro()):
            code = awaiting.f_code
            print(f"  {code.co_filename}:{awaiting.f_lineno} in {code.co_name}", file=sys.stderr)
    sys.stderr.flush()


def _await_chain(awaitable: object) -> list[Any]:
    """The frames of a coroutine and of whatever it awaits, down to the innermost (a task's own
    stack shows only its outermost coroutine)."""
    frames = []
    for _ in range(64):
        frame = _first_attribute(awaitable, ("cr_frame", "ag_frame", "gi_frame"))
        if frame is None:
            break
        frames.append(frame)
        awaitable = _first_attribute(awaitable, ("cr_await", "ag_await", "gi_yieldfrom"))
    return frames


def _first_attribute(obj: object, names: tuple[str, ...]) -> Any:
    return next((value for name in names if (value := getattr(obj, name, None))), None)


def _bench(args: argparse.Namespace, rest: list[str]) -> int:
    _interrupt_on_sigterm()
    signal.signal(signal.SIGUSR1, _dump_stacks)
    if args.kind == "webhook":
        from podgroup_operator.bench.webhook import main as webhook_main

        return webhook_main(rest)
    if args.kind == "e2e":
        from podgroup_operator.bench.e2e import main as e2e_main

        return e2e_main(rest)
    if args.kind == "scale":
        from podgroup_operator.bench.scale import main as scale_main

        return scale_main(rest)
    from podgroup_operator.bench.core import main as core_main

    return core_main(rest)


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915
    from podgroup_operator import __version__
    from podgroup_operator.logs import LEVELS, LogFormat

    parser = argparse.ArgumentParser(prog="podgroup-operator", description=__doc__)
    parser.add_argument("--version", action="version", version=f"podgroup-operator {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator on the current KUBECONFIG")
    run.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        type=_namespace,
        help="watch only this namespace (repeatable); default: all namespaces",
    )
    run.add_argument(
        "--webhooks",
        choices=["auto", "local", "cluster", "off"],
        default="auto",
        help="auto: serve on 127.0.0.1 for the dev cluster, in-cluster otherwise",
    )
    run.add_argument("--webhook-host", default=None, help="host name the apiserver calls")
    run.add_argument(
        "--scheduler-name",
        action="append",
        default=None,
        type=_scheduler_name,
        metavar="NAME",
        help="place pods whose spec.schedulerName is NAME (repeatable, e.g. "
        "scheduler-plugins-scheduler or volcano to replace those); default: podgroup-scheduler. "
        "The routing webhook gives the first to member pods that name the default scheduler",
    )
    run.add_argument(
        "--webhook-port", type=int, default=None, help="port the webhooks are served on"
    )
    run.add_argument(
        "--webhook-certs",
        choices=["mounted", "self-managed"],
        default="mounted",
        help="--webhooks cluster: serve the mounted Secret's certificate, or keep the Secret "
        "(make, rotate, set caBundle) yourself (deploy/overlays/self-managed)",
    )
    run.add_argument(
        "--cluster-cert-dir",
        default=None,
        help="--webhooks cluster: directory of tls.crt, tls.key, ca.crt "
        "(default: /etc/podgroup-operator/tls)",
    )
    run.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="URL of Kopf's liveness endpoint",
    )
    run.add_argument(
        "--metrics-address",
        default="0.0.0.0:8081",
        help="host:port of /metrics, /readyz and /livez; '' to serve none",
    )
    run.add_argument("--log-level", choices=LEVELS, default="info", help="the least level logged")
    run.add_argument(
        "--log-format",
        choices=[f.value for f in LogFormat],
        default=LogFormat.TEXT.value,
        help="text: one line per record; json: one JSON object per line",
    )
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="lead only while holding the Lease, so several replicas can run (default: on)",
    )
    run.add_argument(
        "--leader-elect-namespace",
        default=None,
        type=_namespace,
        help="namespace of the Lease (default: $POD_NAMESPACE, else kube-system)",
    )
    run.add_argument(
        "--write-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send the leader's binds and pod Events from a child process, "
        "the operator's second CPU (default: on; --no-write-process keeps them in one process)",
    )
    run.add_argument(
        "--bind-concurrency",
        type=_bind_concurrency,
        default=None,
        metavar="auto|N",
        help=f"binds in flight at once: {tuning.BIND_CONCURRENCY_AUTO} (the default) moves the "
        f"number between {tuning.BIND_CONCURRENCY} and {tuning.BIND_CONCURRENCY_CEILING}, holding "
        f"the median bind of the last two seconds near "
        f"{tuning.BIND_LATENCY_TARGET_SECONDS * 1000:.0f} ms; N (1 to "
        f"{tuning.MAX_BIND_CONCURRENCY}) fixes it. More bind faster and delay status writes on a "
        "busy control plane; above about 64 the operator's own thread limits the rate unless "
        "--write-process is on",
    )
    run.add_argument(
        "--gang-group-trust",
        action="append",
        default=[],
        type=_namespace_set,
        metavar="NS,NS[,NS...]",
        help="namespaces whose PodGroups may name one another in spec.gangGroup without being "
        "listed back (repeatable, one set each); by default a gangGroup entry of another "
        "namespace counts only when that PodGroup lists this one back",
    )
    run.add_argument(
        "--nonstrict-hold-seconds",
        type=_hold_seconds,
        default=tuning.NONSTRICT_HOLD_SECONDS,
        metavar="SECONDS",
        help="the longest a NonStrict gang holds room for members it cannot bind yet; then the "
        "room is released for the other gangs waiting, and the gang holds again once they "
        "have been decided",
    )
    run.add_argument(
        "--provisioning-class",
        type=_provisioning_class,
        default=None,
        metavar="CLASS",
        help="have cluster-autoscaler add the nodes a gang refused for room still lacks, with "
        f"one ProvisioningRequest of this class per gang (e.g. "
        f"{c.ProvisioningClass.BEST_EFFORT_ATOMIC}); a PodGroup's annotation "
        f"{c.ANNOTATION_PROVISIONING_CLASS} overrides it ({c.PROVISIONING_OFF}: off). Default: "
        "off, unless a PodGroup's annotation names a class",
    )
    run.add_argument(
        "--dialect-crds",
        choices=[mode.value for mode in c.DialectCRDs],
        default=c.DialectCRDs.OFF.value,
        help="install: at start, install a compatible CRD for each other scheduler's kind "
        "that no CRD serves yet (Volcano's PodGroup, scheduling.volcano.sh; Koordinator's "
        "PodGroup and ElasticQuota, scheduling.sigs.k8s.io), never replacing one the operator "
        "did not install (ours from an earlier release is brought up to date); off (default): "
        "read only the kinds already served",
    )
    run.add_argument(
        "--reservation-timeout",
        type=_reservation_timeout,
        default=tuning.RESERVATION_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="the longest the head gang's reservation holds nodes while its start is unknown "
        "(a gang running there declares no maxRunSeconds); then the nodes are released and "
        "the gang waits as any other until it can reserve with a known start",
    )
    run.set_defaults(func=_run)

    crd = sub.add_parser(
        "crd", help="print or write a generated CRD (PodGroup, Topology or ElasticQuota)"
    )
    crd.add_argument(
        "--kind",
        choices=[
            c.PLURAL,
            c.TOPOLOGY_PLURAL,
            c.ELASTIC_QUOTA_PLURAL,
        ],
        default=c.PLURAL,
        help="which CRD (default podgroups); crds/ holds each as <kind>.scheduling.x-k8s.io.yaml "
        "(other schedulers' kinds, installed by `run --dialect-crds install`, are in "
        "crds/dialects/)",
    )
    crd.add_argument("--output", "-o", default="-", help="a file to write; - for stdout")
    crd.set_defaults(func=_crd)

    manifests = sub.add_parser(
        "manifests", help="print or write generated install manifests (deploy/base/webhooks.yaml)"
    )
    manifests.add_argument("what", choices=["webhooks"])
    manifests.add_argument("--output", "-o", default="-", help="a file to write; - for stdout")
    manifests.set_defaults(func=_manifests)

    docs = sub.add_parser(
        "docs", help="write the reference pages generated from the code (docs/reference/)"
    )
    docs.add_argument("what", choices=["reference"])
    docs.add_argument(
        "--output",
        "-o",
        default=DOCS_REFERENCE_DIR,
        metavar="DIR",
        help=f"the directory the pages are written into (default {DOCS_REFERENCE_DIR})",
    )
    docs.set_defaults(func=_docs)

    webhooks = sub.add_parser(
        "webhooks",
        help="install or uninstall the webhook configurations for an operator run outside the "
        "cluster (the dev cluster: the apiserver calls a URL on 127.0.0.1)",
    )
    webhooks.add_argument("action", choices=["install", "uninstall"])
    webhooks.add_argument("--url", help="where the operator serves, e.g. https://127.0.0.1:9443")
    ca = webhooks.add_mutually_exclusive_group()
    ca.add_argument("--ca-file", help="PEM CA that signed the operator's serving certificate")
    ca.add_argument(
        "--cert-dir",
        help="the operator's local certificate directory; its ca.crt is used (made if absent)",
    )
    webhooks.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG")
    webhooks.add_argument("--context", default=None, help="default: the current context")
    webhooks.set_defaults(func=_webhooks)

    dev = sub.add_parser("dev-cluster", help="the local control plane on loopback")
    dev.add_argument("action", choices=["build", "up", "down", "status", "env"])
    dev.add_argument(
        "--with-scheduler",
        action="store_true",
        help="build: also kube-scheduler, for `bench scale --versus kube-scheduler` and the tests",
    )
    dev.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help=f"where the cluster keeps its state (default: ${DEV_STATE_ENV}, else dev-cluster/ "
        "in $PODGROUP_OPERATOR_CACHE, else in ~/.cache/podgroup-operator)",
    )
    dev.set_defaults(func=_dev_cluster)

    sim = sub.add_parser("sim-nodes", help="register simulated nodes and act as their kubelet")
    sim.add_argument(
        "--count", type=int, default=None, help="nodes in this pool (default 3, or --topology's)"
    )
    sim.add_argument(
        "--topology",
        metavar="SPEC",
        help="make the pool a labelled fabric, coarse to fine, e.g. zone=4,block=8,rack=8,host=2: "
        "4 zones x 8 blocks x 8 racks x 2 nodes (512 nodes). A level without '/' is labelled "
        "example.com/<level>; the last may be host (nodes per finest domain, no label of its own "
        "beyond kubernetes.io/hostname). Values name the whole path (z0, z0-b3, z0-b3-r5), so "
        "one value is one domain",
    )
    sim.add_argument("--cpu", default="8", help="cpu of each node (a quantity)")
    sim.add_argument("--memory", default="32Gi", help="memory of each node (a quantity)")
    sim.add_argument("--pods", type=int, default=110, help="pods each node takes")
    sim.add_argument("--gpu", type=int, default=0, help="nvidia.com/gpu per node")
    sim.add_argument(
        "--extended",
        action="append",
        default=[],
        metavar="NAME=QTY",
        help="any other extended resource, e.g. example.com/fpga=2 (repeatable)",
    )
    sim.add_argument(
        "--label", action="append", default=[], metavar="K=V", help="a node label (repeatable)"
    )
    sim.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="an image the nodes list as pulled, e.g. trainer:v1=2Gi (repeatable)",
    )
    sim.add_argument(
        "--taint", action="append", default=[], metavar="K=V:EFFECT", help="a taint (repeatable)"
    )
    sim.add_argument(
        "--name-prefix", default="sim-node", help="nodes are named <prefix>-0, <prefix>-1, ..."
    )
    sim.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="SPEC",
        help="an extra pool, e.g. "
        "'count=2,cpu=16,memory=64Gi,gpu=8,prefix=gpu,label=k=v,taint=k=v:NoSchedule,"
        "image=trainer:v1=2Gi'",
    )
    sim.add_argument(
        "--provisioner",
        action="store_true",
        help="also play cluster-autoscaler: answer ProvisioningRequests of its two classes by "
        "adding nodes (docs/concepts/autoscaling.md)",
    )
    sim.add_argument(
        "--provision-template",
        metavar="SPEC",
        default=None,
        help="the nodes --provisioner adds, as a --pool spec (count is not read); default: the "
        "main pool's shape and labels, named <name-prefix>-scaled-N-I",
    )
    sim.add_argument(
        "--provision-max", type=int, default=10, help="nodes --provisioner may add in all"
    )
    sim.add_argument(
        "--provision-delay",
        type=float,
        default=2.0,
        help="seconds from a request's Accepted to its nodes",
    )
    sim.add_argument(
        "--booking-seconds",
        type=float,
        default=600.0,
        help="seconds after Provisioned at which a request still there gets BookingExpired",
    )
    sim.add_argument("--start-delay", type=float, default=0.5, help="seconds before Running")
    sim.add_argument(
        "--lease-interval", type=float, default=5.0, help="seconds between node Lease renewals"
    )
    sim.set_defaults(func=_sim_nodes)

    bench = sub.add_parser("bench", help="benchmarks (print JSON)", add_help=False)
    bench.add_argument("kind", choices=["core", "e2e", "scale", "webhook"])
    bench.set_defaults(func=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["bench"]:
        args, rest = parser.parse_known_args(argv)
        return _bench(args, rest)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


def kubectl_plugin(argv: list[str] | None = None) -> int:
    """`kubectl podgroup`: a readable view of PodGroups and why they wait."""
    from podgroup_operator.kubectl_plugin import main as plugin_main

    return plugin_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
