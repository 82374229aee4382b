"""The jail every untrusted process starts in:
`python jail.py --writable DIR ... --visible DIR ... --hidden DIR ... -- COMMAND...`.

The launcher unshares PID, mount, IPC and network namespaces and forks; its child becomes PID 1 of the new PID
namespace (so every process the candidate starts, double forks included, dies with it), mounts a /proc that shows
only that namespace (no ancestor's environment or memory is reachable), gives it a /dev of its own holding only
null, zero, full, random, urandom (and the GPU's nvidia* nodes), remounts every file system read-only except the
given writable folders, and covers with fresh private folders /tmp, /dev/shm, the home folders (where credentials
live: all capped small, `PRIVATE_MB`; the process's own TMPDIR and HOME are its scratch folder, under its quota), the
`--hidden` folders (kernelwright's home, the build cache: the `--visible` folders that live under them, such as an
interpreter, the project or the precompiled headers, are bound back read-only, and writable ones, its own scratch
folder, writable) and every other evaluation's scratch quota on the machine, whatever home it belongs to. Then it
gives its writable folders to an unprivileged user (`JAIL_UID`), drops every capability, becomes that user (it
cannot remount, trace, or leave its cgroup, and a root-owned file is as closed to it as to any user) and execs
COMMAND. Where the OS refuses a step the command still runs; the parent reads what actually holds from /proc and
records it with the evaluation (see `containment_facts`).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import sys
from pathlib import Path
from typing import Callable

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x40000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
MNT_DETACH = 2
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAPSET = {"x86_64": 126, "aarch64": 91}  # the capset system call's number
_FLAG_WORDS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
_libc = ctypes.CDLL(None, use_errno=True)
JAIL_UID = JAIL_GID = 65534  # nobody/nogroup: owns nothing on the host
PRIVATE_MB = {"/tmp": 64, "/dev/shm": 64}  # home folders: 16 MB (TMPDIR and HOME are the scratch folder itself)
DEVICES = ("null", "zero", "full", "random", "urandom")  # all a kernel needs; CUDA adds the nvidia* nodes
# what any program needs from the host's system folders (programs, libraries, the compiler, the dynamic linker's
# configuration and the links `cc`/`c++` resolve through): bound read-only into the new root, nothing else of /etc
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/ld.so.conf",
          "/etc/ld.so.conf.d", "/etc/alternatives")
# folders inside `SYSTEM` where a machine keeps its own installs and their configuration (/usr/local/etc holds an
# npmrc here, /usr/local/bin other projects' tools): an empty folder in the new root, and only the `visible` paths
# inside them come back (the interpreter's own folders where it lives there, the CUDA toolkit, the build's tools)
COVERED = ("/usr/local",)
ROOT_SOURCE = "kernelwright-jail"  # the new root's tmpfs, by name in mountinfo: how the parent knows it holds
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # the pivot_root system call's number
# an evaluation's scratch quota (harness/isolation/scratch_quota.py), in any kernelwright home on the machine
_SCRATCH = re.compile(r"^eval-\d{8}-\d{6}-\d+-[0-9a-f]+$")


def _test_switch_off(name: str) -> bool:
    """harness/defences.py's test-only switch, read here without importing it (the launcher imports nothing of
    ours): passed into the jail's environment only where the test suite turned the defence off."""
    return os.environ.get("KERNELWRIGHT_TEST_STATIC_OFF") == "1" and \
        name in os.environ.get("KERNELWRIGHT_TEST_DEFENCES_OFF", "").split(",")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> bool:
    encode = (lambda s: s.encode() if s is not None else None)
    return _libc.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data)) == 0


def _mount_points() -> list[tuple[str, int]]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        options = fields[5].split(",")
        flags = sum(bit for word, bit in _FLAG_WORDS.items() if word in options)
        points.append((fields[4].replace("\\040", " "), flags))
    return points


