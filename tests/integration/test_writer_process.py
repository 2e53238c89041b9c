"""The writer process against the real API server: a child that stops answering is replaced.

`tests/integration/test_own_cluster.py` runs the whole operator with a writer and kills it with
-9; here the transport runs in the test's own process, so a stopped (hung, not dead) child can
be given a short answer bound (`WriterTransport.answer_seconds`).
"""

from __future__ import annotations

import os
import signal

import pytest

from podgroup_operator.adapters.kube import NAMESPACES, KubeClient
from podgroup_operator.adapters.writer import WriterError, WriterTransport
from tests.conftest import ClusterUnderTest

STARTING = 60.0
"""The answer bound while a child starts (its imports take a second or more under load)."""


async def test_a_stopped_writer_is_killed_and_the_next_write_goes_through_a_new_one(
    cluster: ClusterUnderTest, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped with SIGSTOP under a running operator, the child held every bind for ever and
    nothing was bound again (adapters/writer.py, ANSWER_SECONDS)."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))  # the child's own client
    transport = WriterTransport(connections=4, answer_seconds=STARTING)
    kube = KubeClient(transport)
    try:
        assert (await kube.get(NAMESPACES, namespace))["metadata"]["name"] == namespace
        stopped = transport.pid
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)
        transport.answer_seconds = 3.0
        with pytest.raises(WriterError, match="no answer from the writer process in 3s"):
            await kube.get(NAMESPACES, namespace)
        transport.answer_seconds = STARTING
        assert (await kube.get(NAMESPACES, namespace))["metadata"]["name"] == namespace
        assert transport.starts == 2 and transport.pid not in (None, stopped)
    finally:
        await transport.close()
