"""`bench core --scenario burst`: a burst of gangs that fills the cluster exactly in waves.

32 nodes of 8 GPUs; 53 gangs of 1 to 32 pods, each pod taking a whole node (8 GPUs), each
running `RUN_SECONDS` and declaring it as its maxRunSeconds. The 32-pod gang is created first
but its members come over its first seconds (as a Job controller creates them), so smaller gangs
created just after it are candidates before it is; the others, in an order whose gangs fill the
32 nodes exactly in 8 more waves. Ideal: 9 waves. The replay runs on the pure core with a
simulated clock (bench/replay.py), once with reservations and once without, and prints the
mean GPU occupancy and the makespan against the ideal.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator.bench.replay import Job, occupancy, replay
from podgroup_operator.scheduling.resources import GPU

NODES = 32
GPUS_PER_NODE = 8
RUN_SECONDS = 60
WAVES = ([16, 8, 4, 2, 1, 1], [8, 8, 8, 4, 2, 1, 1])
"""Two ways of filling 32 nodes; waves 2 to 9 alternate them (4 x 6 + 4 x 7 = 52 gangs)."""
ARRIVAL_SECONDS = 0.1
"""Between two gangs' creations."""
BIG_GANG_WHOLE_SECONDS = 2.0
"""When the last member of the 32-pod gang exists."""


def burst_nodes() -> list[dict[str, Any]]:
    return [
        {
            "kind": "Node",
            "metadata": {
                "name": f"gpu-{i:02d}",
                "labels": {"kubernetes.io/hostname": f"gpu-{i:02d}"},
            },
            "spec": {},
            "status": {
                "allocatable": {
                    "cpu": "64",
                    "memory": "512Gi",
                    "pods": "110",
                    GPU: str(GPUS_PER_NODE),
                },
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(NODES)
    ]


def burst_jobs(run_seconds: int = RUN_SECONDS) -> list[Job]:
    requests = {"cpu": "8", "memory": "64Gi", GPU: str(GPUS_PER_NODE)}
    sizes = [s for wave in range(8) for s in WAVES[wave % 2]]
    jobs = [
        Job(
            "gang-00-size-32",
            NODES,
            requests,
            run_seconds,
            created=0.0,
            ready=BIG_GANG_WHOLE_SECONDS,
            limit_seconds=run_seconds,
        )
    ]
    for index, size in enumerate(sizes, start=1):
        jobs.append(
            Job(
                f"gang-{index:02d}-size-{size}",
                size,
                requests,
                run_seconds,
                created=index * ARRIVAL_SECONDS,
                limit_seconds=run_seconds,
            )
        )
    return jobs


def run_burst() -> dict[str, Any]:
    """Replay the burst with and without reservations; the measurements as a dict."""
    nodes, jobs = burst_nodes(), burst_jobs()
    work = sum(job.size * job.run_seconds for job in jobs)
    ideal = work / NODES
    out: dict[str, Any] = {
        "scenario": "burst",
        "nodes": NODES,
        "gangs": len(jobs),
        "ideal_makespan_s": ideal,
    }
    for label, reserve in (("reservation", True), ("no_reservation", False)):
        result = replay(nodes, jobs, reserve=reserve)
        makespan = result.makespan(jobs)
        big = jobs[0].name
        out[label] = {
            "makespan_s": round(makespan, 1),
            "ideal_over_makespan": round(ideal / makespan, 4) if makespan else 0.0,
            "mean_gpu_occupancy": round(occupancy(nodes, jobs, result, GPU), 4),
            "big_gang_start_s": result.starts.get(big),
            "big_gang_started_after": sum(
                1 for job in jobs[1:] if result.starts.get(job.name, 0) < result.starts.get(big, 0)
            ),
            "backfills": result.backfills,
            "cycles": result.cycles,
            "unplaced": result.unplaced,
        }
    return out
