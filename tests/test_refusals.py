"""Every refusal is one line, exit code 2, up front: an output folder the system will not let us create or write
(a file in the way, /proc, a read-only or full file system) is tried for real before anything is planned, loaded
or imported, and named with the system's reason and the fix; an argparse mistake (a bad value, an unknown
option, a missing value, a bad choice) is one line with what to give instead, never the usage block. Nothing is
written, and torch is never imported."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.cli import main as main_module
from bench.errors import BenchError
from bench.results.folders import PROBE, check_folder
from conftest import FIXTURE

HEAVY = ("torch", "transformers", "sklearn", "pandas", "matplotlib")
HAS_PROC = Path("/proc/self").is_dir()
PROC = "/proc/clbench-refusal-test"
RUN = ["run", "--methods", "ce", "--datasets", str(FIXTURE), "--encoder", "tiny-bert", "--evaluators", "none"]
SCRIPT = """
import contextlib, io, json, sys, time
from bench.cli.main import main
HEAVY = {heavy!r}
results = []
for args in json.loads(sys.argv[1]):
    err = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stderr(err):
        code = main(args)
    results.append([code, err.getvalue(), time.perf_counter() - started, sorted(m for m in HEAVY if m in sys.modules)])
print(json.dumps(results))
"""


def refusals(argvs: list[list[str]], cwd: Path, prefix: tuple[str, ...] = ()) -> list[tuple[int, str, float, list]]:
    """Each argument list through `clbench` in one fresh interpreter (after `prefix`, e.g. an unshare that
    mounts a file system): (exit code, stderr, seconds, the heavy modules imported by then)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_RESULTS_DIR": str(cwd / "results")}
    env.pop("BENCH_DATA_DIR", None)
    done = subprocess.run([*prefix, sys.executable, "-c", SCRIPT.format(heavy=HEAVY), json.dumps(argvs)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return [tuple(result) for result in json.loads(done.stdout)]


def tree(folder: Path) -> list[str]:
    """Every path under `folder`, to compare before and after a refusal."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_refused(case: str, result: tuple, words: list[str]) -> str:
    """One `error:` line on stderr holding `words`, exit code 2, within seconds and before any heavy import."""
    code, err, seconds, heavy = result
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, err)
    assert "usage:" not in err and "Traceback" not in err, (case, err)
    for word in words:
        assert word in lines[0], (case, word, lines[0])
    assert seconds < 5, (case, seconds)
    assert heavy == [], f"{case}: imported {heavy} before refusing"
    return lines[0]


def cases(tmp_path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """id -> (arguments, words of the one line)."""
    (tmp_path / "afile").write_text("x")
    found = {
        "results-dir-is-a-file": ([*RUN, "--results-dir", "afile"],
                                  ["results folder afile (--results-dir) is a file, not a folder",
                                   "choose another folder with --results-dir"]),
        "results-dir-under-a-file": ([*RUN, "--results-dir", "afile/results"],
                                     [f"cannot be created: {tmp_path / 'afile'} is a file"]),
        "reports-dir-under-a-file": (["report", "--reports-dir", "afile/reports"],
                                     ["reports folder afile/reports (--reports-dir) cannot be created",
                                      "give another --reports-dir"]),
        "seeds-not-a-list": ([*RUN, "--seeds", "a,b"], ["argument --seeds: seeds must look like 1,2,3 or 1-3, "
                                                        "not 'a,b'", "(see `clbench run --help`)"]),
        "unknown-option": ([*RUN, "--bogus"], ["unknown option --bogus", "see `clbench run --help`"]),
        "missing-value": ([*RUN, "--seeds"], ["argument --seeds: expected a value: e.g. 1,2,3 or 1-3 (default: 1)"]),
        "missing-value-last-of-report": (["report", "--bootstrap"],
                                         ["argument --bootstrap: expected a value: compare: paired bootstrap"]),
        "not-a-whole-number": ([*RUN, "--epochs", "1.5"], ["argument --epochs: '1.5' is not a whole number"]),
        "not-a-number": ([*RUN, "--lr", "fast"], ["argument --lr: 'fast' is not a number"]),
        "bad-choice": ([*RUN, "--executor", "cloud"], ["invalid choice: 'cloud' (choose from 'local', 'slurm')"]),
        "missing-subcommand": (["plot"], ["required: FIGURE (one of ldm, confusion,"]),
        "missing-choice": (["list"], ["required: what (one of methods, datasets, encoders, evaluators)"]),
    }
    if HAS_PROC:
        proc = [f"{PROC} ", "cannot be created: /proc refuses new folders (ENOENT: No such file or directory)"]
        found |= {
            "results-dir-in-proc": ([*RUN, "--results-dir", PROC],
                                    [*proc, "; choose another folder with --results-dir"]),
            "results-dir-deep-in-proc": ([*RUN, "--results-dir", f"{PROC}/a/b"], [f"{PROC}/a/b (--results-dir)"]),
            "report-in-proc": (["report", "--reports-dir", PROC], [*proc, "give another --reports-dir"]),
            "html-in-proc": (["report", "--html", f"{PROC}/page.html"], ["reports folder", "(--html)", *proc[1:]]),
            "plot-in-proc": (["plot", "summary", "--reports-dir", PROC], [*proc, "give another --reports-dir"]),
            "export-in-proc": (["export", "some_run", PROC], ["export folder", *proc, "give another DIR"]),
            "evaluate-model-in-proc": (["evaluate", "--model", "some/model", "--datasets", "tiny", "--results-dir",
                                        PROC], [*proc, "choose another folder with --results-dir"]),
        }
    return found


def test_every_refusal_is_one_line_exit_2_before_torch_and_writes_nothing(tmp_path):
    found = cases(tmp_path)
    before = tree(tmp_path)
    for (case, (_, words)), result in zip(found.items(), refusals([args for args, _ in found.values()], tmp_path)):
        assert_refused(case, result, words)
    assert tree(tmp_path) == before  # no results/ or reports/ folder, no probe left behind
    assert not Path(PROC).exists()


@pytest.mark.skipif(not HAS_PROC, reason="no /proc here")
def test_the_installed_command_refuses_a_results_folder_in_proc(tmp_path):
    """The real `clbench` script: before, this planned the sweep and then died with exit 1 and `unexpected
    FileNotFoundError ... rerun with --debug`."""
    script = shutil.which("clbench", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("clbench is not installed here (pip install -e .)")
    done = subprocess.run([script, *RUN, "--results-dir", f"{PROC}/results"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == (f"error: results folder {PROC}/results (--results-dir) cannot be created: /proc refuses "
                           "new folders (ENOENT: No such file or directory); choose another folder with "
                           "--results-dir\n")
    assert "shard(s)" not in done.stderr and not any(tmp_path.iterdir())  # refused before planning


def unshare_mount(options: str, folder: Path) -> tuple[str, ...]:
    """A command prefix that runs the rest in a new user and mount namespace with a tmpfs (`options`) on
    `folder`: a read-only or a full file system that even root cannot write, gone when the command ends.
    Skips the test where unprivileged namespaces are not allowed."""
    unshare = shutil.which("unshare")
    probe = [unshare, "-rm", "sh", "-c", f'mount -t tmpfs -o {options} tmpfs "{folder}"'] if unshare else None
    if probe is None or subprocess.run(probe, capture_output=True, timeout=30).returncode != 0:
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    return (unshare, "-rm", "sh", "-c", f'mount -t tmpfs -o {options} tmpfs "{folder}" || exit 97; '
                                        f'mkdir "{folder}/full" 2>/dev/null; exec "$@"', "sh")


def test_a_read_only_file_system_is_refused_with_its_reason(tmp_path):
    """A real read-only mount (root ignores permission bits, not a read-only file system): the results folder
    in it, the mount itself as the results folder, and a reports folder in it."""
    mount = tmp_path / "ro"
    mount.mkdir()
    prefix = unshare_mount("ro,size=1m", mount)
    argvs = [[*RUN, "--results-dir", str(mount / "results")], [*RUN, "--results-dir", str(mount)],
             ["report", "--reports-dir", str(mount / "reports")]]
    first, second, third = refusals(argvs, tmp_path, prefix)
    reason = f"{mount} refuses new folders (EROFS: Read-only file system)"
    line = assert_refused("ro-results", first, [f"results folder {mount / 'results'} (--results-dir) cannot be "
                                                f"created: {reason}; choose another folder with --results-dir"])
    assert "permission" not in line  # the system's reason, not a guess
    assert_refused("ro-existing-results", second, [f"results folder {mount} (--results-dir) is not writable: "
                                                   f"{reason}"])
    assert_refused("ro-reports", third, [f"reports folder {mount / 'reports'} (--reports-dir) cannot be created: "
                                         f"{reason}; give another --reports-dir"])
    assert list(mount.iterdir()) == []


def test_a_full_file_system_is_refused_with_the_space_left(tmp_path):
    """A real tmpfs with no inode left (its one folder made by the mount command): mkdir fails with ENOSPC."""
    mount = tmp_path / "full"
    mount.mkdir()
    prefix = unshare_mount("size=64k,nr_inodes=2", mount)
    (result,) = refusals([[*RUN, "--results-dir", str(mount / "results")]], tmp_path, prefix)
    assert_refused("full", result, [f"{mount} refuses new folders (ENOSPC: No space left on device, ",
                                    " MB free); free space there, or choose another folder with --results-dir"])


@pytest.mark.parametrize("code,words", [
    (errno.EROFS, ["is not writable: ", "refuses new folders (EROFS: Read-only file system); give another --x"]),
    (errno.EACCES, ["(EACCES: Permission denied); give another --x, or give yourself write permission on "]),
    (errno.ENOSPC, ["(ENOSPC: No space left on device, ", " MB free); free space there, or give another --x"]),
    (errno.EIO, ["(EIO: Input/output error); give another --x"]),
])
def test_each_system_reason_gets_its_fix(tmp_path, monkeypatch, code, words):
    """Fault-injected: the probe folder cannot be made, for each reason (this runs as root too)."""
    def refuse(prefix: str, dir: str) -> str:
        raise OSError(code, os.strerror(code), os.path.join(dir, prefix + "x"))

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with pytest.raises(BenchError) as error:
        check_folder(tmp_path, "some folder", "--x", "give another --x")
    assert str(error.value).startswith(f"some folder {tmp_path} (--x) ") and "\n" not in str(error.value)
    for word in words:
        assert word in str(error.value)


def test_a_writable_folder_passes_and_nothing_is_left(tmp_path):
    check_folder(tmp_path / "new" / "deeper", "results folder", "--results-dir", "fix")
    check_folder(tmp_path, "results folder", "--results-dir", "fix")
    assert list(tmp_path.iterdir()) == []  # neither the folders asked for nor a probe
    assert PROBE.startswith(".")


def test_an_os_error_after_the_checks_is_one_line_exit_1(monkeypatch, cli):
    """A disk that fills (or a folder made read-only) once a command has started: one line naming the file and
    the reason, not `unexpected ... rerun with --debug`; without a file name it stays unexpected."""
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/results/results.parquet")

    monkeypatch.setitem(main_module.COMMANDS, "status", full)
    code, out, err = cli("status")
    assert code == 1 and out == ""
    assert err == ("error: /data/results/results.parquet: ENOSPC: No space left on device (check that its folder "
                   "exists, is writable and has space, or choose another folder; --debug shows the traceback)\n")
    monkeypatch.setitem(main_module.COMMANDS, "status", lambda args: (_ for _ in ()).throw(OSError("odd")))
    code, _, err = cli("status")
    assert code == 1 and err == "error: unexpected OSError: odd (rerun with --debug for the traceback)\n"


def test_help_still_prints_the_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        main_module.main(["run", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: clbench run ") and "--seeds SEEDS" in out and len(out.splitlines()) > 30


def test_transformers_is_quiet_without_being_imported_up_front():
    """The commands other than run and doctor no longer import transformers before they start (a refusal costs
    no second for it), yet transformers, once a command imports it, still logs errors only and shows no
    progress bars."""
    script = ("import sys; from bench.cli.main import configure_logging; configure_logging(); "
              "assert 'transformers' not in sys.modules; from transformers.utils import logging; "
              "print(logging.get_verbosity(), logging.is_progress_bar_enabled())")
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(40), "False"]  # logging.ERROR


def test_the_demo_refuses_a_reports_folder_it_cannot_write(tmp_path, monkeypatch):
    """`clbench run` alone also writes ./reports: a file there is refused with the results folder's checks."""
    import argparse

    from bench.cli.run_options import check_folders

    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").write_text("not a folder")
    args = argparse.Namespace(config=None, results_dir=None, data_dir=None, demo=True)
    with pytest.raises(BenchError, match=r"^reports folder reports \(the demo's\) is a file, not a folder; run the "
                                         r"demo in a folder you can write to$"):
        check_folders(args, {})
    check_folders(argparse.Namespace(config=None, results_dir=None, data_dir=None, demo=False), {})  # not the demo
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]
