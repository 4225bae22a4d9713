"""The walls around a worker's commands hold against what a worker can try from inside: no socket of the
person's (an ssh agent, docker.sock, the session bus) reachable, no UDP out, no credential file readable,
no write outside through a link it planted — under bubblewrap and under Landlock alike."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.models.types import ToolCall
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import Sandbox, detect
from hilbert.workspaces import Workspaces

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def shell(box: ToolBox, command: str) -> str:
    return asyncio.run(box.run(ToolCall("c1", "shell", {"command": command}))).content


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (which bubblewrap replaces anyway), as the person's home and files are."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="hilbert-walls-", dir="/var/tmp"))
    except OSError as error:
        pytest.skip(f"/var/tmp is not writable here: {error}")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def walls(kind: str, home: Path | None = None) -> Sandbox:
    """The sandbox `detect` finds of this `kind` (Landlock: with bubblewrap taken away)."""
    if kind == "landlock":
        abi = abi_version()
        if abi == 0:
            pytest.skip("this kernel has no Landlock")
        found = detect(which=lambda name: None, network=abi < 4, home=home)  # ABI 1-3 cannot close it
        assert found.kind == "landlock", found.why
        return found
    found = detect(home=home)
    if found.kind != "bubblewrap":
        pytest.fail(
            f"no bubblewrap on this machine ({found.why}): run `make sandbox` (see README)", pytrace=False
        )
    return found


def listening(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.setblocking(False)
    return server


def reached(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


CONNECT = (
    f'{sys.executable} -c "import socket, sys; '
    "socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print('CONNECTED')\""
)


@pytest.mark.parametrize("kind", ["bubblewrap", "landlock"])
def test_the_persons_credentials_are_hidden_and_python_still_runs(
    kind: str, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = outside_tmp / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key=AWS-SECRET-VALUE\n")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("SSH-PRIVATE-KEY\n")
    (home / ".netrc").write_text("machine example.com password NETRC-PASSWORD\n")
    (home / ".git-credentials").write_text("https://u:GIT-TOKEN@example.com\n")
    (home / "notes.txt").write_text("ordinary file\n")
    monkeypatch.setenv("HOME", str(home))
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    box = ToolBox(workspace, runner=Runner(walls(kind, home=home), policy=False))
    out = shell(
        box,
        f"cat {home}/.aws/credentials {home}/.ssh/id_ed25519 {home}/.netrc {home}/.git-credentials; "
        f"cat ~/notes.txt; {sys.executable} -c 'print(6 * 7)'",
    )
    for secret in ("AWS-SECRET-VALUE", "SSH-PRIVATE-KEY", "NETRC-PASSWORD", "GIT-TOKEN"):
        assert secret not in out, out
    assert "ordinary file" in out and "42" in out, out  # the rest of the home and the interpreter: there


@pytest.mark.parametrize("kind", ["bubblewrap", "landlock"])
def test_the_persons_runtime_sockets_are_out_of_reach(
    kind: str, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XDG_RUNTIME_DIR holds the session bus, ssh and gpg agents, rootless docker; /run holds docker.sock."""
    runtime = outside_tmp / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(runtime / "bus"))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={runtime / 'bus'}")
    server = listening(runtime / "bus")
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    box = ToolBox(workspace, runner=Runner(walls(kind), policy=False))
    try:
        out = shell(box, f"{CONNECT} {runtime / 'bus'}; env; echo in /run: $(ls -A /run 2>/dev/null | wc -l)")
        assert not reached(server) and "CONNECTED" not in out, out
    finally:
        server.close()
    assert "SSH_AUTH_SOCK" not in out and "DBUS_SESSION_BUS_ADDRESS" not in out and "XDG_RUNTIME" not in out
    assert "in /run: 0" in out, out  # docker.sock, the system bus, other users' runtime folders: none


def test_landlock_refuses_named_unix_sockets_and_udp_anywhere(outside_tmp: Path) -> None:
    """Landlock does not control connect() to a named socket, even in a hidden folder: the filter does."""
    sandbox = walls("landlock")
    if sandbox.network:
        pytest.skip(f"Landlock ABI {sandbox.abi} cannot close the network, so UDP stays allowed")
    hidden = outside_tmp / "hidden"
    hidden.mkdir()
    server = listening(hidden / "agent.sock")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    port = udp.getsockname()[1]
    send = (
        f'{sys.executable} -c "import socket; '
        f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'LEAK', ('127.0.0.1', {port}))\""
    )
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    try:
        out = shell(
            ToolBox(workspace, runner=Runner(sandbox.hiding(hidden), policy=False)),
            f"{CONNECT} {hidden / 'agent.sock'}; {send}",
        )
        assert not reached(server) and "CONNECTED" not in out, out
        with pytest.raises(BlockingIOError):
            udp.recvfrom(99)
    finally:
        server.close()
        udp.close()
    assert out.count("PermissionError") == 2, out


