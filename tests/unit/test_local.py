"""`free_port`: a loopback port that stays free until it is listened on."""

from __future__ import annotations

import socket

import pytest

from podgroup_operator import local


def test_a_free_port_is_below_the_range_of_outgoing_connections_and_can_be_bound() -> None:
    floor = local._ephemeral_floor()
    ports = {local.free_port() for _ in range(20)}
    assert all(local.PORT_FLOOR <= port < floor for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    held_port, other = local.free_port(), local.free_port()
    assert held_port != other
    offered = iter([held_port, held_port, other])
    monkeypatch.setattr(local.random, "randrange", lambda low, high: next(offered))
    with socket.socket() as held:
        held.bind(("127.0.0.1", held_port))
        held.listen()
        assert local.free_port() == other


def test_without_room_below_the_range_the_os_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "_ephemeral_floor", lambda: local.PORT_FLOOR + 10)
    port = local.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
