"""load_known_hosts reads what OpenSSH writes, tolerating what OpenSSH tolerates (core tier, pure).

tests/data/ssh/known_hosts-mixed holds one line of each kind (keys made with ssh-keygen, the hashed entry
with `ssh-keygen -H`): a broken or unsupported line must not make every connection fail.
"""

from pathlib import Path

import paramiko

from numaforge.remote.ssh import load_known_hosts

DATA = Path(__file__).resolve().parents[1] / "data" / "ssh" / "known_hosts-mixed"


def test_usable_entries_are_loaded_and_the_rest_skipped():
    entries, revoked, skipped = load_known_hosts(str(DATA))
    names = [e.hostnames for e in entries]
    assert ["gpu-01.example", "10.231.1.11"] in names
    assert ["[gpu-02.example]:2222"] in names
    assert any(n[0].startswith("|1|") for n in names)
    # @cert-authority, the non-base64 key, the two-field line, the sk- key type, the unknown marker
    assert skipped == 5
    assert len(revoked) == 1 and revoked[0].get_name() == "ssh-ed25519"


def test_hashed_and_port_entries_are_found_by_name():
    entries, _, _ = load_known_hosts(str(DATA))
    keys = paramiko.HostKeys()
    for e in entries:
        for n in e.hostnames:
            keys.add(n, e.key.get_name(), e.key)
    assert keys.lookup("gpu-03.example") is not None  # only present hashed
    assert keys.lookup("[gpu-02.example]:2222") is not None
    assert keys.lookup("10.231.1.11") is not None
    assert keys.lookup("gpu-04.example") is None