def _under(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _homes() -> list[str]:
    """Where users keep credentials (~/.netrc, ~/.aws, API keys in dotfiles): the home folders, hidden."""
    import pwd

    try:
        own = [pwd.getpwuid(os.getuid()).pw_dir]
    except KeyError:
        own = []
    return [h for h in dict.fromkeys(own + ["/root", "/home"]) if h not in ("/", "")]


def _seal_file_systems(writable: list[str], visible: list[str], hidden: list[str]) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host
    if _test_switch_off("jail_binds"):  # test-only: the private folders and the read-only file systems, off
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        return
    _hide_other_scratch(writable)
    if not _test_switch_off("jail_root") and _new_root(writable, visible, hidden):
        return
    _read_only_host(writable, visible, hidden)  # the fallback where the OS refused a new root: the fact says so


def _read_only_host(writable: list[str], visible: list[str], hidden: list[str]) -> None:
    """The host's file systems read-only, with private /tmp, /dev/shm and home folders and the hidden folders
    covered: what the jail shows where it cannot build a root of its own."""
    private = [t for t in ("/tmp", "/dev/shm", *_homes()) if os.path.isdir(t)]
    covered = [h for h in dict.fromkeys(hidden) if os.path.isdir(h) and h not in private]
    # folders under them that the child needs come back through handles opened before anything is covered: the
    # interpreter and the project read-only, the scratch folder writable
    kept = [(f, os.open(f, os.O_PATH | os.O_DIRECTORY), f in writable) for f in dict.fromkeys(visible + writable)
            if os.path.isdir(f) and _under(f, private + covered + ["/dev"])]
    devices_made = _own_dev()
    for target in private:  # private and empty: no state survives from one evaluation to the next
        os.makedirs(target, exist_ok=True)
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_MB.get(target, 16)}m,mode=1777")
    # parents first: a hidden folder inside the project (its scratch root under runs/) is covered after the project
    # is bound back, and the process's own folder inside it comes back after that
    steps = [(folder, (handle, rw)) for folder, handle, rw in kept] + [(folder, None) for folder in covered]
    for folder, bind in sorted(steps, key=lambda step: len(step[0])):
        os.makedirs(folder, exist_ok=True)
        if bind is None:  # empty, and read-only below (it is not kept)
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
            continue
        handle, rw = bind
        _mount(f"/proc/self/fd/{handle}", folder, None, MS_BIND | MS_REC)
        if not rw:
            _mount(None, folder, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(handle)
    for folder in writable:
        if not _under(folder, private + covered + ["/dev"]):
            _mount(folder, folder, None, MS_BIND | MS_REC)
    keep = writable + private + ["/proc", "/dev"]
    for point, flags in _mount_points():
        if _under(point, keep):
            continue
        _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    if devices_made:  # its own /dev, read-only once filled (the nodes themselves stay usable)
        _mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _new_root(writable: list[str], visible: list[str], hidden: list[str]) -> bool:
    """A root of its own (a small read-only tmpfs) holding only `SYSTEM` (less `COVERED`), the `visible` paths (the
    interpreter, its packages, the harness's code, the precompiled headers, the build's tools) and the `writable`
    ones (its scratch folder with its build), each bound at its own path; a private /tmp and /dev/shm, a /dev of its own, a /proc of its PID namespace
    (and /sys read-only where the GPU's nodes are: the driver reads it). The host's root is then detached: home
    folders, other repositories, stores, transcripts and other builds are not there to read. False (nothing
    pivoted) where the OS refused a step: the caller falls back to the read-only view of the host."""
    gpu = any(name.startswith("nvidia") for name in os.listdir("/dev"))
    sources = [p for p in dict.fromkeys([*SYSTEM, *(["/sys"] if gpu else []), *visible, *writable])
               if os.path.lexists(p)]
    links = {p: os.readlink(p) for p in sources if os.path.islink(p)}
    links.update(_kept_links(sources))
    handles = {p: os.open(p, os.O_PATH) for p in sources if p not in links}  # before anything is covered
    try:
        root = _staged_root()
        if root is None:
            return False
        steps = [(p, ("link", links[p])) for p in links] + [(p, ("bind", h)) for p, h in handles.items()]
        steps.append(("/tmp", ("tmpfs", f"size={PRIVATE_MB['/tmp']}m,mode=1777")))  # /dev/shm: with /dev
        steps += [(h, ("tmpfs", "size=1m,mode=755")) for h in dict.fromkeys([*hidden, *COVERED])
                  if _under(h, list(handles)) and h not in handles and os.path.isdir(h)]
        for path, (kind, what) in sorted(steps, key=lambda step: len(step[0])):  # parents first
            if not _place(root + path, kind, what, path in writable):
                return False
        if not _own_dev(root):
            _place(root + "/dev", "bind", os.open("/dev", os.O_PATH), False)
        os.makedirs(root + "/proc")
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4m,mode=755")
        return _pivot(root, writable)
    finally:
        for handle in handles.values():
            os.close(handle)


def _kept_links(sources: list[str]) -> dict[str, str]:
    """The symbolic links directly inside a `COVERED` folder that lead to a path the root holds (/usr/local/cuda ->
    cuda-13.0, where the toolkit is visible): kept as links, the way the child's tools look for them."""
    found = {}
    for covered in COVERED:
        try:
            names = os.listdir(covered)
        except OSError:
            continue
        for name in names:
            path = os.path.join(covered, name)
            if os.path.islink(path) and path not in sources and os.path.realpath(path) in sources:
                found[path] = os.readlink(path)
    return found


def _staged_root() -> str | None:
    """An empty tmpfs to build the root in, under a private tmpfs over /tmp (this namespace's only)."""
    stage = "/tmp"
    if not _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=700"):
        return None
    root = stage + "/root"
    os.mkdir(root)
    return root if _mount(ROOT_SOURCE, root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755") else None


def _place(target: str, kind: str, what: object, writable: bool) -> bool:
    """One entry of the new root: a symbolic link as the host has it, a folder or file bound from its handle
    (read-only unless `writable`), or an empty tmpfs."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if kind == "link":
        os.symlink(str(what), target)
        return True
    if kind == "tmpfs":
        os.makedirs(target, exist_ok=True)
        return _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, str(what))
    source = f"/proc/self/fd/{what}"
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        open(target, "w").close()
    if not _mount(source, target, None, MS_BIND | MS_REC):
        return False
    return writable or _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _pivot(root: str, writable: list[str]) -> bool:
    """Make `root` the root and detach the host's; every mount left but the writable and private ones read-only
    (a bound folder's own submounts too)."""
    number = _PIVOT_ROOT.get(os.uname().machine)
    os.chdir(root)
    if number is None or _libc.syscall(number, b".", b".") != 0:
        os.chdir("/")
        return False
    _libc.umount2(b".", MNT_DETACH)
    os.chdir("/")
    for point, flags in _mount_points():
        if not _under(point, writable + ["/tmp", "/dev", "/proc"]):
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | flags)
    return True


def _hide_other_scratch(writable: list[str]) -> None:
    """Every evaluation's scratch quota on the machine is a mount point of its own: all but this process's are
    detached in its namespace (their folders read empty), whichever kernelwright home they belong to."""
    for point, _flags in _mount_points():
        if _SCRATCH.match(os.path.basename(point)) and not _under(point, writable) and \
                not any(_under(w, [point]) for w in writable):
            if _libc.umount2(point.encode(), MNT_DETACH) != 0:
                _mount("tmpfs", point, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755")


def _own_dev(base: str = "") -> bool:
    """A tmpfs over /dev holding only `DEVICES` and the GPU's nodes, bound from the host's (a node made here would
    need the right numbers; a bind is the host's node itself), the usual links into /proc, and an empty /dev/shm.
    False where the OS refused (the host's /dev stays, and the `devices` fact says so)."""
    nodes = [name for name in DEVICES if os.path.exists(f"/dev/{name}")]
    nodes += sorted(name for name in os.listdir("/dev") if name.startswith("nvidia"))
    handles = {name: os.open(f"/dev/{name}", os.O_PATH) for name in nodes}
    try:
        os.makedirs(base + "/dev", exist_ok=True)
        if not _mount("tmpfs", base + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755"):
            return False
        try:
            _fill_dev(handles, base)
        except OSError:  # half a /dev is worse than the host's: back to it, and the record says so
            _libc.umount2((base + "/dev").encode(), MNT_DETACH)
            return False
        return True
    finally:
        for handle in handles.values():
            os.close(handle)


def _fill_dev(handles: dict[str, int], base: str = "") -> None:
    for name, handle in handles.items():
        target = f"{base}/dev/{name}"
        if os.path.isdir(f"/proc/self/fd/{handle}"):
            os.mkdir(target)
        else:
            open(target, "w").close()
        if not _mount(f"/proc/self/fd/{handle}", target, None, MS_BIND | MS_REC):
            raise OSError(f"{target} could not be bound")
    for link, points_to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                            ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(points_to, f"{base}/dev/{link}")
    os.mkdir(f"{base}/dev/shm")
    if base:  # the new root's own: small and private (the host fallback mounts its own over /dev/shm)
        _mount("tmpfs", f"{base}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_MB['/dev/shm']}m,mode=1777")
        _mount(None, f"{base}/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")


def _become_unprivileged(writable: list[str]) -> None:
    """Hand the writable folders (and what the parent put in them) to `JAIL_UID` and become it, keeping the GPU
    nodes' groups (a node may be group-readable only). Not root: it is unprivileged already. The `user` fact
    records what held."""
    if os.geteuid() != 0 or _test_switch_off("jail_uid"):
        return
    for folder in writable:
        for root, folders, files in os.walk(folder):
            for name in [root] + [os.path.join(root, f) for f in folders + files]:
                try:
                    os.lchown(name, JAIL_UID, JAIL_GID)
                except OSError:
                    continue
    groups = sorted({os.stat(f"/dev/{n}").st_gid for n in os.listdir("/dev") if n.startswith("nvidia")} - {0})
    os.setgroups(groups)
    os.setgid(JAIL_GID)
    os.setuid(JAIL_UID)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as an exec would leave it: the parent reads its memory either way


def _drop_bounding_set() -> None:
    """Empty the bounding set (an exec'd program gets nothing back): while this process still may."""
    for capability in range(64):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)


def _drop_capabilities() -> None:
    """Empty the bounding set, the ambient set, and this process's own effective, permitted and inheritable sets
    (a process that does not exec, such as a zygote's fork, keeps its capabilities otherwise)."""
    _drop_bounding_set()
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    number = _CAPSET.get(os.uname().machine)
    if number is not None:
        header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
        empty = (ctypes.c_uint32 * 6)()  # {effective, permitted, inheritable} x 2 words
        _libc.syscall(number, header, empty)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def enter(writable: list[str], visible: list[str], hidden: list[str]) -> None:
    """Inside the new namespaces, before the child's own code (exec'd, or run in-process by a zygote's fork): die
    with the namespace's parent, seal the file systems (as PID 1), drop every capability, become `JAIL_UID`."""
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getpid() == 1:
        folder = os.getcwd()
        _seal_file_systems(writable, visible, hidden)
        os.chdir(folder)  # the working folder is re-resolved: through the writable bind, not the old mount
    _drop_bounding_set()
    try:
        _become_unprivileged(writable)
    except OSError:  # refused: it stays the user it was, without capabilities (the parent records its uid)
        pass
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # a change of user clears it
    _drop_capabilities()


def _inner(writable: list[str], visible: list[str], hidden: list[str], command: list[str]) -> None:
    enter(writable, visible, hidden)
    os.execvp(command[0], command)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    writable = [os.path.realpath(options[i + 1]) for i, word in enumerate(options) if word == "--writable"]
    visible = [os.path.realpath(options[i + 1]) for i, word in enumerate(options) if word == "--visible"]
    hidden = [os.path.realpath(options[i + 1]) for i, word in enumerate(options) if word == "--hidden"]
    return in_new_namespaces(lambda: _inner(writable, visible, hidden, command))


def in_new_namespaces(inner: Callable[[], None]) -> int:
    """Unshare the namespaces, run `inner` in a fork (PID 1 of the new PID namespace), wait for it and end the
    way it ended: the same exit code, or death by the same signal (so the parent can name it: SIGSEGV...)."""
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC) != 0:
        _libc.unshare(CLONE_NEWNET)  # at least the network, where the rest is refused
    pid = os.fork()
    if pid == 0:
        try:
            inner()
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


def containment_facts(pid: int) -> dict[str, str]:
    """What actually holds for process `pid`, read by the parent from the kernel (the child cannot lie here)."""
    facts: dict[str, str] = {}
    mine = Path("/proc/self/ns")
    theirs = Path(f"/proc/{pid}/ns")
    for name, what in (("pid", "pid_namespace"), ("mnt", "mount_namespace"), ("net", "network")):
        try:
            separate = os.readlink(mine / name) != os.readlink(theirs / name)
        except OSError:
            separate = False
        facts[what] = "isolated" if separate else "NOT isolated (the OS refused a namespace here)"
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        sets = {line.split(":")[0]: line.split()[1] for line in status.splitlines()
                if line.startswith(("CapEff:", "CapPrm:", "CapBnd:", "CapAmb:"))}
        held = {name: value for name, value in sets.items() if int(value, 16)}
        facts["capabilities"] = "none" if len(sets) == 4 and not held else f"held: {held}"
    except (OSError, StopIteration, ValueError):
        facts["capabilities"] = "unknown"
    facts.update(_user_and_devices(pid))
    try:
        mounts = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
        root = next((line.split() for line in mounts if line.split()[4] == "/"), None)
        read_only = bool(root) and "ro" in root[5].split(",")
        own = bool(root) and root[root.index("-") + 2] == ROOT_SOURCE
        facts["file_system"] = ("its own root (the system folders, the interpreter, its packages, the harness's code; "
                                "writable: its scratch folder)" if own and read_only else
                                "NOT its own root: the host's file systems, read-only except its scratch folder"
                                if read_only else "NOT read-only")
    except (OSError, IndexError):
        facts["file_system"] = "unknown"
    return facts


def _user_and_devices(pid: int) -> dict[str, str]:
    """Its effective uid, and the /dev it sees (through its root, which the parent can read)."""
    facts = {}
    try:
        uid = int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                       if line.startswith("Uid:")).split()[2])
        facts["user"] = f"unprivileged (uid {uid})" if uid else "NOT unprivileged (uid 0, without capabilities)"
    except (OSError, StopIteration, ValueError, IndexError):
        facts["user"] = "unknown"
    try:
        seen = sorted(os.listdir(f"/proc/{pid}/root/dev"))
        nodes = [n for n in seen if n not in ("fd", "stdin", "stdout", "stderr", "shm")]
        own = all(n in DEVICES or n.startswith("nvidia") for n in nodes)
        facts["devices"] = f"its own /dev: {', '.join(nodes)}" if own else \
            f"NOT minimal: the host's /dev ({len(seen)} entries)"
    except OSError:
        facts["devices"] = "unknown"
    return facts


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
