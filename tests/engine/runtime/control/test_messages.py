"""The messages between the web application and a run's driver: commands on the wire and
their acknowledgements, one definition for both sides (no Spark)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime.control.messages import Ack, Command, CommandRequest, RowSample
from engine.runtime.control.outbox import RunDeliveries
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.errors import CommandRejected

AT = 1_700_000_000_123.5

REQUESTS = {
    "rescale": CommandRequest(kind="rescale", operator="counts", request_id="r1",
                              requested_at_ms=AT, parallelism=4),
    "rebalance_weighted": CommandRequest(kind="rebalance", operator="counts", request_id="r2",
                                         requested_at_ms=AT, assignment="weighted"),
    "rebalance_owners": CommandRequest(kind="rebalance", operator="counts", request_id="r3",
                                       requested_at_ms=AT, assignment=(0, 0, 1, 2)),
    "logic": CommandRequest(kind="logic", operator="views", request_id="r4", requested_at_ms=AT,
                            params={"condition": "amount > 3", "nested": {"a": [1, 2]}}),
    "sample": CommandRequest(kind="sample", operator="views", request_id="s1",
                             requested_at_ms=AT),
    "stop": CommandRequest(kind="stop", operator=None, request_id="stop-7", requested_at_ms=AT),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_kind_survives_the_wire(name: str) -> None:
    request = REQUESTS[name]
    message = request.to_message()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in message.items())
    assert CommandRequest.from_message(message) == request
    assert CommandRequest.from_message(message).params == request.params


def test_the_wire_keeps_the_field_names_drivers_and_web_apps_agree_on() -> None:
    assert REQUESTS["rescale"].to_message() == {
        "request_id": "r1", "kind": "rescale", "operator": "counts",
        "requested_at": "1700000000123.500", "parallelism": "4"}
    assert REQUESTS["rebalance_owners"].to_message()["assignment"] == "[0, 0, 1, 2]"
    assert REQUESTS["rebalance_weighted"].to_message()["assignment"] == "weighted"
    assert json.loads(REQUESTS["logic"].to_message()["params"]) == REQUESTS["logic"].params
    assert "operator" not in REQUESTS["stop"].to_message()


_operators = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=12)
_times = st.floats(min_value=0, max_value=4e12).map(lambda t: round(t, 3))
_requests = st.one_of(
    st.builds(CommandRequest, kind=st.just("rescale"), operator=_operators,
              request_id=_operators, requested_at_ms=_times,
              parallelism=st.integers(-5, 10_000)),
    st.builds(CommandRequest, kind=st.just("rebalance"), operator=_operators,
              request_id=_operators, requested_at_ms=_times,
              assignment=st.one_of(st.just("weighted"),
                                   st.lists(st.integers(0, 64), max_size=40).map(tuple))),
    st.builds(CommandRequest, kind=st.just("logic"), operator=_operators,
              request_id=_operators, requested_at_ms=_times,
              params=st.dictionaries(_operators, st.one_of(st.integers(), _operators),
                                     max_size=4)),
    st.builds(CommandRequest, kind=st.just("stop"), operator=st.none(), request_id=_operators,
              requested_at_ms=_times),
)


@settings(deadline=None)
@given(_requests)
def test_any_request_survives_the_wire(request: CommandRequest) -> None:
    assert CommandRequest.from_message(request.to_message()) == request


def test_a_driver_picks_a_message_up_as_a_command_with_its_cursor_and_time() -> None:
    message = REQUESTS["rescale"].to_message()
    command = Command.picked_up(message, "5-0", AT + 12.25)
    assert isinstance(command, CommandRequest) and command.cursor == "5-0"
    assert command.parallelism == 4 and command.control_latency_ms == 12.25
    encoded = {k.encode(): v.encode() for k, v in message.items()}
    assert Command.picked_up(encoded, "5-0", AT + 12.25) == command


def test_a_message_without_id_or_time_is_named_by_its_cursor_and_taken_as_sent_now() -> None:
    command = Command.picked_up({"kind": "stop"}, "9-1", 42.0)
    assert command.request_id == "anonymous-9-1" and command.requested_at_ms == 42.0
    assert command.control_latency_ms == 0.0


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"kind": "explode", "operator": "counts"}, "kind"),
        ({"operator": "counts"}, "kind"),
        ({"kind": "rescale", "parallelism": "2"}, "operator"),
        ({"kind": "rescale", "operator": "counts"}, "parallelism"),
        ({"kind": "rescale", "operator": "counts", "parallelism": "lots"}, "parallelism"),
        ({"kind": "rescale", "operator": "counts", "parallelism": "2", "requested_at": "noon"},
         "requested_at"),
        ({"kind": "logic", "operator": "views", "params": "{not json"}, "params"),
        ({"kind": "logic", "operator": "views", "params": "[1, 2]"}, "params"),
        ({"kind": "logic", "operator": "views"}, "params"),
        ({"kind": "rebalance", "operator": "counts", "assignment": '[1, "x"]'}, "assignment"),
        ({"kind": "rebalance", "operator": "counts", "assignment": "{oops"}, "assignment"),
        ({"kind": "rebalance", "operator": "counts", "assignment": '{"a": 1}'}, "assignment"),
    ],
)
def test_a_malformed_message_is_rejected_naming_what_is_wrong(message: dict, field: str) -> None:
    with pytest.raises(CommandRejected) as refused:
        Command.picked_up(message, "3-0", 0.0)
    assert str(refused.value).startswith(field)


def test_a_request_states_its_target_or_is_refused_before_it_is_sent() -> None:
    for kind, field in (("rescale", "parallelism"), ("rebalance", "assignment"),
                        ("logic", "params")):
        with pytest.raises(CommandRejected, match=f"^{field}"):
            CommandRequest(kind=kind, operator="counts", request_id="r", requested_at_ms=AT)
    with pytest.raises(CommandRejected, match="^request_id"):
        CommandRequest.from_message({"kind": "stop", "requested_at": "1"})
    with pytest.raises(CommandRejected, match="^requested_at"):
        CommandRequest.from_message({"kind": "stop", "request_id": "s"})


ACKS = [
    Ack(request_id="r1", kind="rescale", operator="counts", status="applied", applied_epoch=12,
        requested_at_ms=AT, picked_up_at_ms=AT + 3, control_latency_ms=3.0,
        state_bytes_copied=0, before={"parallelism": 2, "params": {}, "ranges": [[0, 15, 0]]},
        after={"parallelism": 4, "params": {}, "ranges": [[0, 3, 0], [4, 15, 1]]},
        epoch_ended_at_ms=AT + 900.0),
    Ack(request_id="r2", kind="logic", operator="views", status="rejected",
        reason="unknown column", requested_at_ms=AT, picked_up_at_ms=AT, control_latency_ms=0.0,
        before={"parallelism": 1, "params": {"condition": "true"}, "ranges": None},
        after={"parallelism": 1, "params": {"condition": "true"}, "ranges": None}),
    Ack.malformed({"request_id": "bad", "kind": "explode"}, cursor="4-0",
                  reason="kind must be one of ...", picked_up_at_ms=AT),
]


@pytest.mark.parametrize("ack", ACKS, ids=lambda a: a.request_id)
def test_an_ack_survives_json(ack: Ack) -> None:
    doc = ack.to_dict()
    assert Ack.from_dict(json.loads(json.dumps(doc))) == ack
    assert set(doc) == {
        "request_id", "kind", "operator", "status", "reason", "applied_epoch",
        "requested_at_ms", "picked_up_at_ms", "control_latency_ms", "state_bytes_copied",
        "before", "after", "epoch_ended_at_ms", "sample"}


def test_an_ack_an_older_driver_logged_reads_with_defaults() -> None:
    old = {"request_id": "r", "kind": "stop", "operator": None, "status": "applied",
           "applied_epoch": 3, "before": {}, "after": {}}
    assert Ack.from_dict(old) == Ack(request_id="r", kind="stop", operator=None,
                                     status="applied", applied_epoch=3)


def test_acks_of_picked_up_commands_say_what_became_of_them() -> None:
    command = Command.picked_up(REQUESTS["rescale"].to_message(), "2-0", AT + 5.0)
    applied = Ack.of(command, epoch=8, before={"parallelism": 2}, after={"parallelism": 4},
                     state_bytes_copied=0)
    rejected = Ack.of(command, epoch=8, before={"parallelism": 2}, after={"parallelism": 2},
                      reason="too many")
    assert (applied.status, applied.applied_epoch, applied.control_latency_ms) == (
        "applied", 8, 5.0)
    assert (rejected.status, rejected.applied_epoch, rejected.reason) == (
        "rejected", None, "too many")
    assert applied.ended(AT + 1000.0).epoch_ended_at_ms == AT + 1000.0
    assert rejected.ended(AT + 1000.0) == rejected and applied.ended(None) == applied


def test_the_host_receives_acks_stamped_when_their_epoch_ended() -> None:
    recorder = CollectingRecorder()
    deliveries = RunDeliveries("run-1", CollectingPublisher(), recorder)
    command = Command.picked_up(REQUESTS["rescale"].to_message(), "2-0", AT + 5.0)
    applied = Ack.of(command, epoch=8, before={}, after={"parallelism": 4}, state_bytes_copied=0)
    rejection = Ack.malformed({"request_id": "bad", "kind": "explode"}, cursor="3-0",
                              reason="kind ...", picked_up_at_ms=AT)
    try:
        deliveries.acks([applied], ended_at_ms=AT + 950.0)
        deliveries.acks([rejection], ended_at_ms=None)
        assert deliveries.flush(5)
    finally:
        deliveries.close()
    assert all(isinstance(ack, Ack) for ack in recorder.acks)
    assert recorder.acks[0] == applied.ended(AT + 950.0)
    assert (recorder.acks[1].request_id, recorder.acks[1].status) == ("bad", "rejected")


def test_a_served_sample_survives_the_ack_s_json() -> None:
    sample = RowSample(("campaign_id", "views"), ((3, 12), (None, 4)))
    ack = Ack(request_id="s1", kind="sample", operator="counts", status="applied",
              applied_epoch=9, sample=sample)
    doc = json.loads(json.dumps(ack.to_dict()))
    assert doc["sample"] == {"columns": ["campaign_id", "views"], "rows": [[3, 12], [None, 4]]}
    assert Ack.from_dict(doc) == ack
    assert Ack.from_dict({**doc, "sample": None}).sample is None


def test_a_sample_must_name_its_operator() -> None:
    with pytest.raises(CommandRejected, match="operator is required"):
        CommandRequest(kind="sample", operator=None, request_id="s1", requested_at_ms=AT)