def test_landlock_keeps_commands_out_of_the_shared_dev_shm_and_a_fork_still_works(tmp_path: Path) -> None:
    """/dev/shm is the machine's, shared with the person and every worker (Landlock cannot give a command
    its own, as bubblewrap does): a command can neither read what lies there nor plant anything. The
    price is POSIX semaphores (multiprocessing's locks); a forked process and a pipe still work."""
    marker = f"hilbert-walls-{os.getpid()}-{tmp_path.name}"
    planted = Path("/dev/shm", marker)
    try:
        planted.write_text("the person's shared memory\n")
    except OSError as error:
        pytest.skip(f"no writable /dev/shm here: {error}")
    script = (
        "import multiprocessing as mp\n"
        "ours, theirs = mp.Pipe()\n"
        "child = mp.get_context('fork').Process(target=theirs.send, args=(42,))\n"
        "child.start(); child.join()\n"
        "assert ours.recv() == 42\n"
        "print('FORKED')\n"
        "try:\n"
        "    mp.Lock()\n"
        "except PermissionError:\n"
        "    print('NO SEMAPHORES')\n"
    )
    (tmp_path / "job.py").write_text(script)
    box = ToolBox(
        tmp_path, runner=Runner(walls("landlock"), command_env(hilbert_python_first=True), policy=False)
    )
    try:
        out = shell(
            box,
            f"cat /dev/shm/{marker}; ls /dev/shm; echo x > /dev/shm/{marker}-2; "
            f"echo x >> /dev/shm/{marker}; python job.py",
        )
        assert "FORKED" in out and "NO SEMAPHORES" in out, out
        assert "the person's shared memory" not in out and marker not in out.splitlines(), out  # no listing
        assert planted.read_text() == "the person's shared memory\n"
        assert not Path("/dev/shm", f"{marker}-2").exists(), out
        assert out.count("Permission denied") >= 4, out  # cat, ls and both writes
    finally:
        planted.unlink(missing_ok=True)
        Path("/dev/shm", f"{marker}-2").unlink(missing_ok=True)


def test_a_planted_link_at_the_temporary_folder_leads_no_write_outside(outside_tmp: Path) -> None:
    """The Landlock launcher makes `.hilbert/tmp` after confining itself, and only uses it inside."""
    person_repo = outside_tmp / "person-repo"
    person_repo.mkdir()
    workspace = outside_tmp / "run" / "ws"
    workspace.mkdir(parents=True)
    box = ToolBox(workspace, runner=Runner(walls("landlock").hiding(outside_tmp / "run"), policy=False))
    planted = shell(box, f"rm -rf .hilbert && ln -s {person_repo} .hilbert && echo planted")
    after = shell(box, "echo TMPDIR=$TMPDIR")
    assert "planted" in planted and list(person_repo.iterdir()) == [], after
    assert "TMPDIR=\n" in after and "TMPDIR not set" in after, after
    assert "fixed" in shell(box, "rm .hilbert && echo fixed")  # the worker can still repair it
    assert shell(box, "echo TMPDIR=$TMPDIR").strip().endswith(f"TMPDIR={workspace / '.hilbert' / 'tmp'}")


def test_a_hilbert_link_in_a_workspace_is_never_committed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
        subprocess.run([*GIT, *step], cwd=repo, check=True)
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()

    async def plant_and_commit() -> str | None:
        workspaces = Workspaces(tmp_path / "run", repo)
        checkout = await workspaces.provision("w1", base)
        shutil.rmtree(checkout.work_tree / ".hilbert", ignore_errors=True)
        (checkout.work_tree / ".hilbert").symlink_to(tmp_path)  # the worker's shell: ln -s ~ .hilbert
        return await workspaces.commit(checkout, "T1: done")

    assert asyncio.run(plant_and_commit()) is None  # nothing to commit: the link stays out of git


def test_bubblewrap_gives_each_command_its_own_dev_shm(tmp_path: Path) -> None:
    marker = f"hilbert-walls-{os.getpid()}-{tmp_path.name}"
    out = shell(
        ToolBox(tmp_path, runner=Runner(walls("bubblewrap"), policy=False)),
        f"echo x > /dev/shm/{marker} && echo wrote",
    )
    assert "wrote" in out and not Path("/dev/shm", marker).exists(), out
