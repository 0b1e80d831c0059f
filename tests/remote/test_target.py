"""resolve_target: how an inventory SSHSpec and an ssh_config file combine (pure; core tier, no sshd)."""

import pytest

from numaforge.inventory.model import SSHSpec
from numaforge.remote.ssh import ConnectError, resolve_target

CONFIG = """\
Host gpu-*
  User ops
  Port 2222
  IdentityFile {key}
  UserKnownHostsFile {kh} /etc/ssh/other_known_hosts

Host gpu-07
  HostName 10.231.7.7
  ProxyCommand ssh -W %h:%p bastion
"""


@pytest.fixture
def cfg(tmp_path):
    key = tmp_path / "id_ops"
    key.write_text("not read here")
    key.chmod(0o600)  # a private key others can read is refused, as OpenSSH does
    path = tmp_path / "ssh_config"
    path.write_text(CONFIG.format(key=key, kh=tmp_path / "kh"))
    return path


def test_ssh_config_fills_in_what_the_inventory_leaves_at_defaults(cfg, tmp_path):
    t = resolve_target(SSHSpec(address="gpu-07", config_file=str(cfg)), "gpu07")
    assert (t.hostname, t.port, t.user) == ("10.231.7.7", 2222, "ops")
    assert t.key_files == [str(tmp_path / "id_ops")]
    assert t.known_hosts == str(tmp_path / "kh") and t.system_known_hosts is None
    assert t.proxy_command == "ssh -W 10.231.7.7:2222 bastion"
    assert t.where == "host gpu07 (ops@10.231.7.7:2222)"
    assert t.known_hosts_name == "[10.231.7.7]:2222"
    assert t.config_file == str(cfg)


def test_inventory_values_other_than_the_defaults_win(cfg, tmp_path):
    spec = SSHSpec(address="gpu-07", port=22022, user="admin", key_file="keys/inv_key", known_hosts="kh2",
                   config_file="ssh_config")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "inv_key").write_text("x")
    (tmp_path / "keys" / "inv_key").chmod(0o600)
    t = resolve_target(spec, "gpu07", base_dir=tmp_path)
    assert (t.port, t.user) == (22022, "admin")
    assert t.key_files == [str(tmp_path / "keys" / "inv_key")]
    assert t.known_hosts == str(tmp_path / "kh2")


def test_without_any_config_the_openssh_defaults_apply(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    t = resolve_target(SSHSpec(address="10.231.9.9"), "plain")
    assert (t.hostname, t.port, t.user) == ("10.231.9.9", 22, "root")
    assert t.key_files == [] and t.proxy_command is None and t.config_file is None
    assert t.known_hosts == str(tmp_path / ".ssh" / "known_hosts")
    assert t.system_known_hosts == "/etc/ssh/ssh_known_hosts"
    assert t.known_hosts_name == "10.231.9.9"


def test_missing_key_file_is_named_with_a_fix(tmp_path):
    with pytest.raises(ConnectError) as exc:
        resolve_target(SSHSpec(address="h", key_file="nope/id_ed25519"), "h1", base_dir=tmp_path)
    assert str(tmp_path / "nope" / "id_ed25519") in exc.value.what
    assert exc.value.where == "host h1" and "ssh.key_file" in exc.value.fix


def test_missing_explicit_config_file_is_an_error(tmp_path):
    with pytest.raises(ConnectError, match="does not exist"):
        resolve_target(SSHSpec(address="h", config_file=str(tmp_path / "missing")), "h1")


def test_identity_files_that_do_not_exist_are_skipped(tmp_path):
    cfg = tmp_path / "c"
    cfg.write_text(f"Host *\n  IdentityFile {tmp_path}/absent\n")
    t = resolve_target(SSHSpec(address="h", config_file=str(cfg)), "h1")
    assert t.key_files == []


def test_proxyjump_is_refused_with_the_equivalent_proxycommand(tmp_path):
    cfg = tmp_path / "c"
    cfg.write_text("Host h\n  ProxyJump bastion.example\n")
    with pytest.raises(ConnectError) as exc:
        resolve_target(SSHSpec(address="h", config_file=str(cfg)), "h1")
    assert "ProxyJump" in exc.value.what and "ProxyCommand ssh -W %h:%p bastion.example" in exc.value.fix
