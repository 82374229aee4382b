import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from harness.isolation.sandbox import Limits, child_environment, kill_tree
from harness.isolation.session import needed_folders, run_child


def test_environment_is_an_allow_list_without_secrets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("SOME_RANDOM_SETTING", "x")
    env = child_environment(tmp_path, cpu_threads=1, token="t")
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env and "SOME_RANDOM_SETTING" not in env
    assert not any("secret" in value for value in env.values())
    assert env["HOME"] == str(tmp_path) and env["MAX_JOBS"] == "1"
    assert env["USER"] == env["LOGNAME"] == "kernelwright-child"  # getpass.getuser() without /etc/passwd
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)  # ninja is found


def test_a_jailed_child_imports_the_harness_from_the_folder_that_holds_it(tmp_path: Path) -> None:
    """Where the project lives under a hidden folder (/tmp, a home), the folder holding the `harness` package is
    bound back (its packages) and is the child's PYTHONPATH, wherever the package's own modules sit inside it."""
    import harness

    holder = Path(harness.__file__).resolve().parent.parent
    assert child_environment(tmp_path, 1, "token")["PYTHONPATH"] == str(holder)
    assert holder / "harness" in needed_folders()  # its packages, not the rest of the project


def test_a_compiler_the_environment_names_comes_with_its_installation(tmp_path: Path, monkeypatch) -> None:
    """A GPU image names CXX=/opt/gcc/bin/g++: g++ runs cc1plus and reads headers from its own prefix, so the jail
    shows that prefix (without it every build failed `g++: not found`); a compiler in a shared folder
    (/usr/local/bin) brings only its own file, never the whole folder."""
    prefix = tmp_path / "gcc-13"
    (prefix / "bin").mkdir(parents=True)
    compiler = prefix / "bin" / "g++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", f"{compiler} -fno-plt")
    assert prefix in needed_folders() and "CXX" in child_environment(tmp_path, 1, "t")
    monkeypatch.setenv("CXX", "/usr/local/bin/g++")
    assert Path("/usr/local") not in needed_folders()


def test_package_folders_a_pth_file_adds_are_shown(tmp_path: Path, monkeypatch) -> None:
    """`make setup TORCH_SPEC=skip` puts another interpreter's site-packages on the path (a .pth file): the jail
    shows it, or a child cannot import pydantic or torch from there."""
    added = tmp_path / "lib" / "python3.12" / "site-packages"
    added.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(added))
    assert added in needed_folders()


def test_kill_tree_reaches_grandchildren_and_escaped_processes(tmp_path: Path) -> None:
    token = f"kw-test-{uuid.uuid4().hex}"  # unique, so sleepers of another run are never counted
    env = dict(os.environ, KERNELWRIGHT_EVAL_TOKEN=token)
    # the shell starts a grandchild and a double-forked (reparented to init) sleeper, then waits
    root = subprocess.Popen(["sh", "-c", "sleep 300 & (setsid sleep 301 &) ; wait"], env=env,
                            start_new_session=True)
    time.sleep(0.5)
    sleepers = [p for p in psutil.process_iter(["cmdline", "environ"])
                if (p.info["cmdline"] or [])[:1] == ["sleep"] and (p.info["environ"] or {}).get("KERNELWRIGHT_EVAL_TOKEN") == token]
    assert len(sleepers) == 2
    killed = kill_tree(root.pid, token)
    assert {p.pid for p in sleepers} <= set(killed)
    root.wait(timeout=5)
    assert not any(_alive(p) for p in sleepers)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_child_that_dies_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text("{")  # the child fails parsing its job and exits non-zero
    outcome = run_child(tmp_path, Limits(timeout_s=60, memory_mb=4096, address_space_limit=True))
    assert outcome.returncode not in (0, None) and not outcome.timed_out
    assert "Error" in (tmp_path / "child.log").read_text()
