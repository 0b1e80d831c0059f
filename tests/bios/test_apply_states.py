"""The pure decisions of one host's bios-apply (numaforge.bios.applysteps): which state comes next, what a PATCH
answer means, and the host's status and message."""

import pytest

from numaforge.bios.applysteps import Progress, next_state, outcome, patch_action


def walk(**kw) -> list[str]:
    p = Progress(
        **{
            "changes": False,
            "pending": False,
            "written": False,
            "jobs": False,
            "reboot": False,
            "needs_reset": False,
            **kw,
        }
    )
    out, state = [], "plan"
    while state != "result":
        state = next_state(state, p)
        out.append(state)
    return out


@pytest.mark.parametrize(
    "kw, states",
    [
        ({}, ["result"]),  # compliant: nothing to do
        ({"changes": True, "needs_reset": True}, ["patch", "result"]),
        (
            {"changes": True, "needs_reset": True, "written": True, "jobs": True},
            ["job-check", "patch", "job", "result"],
        ),  # Dell: check, write, job
        (
            {"changes": True, "needs_reset": True, "written": True, "jobs": True, "reboot": True},
            ["job-check", "patch", "job", "reboot", "verify", "result"],
        ),
        ({"pending": True, "needs_reset": True, "jobs": True}, ["job", "result"]),  # pending, no job yet
        ({"pending": True, "needs_reset": True, "reboot": True}, ["reboot", "verify", "result"]),
        ({"reboot": True}, ["result"]),  # --reboot, nothing to apply
    ],
)
def test_next_state(kw, states):
    assert walk(**kw) == states


def test_job_follows_the_write_not_the_plan():
    """A 412 re-plan that leaves nothing to write (the other admin wrote our values): no job of ours."""
    p = Progress(changes=True, pending=False, written=False, jobs=True, reboot=False, needs_reset=True)
    assert next_state("patch", p) == "result"


def test_patch_action():
    assert patch_action(False, False) == "done" and patch_action(False, True) == "done"
    assert patch_action(True, False) == "replan"
    assert patch_action(True, True) == "conflict"


def test_outcome():
    base = {"changed": [], "pending": [], "verified": [], "mismatches": []}
    assert outcome(base, reboot=False, needs_reset=False, plan_pending=0) == ("unchanged", "no change")
    assert (
        outcome(base, reboot=False, needs_reset=True, plan_pending=2)[1]
        == "no change; 2 already pending a reset (use --reboot)"
    )
    assert outcome(
        {**base, "changed": ["A"], "pending": ["A", "B"]}, reboot=False, needs_reset=True, plan_pending=1
    ) == ("changed", "1 written, 2 pending until the host resets (use --reboot)")
    assert outcome({**base, "changed": ["A"], "verified": ["A"]}, reboot=True, needs_reset=True, plan_pending=0) == (
        "changed",
        "1 written, rebooted, 1 verified",
    )
    status, message = outcome(
        {
            **base,
            "mismatches": [{"attribute": "A", "current": 1, "desired": 2}],
            "job": {"id": "JID_1", "state": "Failed", "message": "bad"},
        },
        reboot=True,
        needs_reset=True,
        plan_pending=0,
    )
    assert status == "failed" and message == "after reboot: A is 1, wanted 2 (config job JID_1 Failed: bad)"
    assert outcome({**base, "resumed": True, "verified": ["A"]}, reboot=True, needs_reset=True, plan_pending=0)[
        1
    ].startswith("resumed an interrupted run")
