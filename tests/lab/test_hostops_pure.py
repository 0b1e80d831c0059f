"""Pure host-operation helpers (numaforge.livepatch.hostops): EBUSY retries, taint decoding, stalled threads with
stacks, the livepatch sysfs listing, and the per-host A/B measurement policy. The same paths run for real on the
lab VM (tests/lab/test_lab_vm.py)."""

from numaforge.inventory.model import Host, Location
from numaforge.livepatch import fleet as lpfleet
from numaforge.livepatch import hostops as ho

BUSY = "insmod: ERROR: could not insert module x.ko: Device or resource busy"


def runner(answers):
    calls = []

    def attempt():
        calls.append(1)
        return answers[len(calls) - 1]

    return attempt, calls


def test_busy_answers_are_retried_five_times_two_seconds_apart():
    attempt, calls = runner([(1, BUSY)] * 9)
    slept = []
    rc, out, tries = ho.with_busy_retries(attempt, sleep=slept.append)
    assert (rc, tries, len(calls)) == (1, 5, 5) and slept == [2.0] * 4 and "busy" in out


def test_busy_then_success_stops_retrying():
    attempt, calls = runner([(1, BUSY), (1, BUSY), (0, "")])
    slept = []
    assert ho.with_busy_retries(attempt, sleep=slept.append) == (0, "", 3) and slept == [2.0, 2.0]


def test_other_errors_are_not_retried():
    attempt, calls = runner([(1, "insmod: ERROR: Invalid module format"), (0, "")])
    assert ho.with_busy_retries(attempt, sleep=lambda s: None)[2] == 1


def test_taint_is_decoded_into_the_kernels_letters():
    # 4096 O | 8192 E | 32768 K
    assert ho.decode_taint("45056") == ["O", "E", "K"] and ho.decode_taint("0") == [] and ho.decode_taint("") == []
    assert ho.taint_detail("512")["meaning"] == ["W (kernel issued a warning)"]


def test_a_live_patch_taint_is_expected_but_a_warning_is_not():
    assert ho.new_taint("0", str(4096 | 8192 | 32768)) == []
    assert ho.new_taint("4096", str(4096 | 512 | 32768)) == ["W"]
    assert ho.new_taint("512", "512") == []  # already there before: not ours


def test_stalled_threads_carry_their_kernel_stacks():
    text = (
        "T 120 120 nf_lp_stall\nS [<0>] msleep_interruptible+0x2b/0x50\nS [<0>] nf_sleeper+0x1c/0x30\n"
        "T 300 302 worker\n"
    )
    st = ho.parse_stalled(text)
    assert st[0] == {
        "pid": 120,
        "tid": 120,
        "comm": "nf_lp_stall",
        "stack": ["[<0>] msleep_interruptible+0x2b/0x50", "[<0>] nf_sleeper+0x1c/0x30"],
    }
    assert st[1]["tid"] == 302 and st[1]["stack"] == []
    assert ho.stalled_summary(st) == "nf_lp_stall 120/120 at msleep_interruptible+0x2b/0x50, worker 300/302"


def test_livepatch_listing_parses_state_and_functions():
    lps = ho.parse_livepatches("lp=a 1 0\nfn=a vmlinux/f,1\nlp=b 0 1\nfn=zz vmlinux/x,1\n")
    assert lps == {
        "a": {"enabled": "1", "transition": "0", "functions": ["vmlinux/f,1"]},
        "b": {"enabled": "0", "transition": "1", "functions": []},
    }


def test_measurement_runs_on_the_lab_group_or_on_request_only():
    lab, prod = Host("l", Location("t"), groups=["lab"]), Host("p", Location("t"), groups=["prod"])
    assert lpfleet.measure_on(lab, None) and not lpfleet.measure_on(prod, None)
    assert lpfleet.measure_on(prod, True) and not lpfleet.measure_on(lab, False)
