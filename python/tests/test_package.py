"""The package as a user meets it: every command line prints its usage,
the experiment says what to install when the [train] extra is missing,
an installed copy finds the binaries on PATH, and the profile the
experiment needs ships with the package."""

import os
import subprocess
import sys

import pytest

from forgive import fabric

MODULES = ("forgive.hostapi", "forgive.patterns", "forgive.tolerance", "forgive.train")


def run(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_prints_its_usage(module):
    r = run("-m", module, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: python3 -m {module}")
    assert "--help" in r.stdout


@pytest.mark.parametrize("module", ("forgive.hostapi", "forgive.patterns", "forgive.tolerance"))
def test_every_documented_usage_without_the_train_extra(module):
    """numpy and torch blocked as if they were not installed: every command
    the docs give still prints its usage (the documented-commands test in
    cmd/forgivectl runs each --help on whatever Python the machine has;
    forgive.train is the experiment's worker, which the docs do not call)."""
    code = ("import runpy, sys\n"
            "for m in ('numpy', 'torch', 'torchvision', 'matplotlib'): sys.modules[m] = None\n"
            f"sys.argv = ['{module}', '--help']\n"
            f"runpy.run_module('{module}', run_name='__main__', alter_sys=True)\n")
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: python3 -m {module}"), r.stdout


def test_patterns_without_numpy_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from forgive import patterns\n"
            "sys.exit(patterns.main(sys.argv[1:]))\n")
    r = run("-c", code, str(tmp_path / "x.npz"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "python3-numpy" in r.stderr, r.stderr


def test_the_experiment_without_the_train_extra_says_what_to_install():
    """numpy blocked as if it were not installed: --help still works, a run
    exits 2 naming the extra."""
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from forgive import tolerance\n"
            "sys.exit(tolerance.main(sys.argv[1:]))\n")
    r = run("-c", code, "--seeds", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "[train] extra" in r.stderr and "numpy" in r.stderr
    r = run("-c", code, "--help")
    assert r.returncode == 0 and "--seeds" in r.stdout, r.stderr


def test_the_experiments_profile_ships_with_the_package():
    pytest.importorskip("numpy")
    from forgive import tolerance

    with open(tolerance.DEFAULT_PROFILE) as f:
        assert "overrides: {switch.data_queue: 24KiB}" in f.read()


def fake_binaries(d, names=fabric.BINARIES):
    os.makedirs(d, exist_ok=True)
    for b in names:
        p = os.path.join(d, b)
        with open(p, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(p, 0o755)


def test_an_installed_copy_takes_the_binaries_on_path(tmp_path, monkeypatch):
    monkeypatch.delenv("FORGIVE_BIN_DIR", raising=False)
    monkeypatch.setattr(fabric, "REPO", str(tmp_path / "site-packages"))  # no checkout around it
    assert fabric.source_tree() is None
    half, full = str(tmp_path / "half"), str(tmp_path / "full")
    fake_binaries(half, ("forgivectl",))
    monkeypatch.setenv("PATH", half)
    with pytest.raises(fabric.FabricError, match="go install"):
        fabric.bin_dir()
    fake_binaries(full)
    monkeypatch.setenv("PATH", os.pathsep.join((full, half)))
    assert fabric.bin_dir() == full


def test_the_bin_dir_variable_must_hold_all_three(tmp_path, monkeypatch):
    fake_binaries(str(tmp_path), ("forgived", "forgivectl"))
    monkeypatch.setenv("FORGIVE_BIN_DIR", str(tmp_path))
    with pytest.raises(fabric.FabricError, match="lacks trimswitch"):
        fabric.bin_dir()
