"""The sweep's pool workers (bench.running.workers) and what a command says when its reader goes away: a worker
killed while it held a semaphore leaves no `resource_tracker` warning at the sweep's exit (issue 54: a killed
worker is said once, by the sweep), and `clbench ... | head` ends quietly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT

KILLED_WORKER = textwrap.dedent("""
    import multiprocessing, os, signal, sys
    from concurrent.futures import ProcessPoolExecutor

    def die(_):
        global held
        held = multiprocessing.get_context("spawn").Lock()  # a semaphore the resource tracker follows
        os.kill(os.getpid(), signal.SIGKILL)

    if __name__ == "__main__":
        if sys.argv[1] == "quiet":
            from bench.running.workers import quiet_resource_tracker
            quiet_resource_tracker()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            try:
                list(pool.map(die, [0]))
            except Exception as exc:
                print(type(exc).__name__)
""")


def test_a_killed_worker_leaves_no_resource_tracker_warning(tmp_path):
    """Guards `quiet_resource_tracker` (called before the sweep's pool starts): a pool worker SIGKILLed while it
    held a semaphore made the resource tracker warn "leaked semaphore objects" at exit; with the filter passed to
    the tracker it says nothing. The control run, without it, shows the warning (so the test can fail)."""
    script = tmp_path / "killed_worker.py"
    script.write_text(KILLED_WORKER)
    said = {}
    for mode in ("loud", "quiet"):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)
        assert done.stdout.strip() == "BrokenProcessPool", done.stdout + done.stderr
        said[mode] = done.stderr
    assert "leaked semaphore" in said["loud"]
    assert "resource_tracker" not in said["quiet"], said["quiet"]


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """Guards `clbench ... | head`: a closed stdout ended with `error: unexpected BrokenPipeError`; the command
    now stops quietly with exit 141 (as a command killed by SIGPIPE)."""
    child = subprocess.Popen([sys.executable, "-m", "bench.cli.main", "list", "methods"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ROOT)
    child.stdout.close()  # no reader: the first write fails with EPIPE
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141, err
    assert err == "", err
