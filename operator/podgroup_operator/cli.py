"""The `podgroup-operator` command line: run, crd, dev-cluster, sim-nodes, bench.

Sub-commands import their modules lazily, so `dev-cluster status` does not pay for Kopf and
`run` does not pay for the benchmark code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _dev_cluster(args: argparse.Namespace) -> int:
    from podgroup_operator.devcluster import cluster

    state_dir = Path(args.state_dir)
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

    text = render_crd()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
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
        scheduler_names=args.scheduler_name,
    )


def _scheduler_name(value: str) -> str:
    """A `--scheduler-name` as the API accepts `spec.schedulerName`: a DNS-1123 subdomain."""
    if not DNS_SUBDOMAIN.fullmatch(value) or len(value) > 253:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a valid spec.schedulerName: use lowercase letters, digits, '-' "
            "and '.', starting and ending with a letter or digit (e.g. scheduler-plugins-scheduler)"
        )
    return value


def _sim_nodes(args: argparse.Namespace) -> int:
    from podgroup_operator.devcluster.simnodes import main as sim_main

    return sim_main(args)


def _bench(args: argparse.Namespace, rest: list[str]) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="podgroup-operator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator on the current KUBECONFIG")
    run.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
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
    run.add_argument("--webhook-port", type=int, default=None)
    run.add_argument("--liveness", default="http://0.0.0.0:8080/healthz")
    run.add_argument(
        "--metrics-address",
        default="0.0.0.0:8081",
        help="host:port of /metrics, /readyz and /livez; '' to serve none",
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
        help="namespace of the Lease (default: $POD_NAMESPACE, else kube-system)",
    )
    run.set_defaults(func=_run)

    crd = sub.add_parser("crd", help="print or write the generated PodGroup CRD")
    crd.add_argument("--output", "-o", default="-")
    crd.set_defaults(func=_crd)

    from podgroup_operator.devcluster.cluster import DEFAULT_STATE_DIR

    dev = sub.add_parser("dev-cluster", help="the local control plane on loopback")
    dev.add_argument("action", choices=["build", "up", "down", "status", "env"])
    dev.add_argument(
        "--with-scheduler",
        action="store_true",
        help="build: also kube-scheduler, for `bench scale --versus kube-scheduler`",
    )
    dev.add_argument(
        "--state-dir", default=os.environ.get("PODGROUP_DEV_STATE", str(DEFAULT_STATE_DIR))
    )
    dev.set_defaults(func=_dev_cluster)

    sim = sub.add_parser("sim-nodes", help="register simulated nodes and act as their kubelet")
    sim.add_argument("--count", type=int, default=3, help="nodes in this pool")
    sim.add_argument("--cpu", default="8")
    sim.add_argument("--memory", default="32Gi")
    sim.add_argument("--pods", type=int, default=110)
    sim.add_argument("--gpu", type=int, default=0, help="nvidia.com/gpu per node")
    sim.add_argument(
        "--extended",
        action="append",
        default=[],
        metavar="NAME=QTY",
        help="any other extended resource, e.g. example.com/fpga=2 (repeatable)",
    )
    sim.add_argument("--label", action="append", default=[], metavar="K=V")
    sim.add_argument("--taint", action="append", default=[], metavar="K=V:EFFECT")
    sim.add_argument("--name-prefix", default="sim-node")
    sim.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="SPEC",
        help="an extra pool, e.g. "
        "'count=2,cpu=16,memory=64Gi,gpu=8,prefix=gpu,label=k=v,taint=k=v:NoSchedule'",
    )
    sim.add_argument("--start-delay", type=float, default=0.5, help="seconds before Running")
    sim.add_argument("--lease-interval", type=float, default=5.0)
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
